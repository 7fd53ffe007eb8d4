#include "collectors/occupancy_capture.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "collectors/occupancy_anchor.h"
#include "core/capture.h"
#include "core/log.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace {

using nlohmann::json;
using Inode = std::pair<dev_t, ino_t>;

// A process's maps, as the anchor reads them (occupancy_anchor.cc).
constexpr size_t kMaxMapsBytes = 32 << 20;

std::string Octal(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0%llo", static_cast<unsigned long long>(value));
  return text;
}

json StatFacts(const struct stat& st) {
  return {{"mode", Octal(st.st_mode)},
          {"uid", st.st_uid},
          {"dev", static_cast<uint64_t>(st.st_dev)},
          {"ino", static_cast<uint64_t>(st.st_ino)},
          {"size", static_cast<uint64_t>(st.st_size < 0 ? 0 : st.st_size)}};
}

std::optional<uint64_t> Unsigned(const json& facts, const char* key, uint64_t max) {
  const auto it = facts.find(key);
  if (it == facts.end() || !it->is_number_unsigned()) return std::nullopt;
  const uint64_t value = it->get<uint64_t>();
  if (value > max) return std::nullopt;
  return value;
}

// Only the shape StatFacts writes: a mode of a file type Linux has, numbers in their types'
// ranges. Anything else is a facts file this rdmascope did not write.
std::expected<struct stat, std::string> ParseStatFacts(const json& facts, const char* what) {
  const auto bad = [&](const char* why) {
    return std::unexpected(std::string("\"") + what + "\": " + why);
  };
  if (!facts.is_object()) return bad("not an object");
  const auto mode_text = facts.find("mode");
  if (mode_text == facts.end() || !mode_text->is_string()) return bad("no octal \"mode\"");
  const std::string& text = mode_text->get_ref<const std::string&>();
  uint32_t mode = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || mode > 0177777) {
    return bad("\"mode\" is not an octal st_mode");
  }
  switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
    case S_IFIFO:
    case S_IFSOCK:
    case S_IFCHR:
    case S_IFBLK:
      break;
    default:
      return bad("\"mode\" has no file type");
  }
  const auto uid = Unsigned(facts, "uid", UINT32_MAX);
  const auto dev = Unsigned(facts, "dev", UINT64_MAX);
  const auto ino = Unsigned(facts, "ino", UINT64_MAX);
  const auto size = Unsigned(facts, "size", INT64_MAX);
  if (!uid || !dev || !ino || !size) return bad("\"uid\", \"dev\", \"ino\" or \"size\" missing");
  struct stat st {};
  st.st_mode = mode;
  st.st_uid = static_cast<uid_t>(*uid);
  st.st_dev = static_cast<dev_t>(*dev);
  st.st_ino = static_cast<ino_t>(*ino);
  st.st_size = static_cast<off_t>(*size);
  return st;
}

sys::Refusal RefusalNamed(std::string_view name) {
  for (const sys::Refusal refusal : {sys::Refusal::kOpenFailed, sys::Refusal::kNotRegular,
                                     sys::Refusal::kTooLarge, sys::Refusal::kShortRead}) {
    if (name == sys::RefusalName(refusal)) return refusal;
  }
  return sys::Refusal::kOpenFailed;
}

// ---- Recording

