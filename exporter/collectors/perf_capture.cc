#include "collectors/perf_capture.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "core/capture.h"
#include "core/log.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace {

// A group's read is a few lines; an open's answer is "ok".
constexpr size_t kMaxReadText = 64 << 10;
constexpr size_t kMaxOpenText = 64;
// A directory name's limit is 255 bytes; a group of many events is named by a hash instead.
constexpr size_t kMaxGroupName = 200;
constexpr int kMaxCpu = 1 << 16;

std::string GroupName(const std::vector<perf_event_attr>& attrs) {
  std::string name;
  for (const perf_event_attr& attr : attrs) {
    char member[96];
    std::snprintf(member, sizeof member, "%st%" PRIu32 "-c%" PRIx64, name.empty() ? "" : "+",
                  attr.type, static_cast<uint64_t>(attr.config));
    name += member;
    if (attr.config1 != 0 || attr.config2 != 0) {
      std::snprintf(member, sizeof member, "-c1%" PRIx64 "-c2%" PRIx64,
                    static_cast<uint64_t>(attr.config1), static_cast<uint64_t>(attr.config2));
      name += member;
    }
  }
  if (name.size() <= kMaxGroupName) return name;
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64 of the readable name
  for (const char c : name) hash = (hash ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  char hashed[32];
  std::snprintf(hashed, sizeof hashed, "h%016" PRIx64, hash);
  return hashed;
}

std::optional<uint64_t> Unsigned(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Recording: the live group read, its counts (or the failure) written into the open sample.
class RecordingGroup : public PerfCounterGroup {
 public:
  RecordingGroup(std::unique_ptr<PerfCounterGroup> live, std::string dir)
      : live_(std::move(live)), dir_(std::move(dir)) {}
  std::optional<std::vector<sys::PerfReading>> Read() const override {
    auto readings = live_->Read();
    if (capture::Session* session = capture::Active(); session && session->writer()) {
      if (readings) {
        session->writer()->File(dir_ + "/read", FormatPerfReadings(*readings));
      } else {
        session->writer()->Errno(dir_ + "/read", EIO);  // a failed or short read
      }
    }
    return readings;
  }

 private:
  std::unique_ptr<PerfCounterGroup> live_;
  std::string dir_;
};

// Replaying: each read answered from the sample replayed now.
class ReplayedGroup : public PerfCounterGroup {
 public:
  ReplayedGroup(std::string dir, size_t members) : dir_(std::move(dir)), members_(members) {}
  std::optional<std::vector<sys::PerfReading>> Read() const override {
    const capture::Session* session = capture::Active();
    if (session == nullptr || !session->replaying()) return std::nullopt;
    const auto text = session->reader()->ReadFile(session->sample(), dir_ + "/read", kMaxReadText);
    if (!text) return std::nullopt;  // not recorded in this sample: counts missing, not 0
    auto readings = ParsePerfReadings(*text, members_);
    if (!readings) {
      log::Debug("capture's perf read refused",
                 {{"file", dir_ + "/read"},
                  {"why", "not one \"value time_enabled time_running\" line per member"}});
    }
    return readings;
  }

 private:
  std::string dir_;
  size_t members_;
};

}  // namespace

std::optional<std::string> PerfCaptureDir(const std::vector<perf_event_attr>& attrs, int cpu) {
  if (attrs.empty() || cpu < 0 || cpu >= kMaxCpu) return std::nullopt;
  return "perf/" + GroupName(attrs) + "/cpu" + std::to_string(cpu);
}

std::string FormatPerfReadings(const std::vector<sys::PerfReading>& readings) {
  std::string text;
  for (const sys::PerfReading& reading : readings) {
    text += std::to_string(reading.value) + " " + std::to_string(reading.enabled) + " " +
            std::to_string(reading.running) + "\n";
  }
  return text;
}

std::optional<std::vector<sys::PerfReading>> ParsePerfReadings(std::string_view text,
                                                               size_t members) {
  std::vector<sys::PerfReading> readings;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    std::optional<uint64_t> fields[3];
    for (auto& field : fields) {
      const size_t space = std::min(line.find(' '), line.size());
      field = Unsigned(line.substr(0, space));
      line.remove_prefix(std::min(space + 1, line.size()));
    }
    if (!fields[0] || !fields[1] || !fields[2] || !line.empty()) return std::nullopt;
    if (readings.size() == members) return std::nullopt;
    readings.push_back({.value = *fields[0], .enabled = *fields[1], .running = *fields[2]});
  }
  if (readings.size() != members) return std::nullopt;
  return readings;
}

std::expected<std::unique_ptr<PerfCounterGroup>, int> CapturedPerfHost::Open(
    const std::vector<perf_event_attr>& attrs, int cpu) const {
  capture::Session* session = capture::Active();
  if (session == nullptr) return live_->Open(attrs, cpu);
  const auto dir = PerfCaptureDir(attrs, cpu);
  if (!dir) return std::unexpected(EINVAL);
  if (!session->replaying()) {
    auto group = live_->Open(attrs, cpu);
    if (!group) {
      // The errno as the file's text, not open.errno: a stored ENOENT (no such PMU event) must
      // not read as a file the capture lacks.
      session->writer()->File(*dir + "/open", capture::ErrnoName(group.error()) + "\n");
      return std::unexpected(group.error());
    }
    session->writer()->File(*dir + "/open", "ok\n");
    return std::make_unique<RecordingGroup>(std::move(*group), *dir);
  }
  const auto answer = session->reader()->ReadFile(session->sample(), *dir + "/open", kMaxOpenText);
  if (!answer) {
    // Not in the capture (recorded with other events, or before perf was recorded), or not a
    // file it may read. ENODATA makes the events' reason "No data available", not a verdict on
    // the host's PMU.
    log::Warn("perf group not in the capture: its events are not counted",
              {{"file", *dir + "/open"}, {"err", capture::ErrnoName(answer.error())}});
    return std::unexpected(ENODATA);
  }
  const std::string_view text = sysfs::Trim(*answer);
  if (text == "ok") return std::make_unique<ReplayedGroup>(*dir, attrs.size());
  // perf_event_open's errno as the host gave it: the events' reason as live (EACCES...).
  if (const auto error = capture::ErrnoFromName(text); error && *error > 0) {
    return std::unexpected(*error);
  }
  log::Warn("capture's perf open answer refused",
            {{"file", *dir + "/open"}, {"why", "neither \"ok\" nor an errno's name"}});
  return std::unexpected(EBADMSG);
}

}  // namespace rdmascope
