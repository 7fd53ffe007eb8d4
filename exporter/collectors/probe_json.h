// Reading the eBPF probes' snapshots back from a capture (bpf/mr.json, bpf/verbs.json:
// docs/capture.md "eBPF probes"). A capture is hostile input: every value is checked for its
// type and range before it reaches a collector, a field the reader needs and does not find
// refuses the file (a counter it lacks is not a 0), and fields it does not know are ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace rdmascope::probe_json {

// The file's version; a reader refuses a newer one.
inline constexpr int kVersion = 1;
// A snapshot of the default bounds (4096 processes, 65536 queues) is well under 2 MiB; more
// than this is not one the probes made.
inline constexpr size_t kMaxBytes = 8 << 20;
// Entries in any one array or object: above what any probe map holds by default.
inline constexpr size_t kMaxEntries = 1 << 16;
// comm is 16 bytes, a device name 64 (IB_DEVICE_NAME_MAX); U+FFFD for a byte that is not
// UTF-8 takes three.
inline constexpr size_t kMaxString = 256;
// A message (why the probes did not attach): libbpf's and the kernel's words, and paths.
inline constexpr size_t kMaxMessage = 4096;
// The signed gauges (outstanding regions and bytes) are summed over processes by comm: within
// this magnitude, kMaxEntries of them cannot overflow an int64.
inline constexpr int64_t kMaxGauge = int64_t{1} << 46;

// What makes a file refused: the reader turns it into the source's error.
struct Malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Each throws Malformed naming the field when it is absent or out of its range.
const nlohmann::json& Member(const nlohmann::json& object, std::string_view key);
const nlohmann::json& Object(const nlohmann::json& object, std::string_view key);
const nlohmann::json& Array(const nlohmann::json& object, std::string_view key);
uint64_t U64(const nlohmann::json& value, std::string_view what);
uint32_t U32(const nlohmann::json& value, std::string_view what);
int64_t Gauge(const nlohmann::json& value, std::string_view what);
double NonNegative(const nlohmann::json& value, std::string_view what);
bool Bool(const nlohmann::json& value, std::string_view what);
std::string String(const nlohmann::json& value, std::string_view what);
std::string Message(const nlohmann::json& value, std::string_view what);  // not empty
std::string Key(const std::string& key, std::string_view what);  // an object's key, as String
// The member `key` of `object`, checked as above.
inline uint64_t U64At(const nlohmann::json& object, std::string_view key) {
  return U64(Member(object, key), key);
}
inline uint32_t U32At(const nlohmann::json& object, std::string_view key) {
  return U32(Member(object, key), key);
}

// What `read` returns, or why the file is refused: a Malformed's words, or anything the JSON
// library throws (not reached by the readers' checks, each value's type is tested first; a
// refusal if it is).
template <typename Read>
auto Refusing(Read&& read) -> std::expected<std::invoke_result_t<Read>, std::string> {
  try {
    return read();
  } catch (const Malformed& error) {
    return std::unexpected(std::string(error.what()));
  } catch (const nlohmann::json::exception& error) {
    return std::unexpected(std::string("not a snapshot: ") + error.what());
  }
}

// The whole file: parsed within kMaxBytes, an object of this version and probe ("mr"), else
// Malformed.
nlohmann::json Parse(std::string_view text, std::string_view probe);
// The file's text (compact; a byte of a string that is not UTF-8 becomes U+FFFD).
std::string Dump(const nlohmann::json& body);

}  // namespace rdmascope::probe_json
