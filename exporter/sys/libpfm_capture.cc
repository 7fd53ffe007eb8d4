#include "sys/libpfm_capture.h"

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <set>

#include "core/capture.h"
#include "sys/pmu_libpfm.h"

namespace rdmascope::sys {
namespace {

constexpr std::string_view kDirectory = "perf/libpfm/";
constexpr size_t kMaxFileName = 200;
// A dozen short lines; anything near this is not an encoding.
constexpr size_t kMaxAnswerBytes = 4096;

// The fields libpfm4's perf encoding sets (pfm_get_os_event_encoding with PFM_OS_PERF_EVENT:
// the event's codes, the privilege levels asked for, its modifiers). A unit test checks that a
// live encoding round-trips byte for byte, so a field libpfm4 sets and this list lacks fails it.
struct Field {
  std::string_view key;
  uint64_t max;
  uint64_t (*get)(const perf_event_attr&);
  void (*set)(perf_event_attr&, uint64_t);
  bool required;
};

// One field a line (clang-format would stack them). The mask makes the range a bitfield
// accepts visible to the compiler; ParseLibpfmAnswer has refused larger values before.
// clang-format off
#define RDMASCOPE_FIELD(name, max, required)                                   \
  Field{#name, max, [](const perf_event_attr& a) -> uint64_t { return a.name; }, \
        [](perf_event_attr& a, uint64_t v) { a.name = v & (max); }, required}

constexpr uint64_t kU64 = UINT64_MAX;
const Field kFields[] = {
    RDMASCOPE_FIELD(type, UINT32_MAX, true),
    RDMASCOPE_FIELD(config, kU64, true),
    RDMASCOPE_FIELD(config1, kU64, false),
    RDMASCOPE_FIELD(config2, kU64, false),
    RDMASCOPE_FIELD(exclude_user, 1, false),
    RDMASCOPE_FIELD(exclude_kernel, 1, false),
    RDMASCOPE_FIELD(exclude_hv, 1, false),
    RDMASCOPE_FIELD(exclude_idle, 1, false),
    RDMASCOPE_FIELD(exclude_host, 1, false),
    RDMASCOPE_FIELD(exclude_guest, 1, false),
    RDMASCOPE_FIELD(precise_ip, 3, false),
    RDMASCOPE_FIELD(pinned, 1, false),
    RDMASCOPE_FIELD(exclusive, 1, false),
    RDMASCOPE_FIELD(freq, 1, false),
    RDMASCOPE_FIELD(sample_period, kU64, false),
};
// clang-format on
#undef RDMASCOPE_FIELD

bool Plain(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '=' || c == '+' || c == '-';
}

std::optional<uint64_t> ParseNumber(std::string_view text) {
  int base = 10;
  if (text.starts_with("0x")) {
    text.remove_prefix(2);
    base = 16;
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string Hex(uint64_t value) {
  char buffer[19] = "0x";
  const auto end = std::to_chars(buffer + 2, buffer + sizeof buffer, value, 16).ptr;
  return std::string(buffer, end);
}

}  // namespace

std::optional<std::string> LibpfmCaptureFile(std::string_view name) {
  std::string file;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (Plain(c) && !(i == 0 && c == '.')) {
      file += c;
      continue;
    }
    static constexpr char kDigits[] = "0123456789ABCDEF";
    const auto byte = static_cast<unsigned char>(c);
    file += {'%', kDigits[byte >> 4], kDigits[byte & 0xf]};
  }
  if (file.empty() || file.size() > kMaxFileName) return std::nullopt;
  return std::string(kDirectory) + file;
}

std::string FormatLibpfmAnswer(const LibpfmAnswer& answer) {
  if (!answer) {
    std::string reason = answer.error();
    std::erase_if(reason, [](char c) { return c == '\n' || c == '\r'; });
    return "error " + reason + "\n";
  }
  std::string text;
  for (const Field& field : kFields) {
    const uint64_t value = field.get(*answer);
    if (value == 0 && !field.required) continue;
    text +=
        std::string(field.key) + " " + (field.max > 3 ? Hex(value) : std::to_string(value)) + "\n";
  }
  return text;
}

std::expected<LibpfmAnswer, std::string> ParseLibpfmAnswer(std::string_view text) {
  if (text.starts_with("error ")) {
    std::string_view reason = text.substr(6);
    if (reason.ends_with('\n')) reason.remove_suffix(1);
    if (reason.empty() || reason.find('\n') != std::string_view::npos) {
      return std::unexpected("an error file holds one line: \"error <reason>\"");
    }
    return LibpfmAnswer(std::unexpect, std::string(reason));
  }
  perf_event_attr attr{};
  std::set<std::string_view> seen;
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    const std::string where = "line " + std::to_string(number);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) return std::unexpected(where + ": not \"key value\"");
    const std::string_view key = line.substr(0, space);
    const Field* field = nullptr;
    for (const Field& candidate : kFields) {
      if (candidate.key == key) field = &candidate;
    }
    if (field == nullptr) return std::unexpected(where + ": unknown field");
    if (!seen.insert(field->key).second) return std::unexpected(where + ": a field twice");
    const auto value = ParseNumber(line.substr(space + 1));
    if (!value || *value > field->max) {
      return std::unexpected(where + ": not a value of " + std::string(key));
    }
    field->set(attr, *value);
  }
  for (const Field& field : kFields) {
    if (field.required && !seen.contains(field.key)) {
      return std::unexpected("no " + std::string(field.key));
    }
  }
  return LibpfmAnswer(attr);
}

LibpfmAnswer CapturedLibpfmEncode(std::string_view name) {
  capture::Session* session = capture::Active();
  const auto file = LibpfmCaptureFile(name);
  if (session == nullptr || !file) return LibpfmEncode(name);
  if (!session->replaying()) {
    LibpfmAnswer answer = LibpfmEncode(name);
    session->writer()->File(*file, FormatLibpfmAnswer(answer));
    return answer;
  }
  const auto text = session->reader()->ReadFile(session->sample(), *file, kMaxAnswerBytes);
  if (!text) {
    return std::unexpected(text.error() == ENOENT
                               ? "the capture has no libpfm4 encoding of this name (" + *file + ")"
                               : "the capture's " + *file +
                                     " cannot be read: " + capture::ErrnoName(text.error()));
  }
  auto answer = ParseLibpfmAnswer(*text);
  if (!answer) return std::unexpected("the capture's " + *file + " is refused: " + answer.error());
  return std::move(*answer);
}

}  // namespace rdmascope::sys