// Other processes' maps read live and kept, in the sample, as the lines that map a stats file
// listed in this collection: the anchor's answer is the same from them, and the capture holds
// no process's layout or the paths of its other files. Namespaces and the rest as DirectProcfs
// (through core/sysfs: recorded there).
class RecordingProcfs final : public sys::PrivilegedProcfs {
 public:
  explicit RecordingProcfs(std::filesystem::path procfs)
      : procfs_(std::move(procfs)), direct_(procfs_) {}
  void Reset() {
    std::lock_guard lock(mutex_);
    files_.clear();
  }
  void Listed(const struct stat& st) {
    std::lock_guard lock(mutex_);
    files_.insert({st.st_dev, st.st_ino});
  }
  std::expected<std::string, int> Maps(uint32_t pid, size_t max_bytes) override {
    const auto path = procfs_ / std::to_string(pid) / "maps";
    // Past the boundary (ReadOwnFile reads the live file, recording nothing): what is kept is
    // the filtered text below, not the whole file core/sysfs would record.
    std::expected<std::string, int> text = std::unexpected(ENOENT);
    if (pid != 0) text = sysfs::ReadOwnFile(path, std::min(max_bytes, kMaxMapsBytes));
    capture::Session* session = capture::Active();
    const auto rel = session != nullptr ? session->layout().Relative(path) : std::nullopt;
    if (rel && session->writer() != nullptr) {
      if (text) {
        std::lock_guard lock(mutex_);
        session->writer()->File(*rel, MapsLinesNaming(*text, files_));
      } else {
        session->writer()->Errno(*rel, text.error());
      }
    }
    return text;
  }
  std::expected<sys::OpenedFile, std::string> OpenMapping(uint32_t pid,
                                                          const sys::MappedFile& mapping) override {
    return direct_.OpenMapping(pid, mapping);
  }
  std::expected<sys::OpenedFile, std::string> OpenInRoot(uint32_t pid,
                                                         std::string_view path) override {
    return direct_.OpenInRoot(pid, path);
  }
  std::vector<std::optional<std::string>> Namespaces(sys::NamespaceKind kind,
                                                     std::span<const uint32_t> pids) override {
    return direct_.Namespaces(kind, pids);
  }
  std::expected<sys::UverbsHolderMap, std::string> UverbsHolders() override {
    return direct_.UverbsHolders();
  }
  bool InThisProcess() const override { return true; }

 private:
  const std::filesystem::path procfs_;
  sys::DirectProcfs direct_;
  std::mutex mutex_;
  std::set<Inode> files_;
};

// Each name's facts, gathered while the collection asks, written when it ends.
struct Facts {
  capture::Writer& writer;
  std::string rel;  // the directory in the sample
  std::map<std::string, json> by_name;
  void Bytes(const std::string& name, std::string_view bytes) {
    writer.File(rel + "/" + name, bytes);
  }
};

class RecordingFile final : public StatsFile {
 public:
  RecordingFile(std::unique_ptr<StatsFile> live, std::string name, Facts& facts)
      : live_(std::move(live)), name_(std::move(name)), facts_(facts) {}
  const struct stat& stat() const override { return live_->stat(); }
  std::optional<bool> Held() override {
    const auto held = live_->Held();
    facts_.by_name[name_]["held"] = held ? json(*held) : json(nullptr);
    return held;
  }
  bool ReadHead(void* out, size_t size) override {
    if (!live_->ReadHead(out, size)) return false;
    facts_.Bytes(name_, std::string_view(static_cast<const char*>(out), size));
    return true;
  }
  std::expected<void, sys::Refusal> ReadAll(std::vector<uint8_t>& out) override {
    auto read = live_->ReadAll(out);
    facts_.Bytes(name_, std::string_view(reinterpret_cast<const char*>(out.data()), out.size()));
    return read;
  }

 private:
  std::unique_ptr<StatsFile> live_;
  std::string name_;
  Facts& facts_;
};

class RecordingDirectory final : public StatsDirectory {
 public:
  RecordingDirectory(std::unique_ptr<StatsDirectory> live, capture::Writer& writer, std::string rel,
                     RecordingProcfs& procfs)
      : live_(std::move(live)), facts_{writer, std::move(rel), {}}, procfs_(procfs) {}
  ~RecordingDirectory() override {
    for (const auto& [name, facts] : facts_.by_name) {
      facts_.writer.File(facts_.rel + "/" + name + std::string(kStatsFactsSuffix),
                         facts.dump(2) + "\n");
    }
  }
  RecordingDirectory(const RecordingDirectory&) = delete;
  RecordingDirectory& operator=(const RecordingDirectory&) = delete;

