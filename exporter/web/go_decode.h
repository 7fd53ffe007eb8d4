// How exporter-toolkit's Go reads the web config's numbers: yaml.v2 (go.yaml.in/yaml/v2, the
// library its getConfig decodes with) into Go's int and time.Duration, and Go's
// time.ParseDuration. Ported so that a rate_limit exporter-toolkit accepts means the same here,
// and one it refuses is refused here.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace rdmascope::web {

// A YAML scalar as yaml.v2 sees it: its text and whether it was plain (unquoted and untagged,
// so resolved by its form: 10 is an int, "10" a string).
struct YamlScalar {
  std::string_view text;
  bool plain = true;
};

// Go's time.ParseDuration: "1s", "1.5h", "-2m30s", "300ms", "0"; units ns, us (µs, μs), ms, s,
// m, h (no d or w: this is not Prometheus's duration). The error is Go's text, e.g.
// `time: missing unit in duration "10"`.
std::expected<int64_t, std::string> ParseGoDuration(std::string_view text);

// yaml.v2 decoding a scalar into a Go int (64 bits): a plain integer (decimal, 0x, 0o, 0b,
// a leading 0 for octal, underscores ignored) or a plain float, truncated toward zero (2.9 is
// 2); null is 0. A string, a bool or a number out of range is an error ("cannot unmarshal").
std::expected<int64_t, std::string> DecodeGoInt(const YamlScalar& scalar);

// yaml.v2 decoding a scalar into time.Duration: a plain number is nanoseconds (as DecodeGoInt:
// `interval: 1` is 1 ns), any other text goes through ParseGoDuration; null is 0.
std::expected<int64_t, std::string> DecodeGoDuration(const YamlScalar& scalar);

}  // namespace rdmascope::web
