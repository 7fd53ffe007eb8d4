#include "core/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace rdmascope::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::mutex g_write_mutex;
// -1: not decided yet; 0: plain lines; 1: lines with the journal's priority prefix.
std::atomic<int> g_journal{-1};

// sd-daemon.h's SD_ERR, SD_WARNING, SD_INFO, SD_DEBUG (syslog's LOG_ERR ... LOG_DEBUG).
const char* PriorityPrefix(Level level) {
  switch (level) {
    case Level::kDebug:
      return "<7>";
    case Level::kInfo:
      return "<6>";
    case Level::kWarn:
      return "<4>";
    case Level::kError:
      return "<3>";
  }
  return "<6>";
}

bool ParseDecimal(std::string_view text, unsigned long long& value) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "unknown";
}

std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(millis));
  return buf;
}

}  // namespace

std::optional<Level> ParseLevel(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  return std::nullopt;
}

bool IsJournalStream(const char* journal_stream, int fd) {
  if (journal_stream == nullptr) return false;
  const std::string_view value(journal_stream);
  const size_t colon = value.find(':');
  unsigned long long device = 0;
  unsigned long long inode = 0;
  if (colon == std::string_view::npos || !ParseDecimal(value.substr(0, colon), device) ||
      !ParseDecimal(value.substr(colon + 1), inode)) {
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == device &&
         static_cast<unsigned long long>(st.st_ino) == inode;
}

void DetectJournalStream() {
  g_journal.store(IsJournalStream(std::getenv("JOURNAL_STREAM"), STDERR_FILENO) ? 1 : 0);
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level)); }

bool Enabled(Level level) { return static_cast<int>(level) >= g_level.load(); }

std::string QuoteValue(std::string_view value) {
  bool needs_quotes = value.empty();
  for (const char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      needs_quotes = true;
      break;
    }
  }
  if (!needs_quotes) return std::string(value);
  std::string out = "\"";
  for (const char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

void Write(Level level, std::string_view msg, std::initializer_list<Field> fields) {
  if (!Enabled(level)) return;
  if (g_journal.load() < 0) DetectJournalStream();
  std::string line = g_journal.load() == 1 ? PriorityPrefix(level) : "";
  line += "ts=" + Timestamp() + " level=" + LevelName(level) + " msg=" + QuoteValue(msg);
  for (const auto& [key, value] : fields) {
    line += ' ';
    line += key;
    line += '=';
    line += QuoteValue(value);
  }
  line += '\n';
  std::lock_guard lock(g_write_mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace rdmascope::log
