#include "collectors/occupancy_capture.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "collectors/occupancy_anchor.h"
#include "collectors/occupancy_facts.h"
#include "collectors/occupancy_replay.h"
#include "core/capture.h"
#include "core/log.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace {

using nlohmann::json;
using Inode = std::pair<dev_t, ino_t>;

// A process's maps, as the anchor reads them (occupancy_anchor.cc).
constexpr size_t kMaxMapsBytes = 32 << 20;

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
      facts_.writer.File(facts_.rel + "/" + name + std::string(occupancy_facts::kSuffix),
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
      facts_.by_name[name]["lstat"] = occupancy_facts::StatJson(*st);
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
    facts["stat"] = occupancy_facts::StatJson((*file)->stat());
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
      json facts = occupancy_facts::StatJson(*st);
      facts["exporter_euid"] = ::geteuid();
      writer_.File(rel_ + std::string(occupancy_facts::kSuffix), facts.dump(2) + "\n");
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
  if (session->replaying()) return MakeReplayStatsSource(std::move(rel), procfs);
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