  bool Private() const override { return live_->Private(); }
  std::vector<std::string> Names() override {
    std::vector<std::string> names = live_->Names();
    facts_.writer.Listing(facts_.rel, names);
    return names;
  }
  std::expected<struct stat, std::string> Lstat(const std::string& name) override {
    auto st = live_->Lstat(name);
    if (st) {
      facts_.by_name[name]["lstat"] = StatFacts(*st);
      procfs_.Listed(*st);
    }
    return st;
  }
  std::expected<std::unique_ptr<StatsFile>, sys::Refusal> Open(const std::string& name,
                                                               size_t max_size) override {
    auto file = live_->Open(name, max_size);
    json& facts = facts_.by_name[name];
    if (!file) {
      facts["open"] = sys::RefusalName(file.error());
      return std::unexpected(file.error());
    }
    facts["open"] = "ok";
    facts["stat"] = StatFacts((*file)->stat());
    procfs_.Listed((*file)->stat());
    return std::make_unique<RecordingFile>(std::move(*file), name, facts_);
  }
  void RemoveIfSame(const std::string&, const struct stat&) override {}

 private:
  std::unique_ptr<StatsDirectory> live_;
  Facts facts_;
  RecordingProcfs& procfs_;
};

class RecordingSource final : public StatsSource {
 public:
  RecordingSource(const std::filesystem::path& dir, std::string rel,
                  const std::filesystem::path& procfs, capture::Writer& writer)
      : procfs_(std::make_shared<RecordingProcfs>(procfs)),
        live_(dir, procfs_, /*reader_lock=*/false, /*deletes=*/false),
        rel_(std::move(rel)),
        writer_(writer) {}
  std::expected<std::unique_ptr<StatsDirectory>, int> OpenDirectory() override {
    procfs_->Reset();
    auto live = live_.OpenDirectory();
    if (!live) {
      writer_.Errno(rel_, live.error());
      return live;
    }
    if (const auto st = (*live)->Stat()) {
      json facts = StatFacts(*st);
      facts["exporter_euid"] = ::geteuid();
      writer_.File(rel_ + std::string(kStatsFactsSuffix), facts.dump(2) + "\n");
    }
    return std::make_unique<RecordingDirectory>(std::move(*live), writer_, rel_, *procfs_);
  }
  bool deletes() const override { return false; }
  std::shared_ptr<sys::PrivilegedProcfs> procfs() const override { return procfs_; }

 private:
  std::shared_ptr<RecordingProcfs> procfs_;
  LiveStatsSource live_;
  std::string rel_;
  capture::Writer& writer_;
};

// ---- Replaying

// One warning per replayed capture for its stats files refused (the counter has each one).
class RefusalWarning {
 public:
  void operator()(const std::string& file, const std::string& why) {
    if (logged_.exchange(true)) return;
    log::Warn("capture's preload stats files refused: their series are missing",
              {{"file", file}, {"err", why}});
  }

 private:
  std::atomic<bool> logged_{false};
};

class ReplayFile final : public StatsFile {
 public:
  ReplayFile(const capture::Reader& reader, size_t sample, std::string path, struct stat st,
             std::optional<bool> held, RefusalWarning& warn)
      : reader_(reader),
        sample_(sample),
        path_(std::move(path)),
        stat_(st),
        held_(held),
        warn_(warn) {}
  const struct stat& stat() const override { return stat_; }
  std::optional<bool> Held() override { return held_; }
  bool ReadHead(void* out, size_t size) override {
    const auto bytes = Bytes();
    if (!bytes || bytes->size() < size) return false;
    std::memcpy(out, bytes->data(), size);
    return true;
  }
  std::expected<void, sys::Refusal> ReadAll(std::vector<uint8_t>& out) override {
    const auto bytes = Bytes();
    out.clear();
    if (!bytes) {
      warn_(path_, std::strerror(bytes.error()));
      switch (bytes.error()) {
        case EFBIG:  // larger than its facts say: they lie, or it grew
          return std::unexpected(sys::Refusal::kTooLarge);
        case EINVAL:  // a FIFO, a device, a directory
          return std::unexpected(sys::Refusal::kNotRegular);
        default:  // absent, a link out of the capture
          return std::unexpected(sys::Refusal::kOpenFailed);
      }
    }
    out.assign(bytes->begin(), bytes->end());
    if (out.size() != static_cast<size_t>(stat_.st_size)) {
      warn_(path_, "cut short: " + std::to_string(out.size()) + " of " +
                       std::to_string(stat_.st_size) + " bytes");
      return std::unexpected(sys::Refusal::kShortRead);
    }
    return {};
  }

