#include "collectors/occupancy_replay.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "collectors/occupancy_facts.h"
#include "core/capture.h"
#include "core/log.h"

namespace rdmascope {
namespace {

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
    const std::string path = rel_ + std::string(occupancy_facts::kSuffix);
    const auto text = reader_.ReadFile(sample_, path, occupancy_facts::kMaxBytes);
    if (!text) return false;
    const auto facts = occupancy_facts::ParseDirectoryFacts(*text);
    if (!facts) {
      warn_(path, facts.error());
      return false;
    }
    const struct stat& st = facts->st;
    return S_ISDIR(st.st_mode) && st.st_uid == facts->exporter_euid && (st.st_mode & 022) == 0;
  }
  std::vector<std::string> Names() override { return names_; }
  std::expected<struct stat, std::string> Lstat(const std::string& name) override {
    const std::string path = rel_ + "/" + name;
    const std::string facts_path = path + std::string(occupancy_facts::kSuffix);
    const auto text = reader_.ReadFile(sample_, facts_path, occupancy_facts::kMaxBytes);
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
    auto facts = occupancy_facts::ParseNameFacts(*text);
    if (!facts) return refuse(facts.error());
    const struct stat st = facts->lstat;
    facts_.insert_or_assign(name, std::move(*facts));
    return st;
  }
  std::expected<std::unique_ptr<StatsFile>, sys::Refusal> Open(const std::string& name,
                                                               size_t max_size) override {
    const auto found = facts_.find(name);
    if (found == facts_.end()) return std::unexpected(sys::Refusal::kOpenFailed);
    const occupancy_facts::NameFacts& facts = found->second;
    const std::string path = rel_ + "/" + name;
    // Not opened when the capture was taken (beyond its caps): nothing of it to read.
    if (!facts.open) return std::unexpected(sys::Refusal::kOpenFailed);
    if (*facts.open != "ok") return std::unexpected(occupancy_facts::RefusalNamed(*facts.open));
    const auto& st = facts.stat;
    if (!st) {
      warn_(path + std::string(occupancy_facts::kSuffix), st.error());
      return std::unexpected(sys::Refusal::kOpenFailed);
    }
    // What OpenUntrusted checks of the file it opened: a regular file, the inode listed,
    // within the bound.
    if (!S_ISREG(st->st_mode) || st->st_dev != facts.lstat.st_dev ||
        st->st_ino != facts.lstat.st_ino) {
      warn_(path + std::string(occupancy_facts::kSuffix),
            "\"stat\" is not the regular file \"lstat\" names");
      return std::unexpected(sys::Refusal::kNotRegular);
    }
    if (static_cast<uint64_t>(st->st_size) > max_size) {
      return std::unexpected(sys::Refusal::kTooLarge);
    }
    return std::make_unique<ReplayFile>(reader_, sample_, path, *st, facts.held, warn_);
  }
  void RemoveIfSame(const std::string&, const struct stat&) override {}

 private:
  const capture::Reader& reader_;
  const size_t sample_;
  const std::string rel_;
  const std::vector<std::string> names_;
  std::map<std::string, occupancy_facts::NameFacts> facts_;  // of the names Lstat accepted
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

std::unique_ptr<StatsSource> MakeReplayStatsSource(std::optional<std::string> rel,
                                                   const std::filesystem::path& procfs) {
  return std::make_unique<ReplaySource>(std::move(rel), procfs);
}

}  // namespace rdmascope
