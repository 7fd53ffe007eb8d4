// The facts a capture keeps beside the preload stats files it read (docs/capture.md
// "Occupancy"), shared by the recording half (occupancy_capture.cc) and the replaying half
// (occupancy_replay.cc): written as JSON by the one, and read back by the other as hostile
// input. Only the shape written here is accepted: a mode of a file type Linux has, numbers in
// their types' ranges, at most kMaxBytes.
//
//   run/rdmascope.stat.json           {"mode": "040700", "uid": .., "dev": .., "ino": ..,
//                                      "size": .., "exporter_euid": ..}
//   run/rdmascope/NAME.stat.json      {"lstat": {...}, "open": "ok" | a refusal's name,
//                                      "stat": {...}, "held": true | false | null}
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "sys/untrusted_file.h"

namespace rdmascope::occupancy_facts {

// The suffix of a name's facts file beside it.
inline constexpr std::string_view kSuffix = ".stat.json";
// A facts file is a few hundred bytes; anything near this is not one.
inline constexpr size_t kMaxBytes = 4096;

// st_mode (octal text), uid, dev, ino and size of `st`.
nlohmann::json StatJson(const struct stat& st);
// Back from that shape; why not (naming `what`) otherwise.
std::expected<struct stat, std::string> ParseStat(const nlohmann::json& facts, const char* what);

// The directory's facts: its stat and the euid of the process that captured it.
struct DirectoryFacts {
  struct stat st {};
  uint32_t exporter_euid = 0;
};
std::expected<DirectoryFacts, std::string> ParseDirectoryFacts(std::string_view text);

// One name's facts. `lstat` is required; the rest says what the collection did with it.
struct NameFacts {
  struct stat lstat {};
  // The open's result: "ok", or a refusal's name (sys::RefusalName). Absent: not opened (the
  // collection stopped before it: beyond its caps).
  std::optional<std::string> open;
  // What fstat said of the opened file; the error when absent or malformed.
  std::expected<struct stat, std::string> stat = std::unexpected(std::string("\"stat\": missing"));
  std::optional<bool> held;  // the liveness lock's answer; nullopt: not asked, or unknown
};
std::expected<NameFacts, std::string> ParseNameFacts(std::string_view text);

// A refusal's name back to the refusal (an unknown one: kOpenFailed).
sys::Refusal RefusalNamed(std::string_view name);

}  // namespace rdmascope::occupancy_facts