 private:
  // Never more than fstat said: a larger file is EFBIG before any read.
  std::expected<std::string, int> Bytes() const {
    return reader_.ReadFile(sample_, path_, static_cast<size_t>(stat_.st_size));
  }
  const capture::Reader& reader_;
  const size_t sample_;
  const std::string path_;
  const struct stat stat_;
  const std::optional<bool> held_;
  RefusalWarning& warn_;
};

class ReplayDirectory final : public StatsDirectory {
 public:
  ReplayDirectory(const capture::Reader& reader, size_t sample, std::string rel,
                  std::vector<std::string> names, RefusalWarning& warn)
      : reader_(reader),
        sample_(sample),
        rel_(std::move(rel)),
        names_(std::move(names)),
        warn_(warn) {}

  // As live: owned by the exporter's user, writable by nobody else; here the capturing
  // process's euid. Facts absent or refused: not private, so every claim is checked.
  bool Private() const override {
    const auto text =
        reader_.ReadFile(sample_, rel_ + std::string(kStatsFactsSuffix), kMaxStatsFactsBytes);
    if (!text) return false;
    const json facts = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    const auto st = ParseStatFacts(facts, "directory");
    const auto euid =
        facts.is_object() ? Unsigned(facts, "exporter_euid", UINT32_MAX) : std::nullopt;
    if (!st || !euid) {
      warn_(rel_ + std::string(kStatsFactsSuffix), st ? "no \"exporter_euid\"" : st.error());
      return false;
    }
    return S_ISDIR(st->st_mode) && st->st_uid == *euid && (st->st_mode & 022) == 0;
  }
  std::vector<std::string> Names() override { return names_; }
  std::expected<struct stat, std::string> Lstat(const std::string& name) override {
    const std::string path = rel_ + "/" + name;
    const std::string facts_path = path + std::string(kStatsFactsSuffix);
    const auto text = reader_.ReadFile(sample_, facts_path, kMaxStatsFactsBytes);
    const auto refuse = [&](const std::string& why) {
      warn_(facts_path, why);
      return std::unexpected(facts_path + ": " + why);
    };
    if (!text) {
      if (text.error() != ENOENT) return refuse(std::strerror(text.error()));
      // No facts: the name was gone when the capture's collection looked (an empty
      // directory keeps it listed), unless bytes were kept for it.
      const auto bytes = reader_.ReadFile(sample_, path, 1);
      if (!bytes && (bytes.error() == ENOENT || bytes.error() == EINVAL)) {
        return std::unexpected(std::string());
      }
      return refuse("absent beside the stats file's bytes");
    }
    json facts = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!facts.is_object()) return refuse("not a JSON object");
    const auto lstat = facts.find("lstat");
    if (lstat == facts.end()) return refuse("no \"lstat\"");
    auto st = ParseStatFacts(*lstat, "lstat");
    if (!st) return refuse(st.error());
    facts_[name] = std::move(facts);
    return st;
  }
  std::expected<std::unique_ptr<StatsFile>, sys::Refusal> Open(const std::string& name,
                                                               size_t max_size) override {
    const auto found = facts_.find(name);
    if (found == facts_.end()) return std::unexpected(sys::Refusal::kOpenFailed);
    const json& facts = found->second;
    const std::string path = rel_ + "/" + name;
    const auto open = facts.find("open");
    if (open == facts.end() || !open->is_string()) {
      // Not opened when the capture was taken (beyond its caps): nothing of it to read.
      return std::unexpected(sys::Refusal::kOpenFailed);
    }
    if (open->get_ref<const std::string&>() != "ok") {
      return std::unexpected(RefusalNamed(open->get_ref<const std::string&>()));
    }
    const auto stat = facts.find("stat");
    auto st = stat == facts.end() ? std::unexpected(std::string("\"stat\": missing"))
                                  : ParseStatFacts(*stat, "stat");
    const auto lstat = ParseStatFacts(facts.at("lstat"), "lstat");
    if (!st) {
      warn_(path + std::string(kStatsFactsSuffix), st.error());
      return std::unexpected(sys::Refusal::kOpenFailed);
    }
    // What OpenUntrusted checks of the file it opened: a regular file, the inode listed,
    // within the bound.
    if (!S_ISREG(st->st_mode) || st->st_dev != lstat->st_dev || st->st_ino != lstat->st_ino) {
      warn_(path + std::string(kStatsFactsSuffix),
            "\"stat\" is not the regular file \"lstat\" names");
      return std::unexpected(sys::Refusal::kNotRegular);
    }
    if (static_cast<uint64_t>(st->st_size) > max_size) {
      return std::unexpected(sys::Refusal::kTooLarge);
    }
    std::optional<bool> held;
    if (const auto it = facts.find("held"); it != facts.end() && it->is_boolean()) {
      held = it->get<bool>();
    }
    return std::make_unique<ReplayFile>(reader_, sample_, path, *st, held, warn_);
  }
  void RemoveIfSame(const std::string&, const struct stat&) override {}

 private:
  const capture::Reader& reader_;
  const size_t sample_;
  const std::string rel_;
  const std::vector<std::string> names_;
  std::map<std::string, json> facts_;  // of the names Lstat accepted
  RefusalWarning& warn_;
};

