// What a capture's index.json says about the host it recorded (docs/capture.md "index.json"),
// for those who judge it rather than replay it: `doctor --replay` names each host after it and
// turns its samples' times into counter windows. The Reader has checked the format version
// and the sample count already; this reads the rest, every field optional but the sample
// times, which a report's rates cannot do without.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::capture {

struct IndexFacts {
  std::string hostname;  // as recorded (a hash under --redact); empty when absent
  std::string kernel_release;
  bool redacted = false;
  // "redaction": where the key came from ("file": --redact.key-file, "drawn": this capture's
  // own) and its id; captures redacted with one id hash a value alike.
  std::string redaction_key;
  std::string redaction_key_id;
  std::vector<std::string> collectors;  // "collectors_replayed": those that ran when it was taken
  // Each sample's time as written ("2026-12-06T15:00:00.123Z"), and in seconds since the
  // first sample (exact to the millisecond: what counter rates divide by).
  std::vector<std::string> sample_times;
  std::vector<double> sample_seconds;
};

// index.json's text (Reader::index_text) -> its facts; a message for an index whose samples
// lack a readable time.
std::expected<IndexFacts, std::string> ReadIndexFacts(std::string_view index_text);

// "YYYY-MM-DDTHH:MM:SS[.fff]Z" (what the Writer writes; RFC 3339 in UTC) -> Unix time in
// milliseconds (finer digits are dropped).
std::optional<int64_t> ParseUtcMillis(std::string_view text);

// Each time's seconds since the first: IndexFacts::sample_seconds; nullopt if one is unreadable.
std::optional<std::vector<double>> SecondsSinceFirst(const std::vector<std::string>& times);

}  // namespace rdmascope::capture
