// The preload stats directory as the occupancy collector reads it, behind one seam so that a
// capture can record it and a replay answer it (collectors/occupancy_capture.h): its listing,
// what fstat says of each name (the facts its trust decisions use: type, owner, device and
// inode, size), each file opened as sys/untrusted_file.h opens it, its liveness lock and its
// bytes, and where other processes' maps and namespaces are read. The live source here is what
// the collector always did: it also holds the `.readers` lock and deletes stale files.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sys/privileged_procfs.h"
#include "sys/untrusted_file.h"

namespace rdmascope {

// One stats file, opened.
class StatsFile {
 public:
  virtual ~StatsFile() = default;
  // fstat of the open file.
  virtual const struct stat& stat() const = 0;
  // Whether a process holds its liveness lock (stats_file.h); nullopt: cannot tell.
  virtual std::optional<bool> Held() = 0;
  // Its first `size` bytes into `out` (a header); false when it has fewer.
  virtual bool ReadHead(void* out, size_t size) = 0;
  // The whole file as large as stat() says; kShortRead with what was read when it ended early.
  virtual std::expected<void, sys::Refusal> ReadAll(std::vector<uint8_t>& out) = 0;
};

// The directory during one collection.
class StatsDirectory {
 public:
  virtual ~StatsDirectory() = default;
  // Only the exporter's user (or root) can write it: its files need no claim checked.
  virtual bool Private() const = 0;
  // fstat of the directory (what Private judged), where there is one to record.
  virtual std::optional<struct stat> Stat() const { return std::nullopt; }
  // Its names, sorted; empty when it cannot be listed.
  virtual std::vector<std::string> Names() = 0;
  // lstat of a name: its facts; an empty error when the name is gone, else why its facts are
  // refused (a capture's).
  virtual std::expected<struct stat, std::string> Lstat(const std::string& name) = 0;
  virtual std::expected<std::unique_ptr<StatsFile>, sys::Refusal> Open(const std::string& name,
                                                                       size_t max_size) = 0;
  // A stale file read: deleted if it still is that inode (live only).
  virtual void RemoveIfSame(const std::string& name, const struct stat& read) = 0;
};

class StatsSource {
 public:
  virtual ~StatsSource() = default;
  // This collection's view of the directory, or the errno of opening it (ENOENT: no process
  // runs with the preload library).
  virtual std::expected<std::unique_ptr<StatsDirectory>, int> OpenDirectory() = 0;
  // Whether RemoveIfSame deletes. When it does not (capture, replay), the collector forgets a
  // stale file it served itself, so that it is served once as live.
  virtual bool deletes() const = 0;
  // Where the anchor reads other processes' maps and pid namespaces.
  virtual std::shared_ptr<sys::PrivilegedProcfs> procfs() const = 0;
};

// The host's directory. `reader_lock`: hold a read lock on <dir>/.readers for the source's
// life (taken now, retried at each OpenDirectory until held: the directory may appear later),
// so that exiting libraries leave their final figures (stats_file.h); `deletes`: stale files
// read are deleted. Both off for a capture, which reads the directory as a running exporter
// leaves it and takes nothing from it.
class LiveStatsSource final : public StatsSource {
 public:
  LiveStatsSource(std::filesystem::path dir, std::shared_ptr<sys::PrivilegedProcfs> procfs,
                  bool reader_lock, bool deletes);
  ~LiveStatsSource() override;
  std::expected<std::unique_ptr<StatsDirectory>, int> OpenDirectory() override;
  bool deletes() const override { return deletes_; }
  std::shared_ptr<sys::PrivilegedProcfs> procfs() const override { return procfs_; }

 private:
  void HoldReaderLock(int dir_fd);
  void HoldReaderLock();

  const std::filesystem::path dir_;
  const std::shared_ptr<sys::PrivilegedProcfs> procfs_;
  const bool reader_lock_;
  const bool deletes_;
  std::mutex reader_mutex_;
  int reader_fd_ = -1;
  bool reader_failure_logged_ = false;
};

}  // namespace rdmascope