class ReplaySource final : public StatsSource {
 public:
  ReplaySource(std::optional<std::string> rel, const std::filesystem::path& procfs)
      : rel_(std::move(rel)), procfs_(std::make_shared<sys::DirectProcfs>(procfs)) {}
  std::expected<std::unique_ptr<StatsDirectory>, int> OpenDirectory() override {
    const capture::Session* session = capture::Active();
    if (!rel_ || session == nullptr || session->reader() == nullptr) {
      return std::unexpected(ENOENT);
    }
    const size_t sample = session->sample();
    auto names = session->reader()->List(sample, *rel_);
    if (!names) return std::unexpected(names.error());
    return std::make_unique<ReplayDirectory>(*session->reader(), sample, *rel_, std::move(*names),
                                             warning_);
  }
  bool deletes() const override { return false; }
  // Maps, status and namespace links through core/sysfs: the capture answers.
  std::shared_ptr<sys::PrivilegedProcfs> procfs() const override { return procfs_; }

 private:
  const std::optional<std::string> rel_;
  const std::shared_ptr<sys::PrivilegedProcfs> procfs_;
  RefusalWarning warning_;
};

}  // namespace

std::unique_ptr<StatsSource> MakeStatsSource(const std::filesystem::path& dir,
                                             const std::filesystem::path& procfs,
                                             std::shared_ptr<sys::PrivilegedProcfs> privileged) {
  capture::Session* session = capture::Active();
  if (session == nullptr) {
    return std::make_unique<LiveStatsSource>(dir, std::move(privileged), /*reader_lock=*/true,
                                             /*deletes=*/true);
  }
  auto rel = session->layout().Relative(dir);
  if (session->replaying()) return std::make_unique<ReplaySource>(std::move(rel), procfs);
  if (!rel || session->writer() == nullptr) {
    if (session->writer() != nullptr) {
      session->writer()->Missed("occupancy: " + dir.string(),
                                "not an absolute path: the stats directory is not recorded");
    }
    return std::make_unique<LiveStatsSource>(dir, std::make_shared<sys::DirectProcfs>(procfs),
                                             /*reader_lock=*/false, /*deletes=*/false);
  }
  return std::make_unique<RecordingSource>(dir, std::move(*rel), procfs, *session->writer());
}

}  // namespace rdmascope
