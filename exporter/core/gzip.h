// gzip (RFC 1952) with zlib: /metrics' Content-Encoding and pprof's gzipped profiles.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rdmascope {

// The deflate level /metrics uses: see docs/benchmarks.md (levels 1, 3, 6 measured).
inline constexpr int kGzipLevel = 1;

// The gzip stream (RFC 1952) of `input`; nullopt if zlib fails (then serve it uncompressed).
// Each thread keeps one deflate state (~270 KB) and resets it per call instead of allocating
// and initialising a new one per scrape.
std::optional<std::string> GzipCompress(std::string_view input, int level = kGzipLevel);

}  // namespace rdmascope
