// Structured logging in logfmt (`ts=... level=info msg="..." key=value`), the format
// node_exporter users already grep and ship. Thread-safe; writes to stderr. When stderr is
// systemd's journal stream ($JOURNAL_STREAM names it), each line starts with sd-daemon(3)'s
// priority prefix (`<3>` error, `<4>` warn, `<6>` info, `<7>` debug), which journald strips
// and files as the entry's PRIORITY (`journalctl -p warning`).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace rdmascope::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

std::optional<Level> ParseLevel(std::string_view name);
void SetLevel(Level level);
bool Enabled(Level level);

using Field = std::pair<std::string_view, std::string>;

void Write(Level level, std::string_view msg, std::initializer_list<Field> fields = {});

inline void Debug(std::string_view msg, std::initializer_list<Field> fields = {}) {
  if (Enabled(Level::kDebug)) Write(Level::kDebug, msg, fields);
}
inline void Info(std::string_view msg, std::initializer_list<Field> fields = {}) {
  Write(Level::kInfo, msg, fields);
}
inline void Warn(std::string_view msg, std::initializer_list<Field> fields = {}) {
  Write(Level::kWarn, msg, fields);
}
inline void Error(std::string_view msg, std::initializer_list<Field> fields = {}) {
  Write(Level::kError, msg, fields);
}

// True if `journal_stream` (the value of $JOURNAL_STREAM: "<device>:<inode>" in decimal, see
// systemd.exec(5)) names the file `fd` is open on. False for nullptr or a malformed value.
bool IsJournalStream(const char* journal_stream, int fd);

// Decides again, from $JOURNAL_STREAM and stderr, whether lines get the priority prefix
// (otherwise decided at the first line written). For tests that redirect stderr.
void DetectJournalStream();

// Quotes a logfmt value when it needs it (spaces, quotes, '=', control bytes).
std::string QuoteValue(std::string_view value);

}  // namespace rdmascope::log
