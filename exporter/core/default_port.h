// rdmascope's port: what `serve` listens on and `doctor` asks when told nothing else
// (docs/configuration.md).
#pragma once

namespace rdmascope {

inline constexpr int kDefaultPort = 9879;

}  // namespace rdmascope
