// The host boundary (docs/capture.md): every byte the collectors read from the kernel goes
// through core/sysfs (files), sys/ethtool_ioctl (SIOCETHTOOL) and sys/rdma_netlink,
// sys/dcb_netlink (netlink replies). Each of them asks Active() once per read: null (live, the
// default) costs that one branch; a recording session is told what the live read returned;
// a replaying session answers instead of the kernel, from a capture directory.
//
// A capture is hostile input (a file a user sends us): the Reader opens every file beneath the
// capture's root with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), never follows a link
// out, refuses what is not a regular file and reads at most what the caller accepts; an
// archive is refused unless it holds only regular files and directories, within bounds.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/capture_tree.h"
#include "core/redact.h"

namespace rdmascope::capture {

// index.json "redaction"."key_id": the redaction key's token of this kind, which names the key
// without telling anything of it (two captures with one id hash a value alike).
inline constexpr std::string_view kRedactionKeyIdKind = "redaction-key-id";

// The empty file in a directory the host listed and no collector read beneath (so that git,
// which keeps no empty directory, keeps the name); a listing never shows it.
inline constexpr std::string_view kListedMarker = ".listed";

// index.json's "format_version"; a reader refuses a capture of a newer one.
constexpr int kFormatVersion = 1;
// index.json itself: a few KiB per netdev; anything near this is not an index.
constexpr size_t kMaxIndexBytes = 4 << 20;

// "EOPNOTSUPP" for EOPNOTSUPP, "E123" for an errno without a name here; and back (also "123").
std::string ErrnoName(int error);
std::optional<int> ErrnoFromName(std::string_view name);

// Where a host path lies in a sample: under the sysfs root -> "sys/...", under the procfs root
// -> "proc/...", another absolute path -> itself without its leading '/'. nullopt for a
// relative path or one with "..": nothing the collectors read looks like that.
class Layout {
 public:
  Layout(std::filesystem::path sysfs, std::filesystem::path procfs);
  std::optional<std::string> Relative(const std::filesystem::path& host) const;

 private:
  std::string sysfs_;
  std::string procfs_;
};

// A directory of a capture opened once for many reads (SysfsDir): a node of the sample's
// tree in memory, or a descriptor beneath the root where the tree does not hold it. Valid
// while its Reader lives; move-only.
class Directory {
 public:
  Directory() = default;
  Directory(Directory&& other) noexcept;
  Directory& operator=(Directory&& other) noexcept;
  Directory(const Directory&) = delete;
  Directory& operator=(const Directory&) = delete;
  ~Directory();

 private:
  friend class Reader;
  const Node* node_ = nullptr;
  int fd_ = -1;
  std::string path_;  // beneath the root: for a name the tree leaves on disk
};

// A capture, read-only: a directory, or the same as a gzip'd tar (told apart by content).
// Every method is safe on any input and thread-safe.
//
// A directory capture's sample is read into memory the first time it is asked for (a tree
// built once under std::call_once, then only read: no lock on a read), within
// Limits::cache_bytes for the whole capture; a sample that does not fit is read from its
// files every time, as are the few names the tree leaves on disk (capture_tree.h). An archive
// is read whole into memory when opened, within the archive bounds.
class Reader {
 public:
  // Opens `root` and reads its index: a message for a capture this reader cannot use (no
  // index, not JSON, a newer format_version, no samples, openat2 missing from the kernel; an
  // archive that is not a gzip'd tar of regular files and directories within `limits`).
  static std::expected<Reader, std::string> Open(const std::filesystem::path& root,
                                                 const Limits& limits = {});
  // The same over an open directory (taken: closed with the Reader); tests and the fuzzer.
  static std::expected<Reader, std::string> FromFd(int root_fd, const Limits& limits = {});
  Reader(Reader&& other) noexcept;
  Reader& operator=(Reader&&) = delete;
  Reader(const Reader&) = delete;
  ~Reader();

  size_t sample_count() const { return samples_; }
  const std::string& index_text() const { return index_text_; }
  bool archive() const { return root_fd_ < 0; }
  // Bytes of a directory capture's samples held in memory, within Limits::cache_bytes (0 for an
  // archive: all of it is in memory, within the archive bounds).
  uint64_t cached_bytes() const;

  // samples/NNNN/<rel> (sample counts from 1): its bytes; the errno stored in <rel>.errno;
  // ENOENT when neither is there; EFBIG past max_bytes; EINVAL for a FIFO, a device, a
  // directory or any other non-regular file; EXDEV/ELOOP for a link leaving the capture.
  std::expected<std::string, int> ReadFile(size_t sample, std::string_view rel,
                                           size_t max_bytes) const;
  // A directory's entries as the host listed them: the names recorded, ".errno" and ".link"
  // suffixes taken off. Absent: ENOENT (the caller decides whether that means empty).
  std::expected<std::vector<std::string>, int> List(size_t sample, std::string_view rel) const;
  // A symbolic link's target as the host read it (<rel>.link, a regular file).
  std::expected<std::string, int> ReadLink(size_t sample, std::string_view rel) const;
  // Whether the host had <rel>: anything stored under that name, or a <rel>.link.
  bool Exists(size_t sample, std::string_view rel) const;
  // 0 if samples/NNNN/<rel> is a directory, else its errno (ENOTDIR for a file).
  int CheckDirectory(size_t sample, std::string_view rel) const;
  // A directory of many files read one by one (SysfsDir): resolved once, or its errno; then
  // each file in it, as ReadFile would answer for <rel>/<name>, and its listing as List would.
  std::expected<Directory, int> OpenDirectory(size_t sample, std::string_view rel) const;
  std::expected<std::string, int> ReadFileAt(const Directory& dir, std::string_view name,
                                             size_t max_bytes) const;
  std::expected<std::vector<std::string>, int> ListAt(const Directory& dir) const;

 private:
  struct State;
  Reader(int root_fd, const Limits& limits);
  static std::expected<Reader, std::string> WithIndex(Reader reader, std::string index);
  // The sample's tree when it is in memory (loaded on first use), else null: its files.
  const Node* Tree(size_t sample) const;

  // The reads of a directory capture's files, where the tree does not answer.
  int OpenBeneath(const std::string& rel, uint64_t flags) const {
    return OpenBeneathAt(root_fd_, rel, flags);
  }
  static int OpenBeneathAt(int dir_fd, const std::string& rel, uint64_t flags);
  std::expected<std::string, int> ReadRegular(const std::string& rel, size_t max_bytes) const {
    return ReadRegularAt(root_fd_, rel, max_bytes);
  }
  static std::expected<std::string, int> ReadRegularAt(int dir_fd, const std::string& rel,
                                                       size_t max_bytes);
  std::expected<std::string, int> DiskReadFile(const std::string& path, size_t max_bytes) const;
  std::expected<std::vector<std::string>, int> DiskList(const std::string& path) const;
  bool DiskExists(const std::string& path) const;
  int DiskCheckDirectory(const std::string& path) const;

  int root_fd_ = -1;
  size_t samples_ = 0;
  std::string index_text_;
  std::unique_ptr<State> state_;
};

// Why one source gave nothing to record (index.json "not_recorded"): "ethtool -c eth0",
// "EOPNOTSUPP"; or a whole collector, "perf", "not replayable in format 1".
struct NotRecorded {
  std::string source;
  std::string reason;
  bool operator<(const NotRecorded& other) const {
    return std::tie(source, reason) < std::tie(other.source, other.reason);
  }
};

// Writes a capture: one sample at a time into samples/.NNNN.tmp, renamed to samples/NNNN when
// whole. Files 0600, directories 0700, created with O_NOFOLLOW|O_EXCL under descriptors of
// directories this writer made, so nothing is written through a link.
class Writer {
 public:
  // `dir` must be absent or empty (or `force`: then only its samples/ and index.json are
  // replaced, never followed if they are links).
  static std::expected<std::unique_ptr<Writer>, std::string> Create(
      const std::filesystem::path& dir, bool force);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  // --redact (core/redact.h): every file written from then on through RedactFile's rules, the
  // host name in the index too; binary replies are the recorders' to redact (redactor()).
  // `key_file`: the key came from --redact.key-file (a fleet's), else drawn for this capture;
  // the index says which, and the key's id (a hash of it: captures with one id compare).
  void SetRedactor(std::shared_ptr<const redact::Redactor> redactor, bool key_file) {
    redactor_ = std::move(redactor);
    redact_key_file_ = key_file;
  }
  const redact::Redactor* redactor() const { return redactor_.get(); }
  // Starts sample n (from 1); what the collectors read now goes into it.
  std::expected<void, std::string> BeginSample(size_t n);
  std::expected<void, std::string> CommitSample();

  // Each of these is what one live read returned (thread-safe).
  void File(std::string_view rel, std::string_view bytes);
  void Errno(std::string_view rel, int error);
  // A symbolic link's target as <rel>.link; unless `replace`, only where none is stored yet.
  void Link(std::string_view rel, std::string_view target, bool replace = true);
  // A listing: every name gets an entry in the sample (an empty directory if nothing under
  // that name was read by the end of the sample), so the replay lists what the host did.
  void Listing(std::string_view rel, const std::vector<std::string>& names);
  // Drivers and firmware per netdev for the index, as ethtool -i read them.
  void Driver(std::string_view netdev, std::string_view driver, std::string_view version,
              std::string_view firmware);
  void Missed(std::string source, std::string reason);
  std::vector<NotRecorded> missed();
  // Each sample's time as index.json will give it (capture_index.h ParseUtcMillis reads it):
  // when it began, or when StampSample said its collection started.
  std::vector<std::string> sample_times();
  // The open sample's time is now: its collection starts (sample 1 begins before the
  // collectors are built, so that what they read then is in it; its counters are read later).
  void StampSample();

  // index.json: `fields` (kernel, hostname, version... as JSON object text members) plus the
  // samples, drivers and not-recorded sources gathered.
  std::expected<void, std::string> WriteIndex(const std::string& rdmascope_version,
                                              const std::vector<std::string>& collectors_replayed);

 private:
  Writer() = default;
  // The descriptor of rel's parent directory in the open sample, made as needed; -errno.
  int ParentFd(std::string_view rel, std::string& leaf);
  void Put(std::string_view rel, std::string_view bytes);

  std::filesystem::path dir_;
  int dir_fd_ = -1;
  int samples_fd_ = -1;
  int sample_fd_ = -1;
  size_t sample_ = 0;
  std::mutex mutex_;
  std::map<std::string, std::vector<std::string>> listings_;  // of the open sample
  std::vector<std::string> sample_times_;
  std::map<std::string, std::map<std::string, std::string>> drivers_;
  std::set<NotRecorded> missed_;
  std::shared_ptr<const redact::Redactor> redactor_;
  bool redact_key_file_ = false;
};

// The process's boundary, installed once at start-up before any thread starts.
class Session {
 public:
  static std::unique_ptr<Session> Recording(Layout layout, Writer* writer);
  static std::unique_ptr<Session> Replaying(Layout layout, Reader reader);

  bool replaying() const { return reader_.has_value(); }
  Writer* writer() const { return writer_; }
  const Reader* reader() const { return reader_ ? &*reader_ : nullptr; }
  const Layout& layout() const { return layout_; }

  // The sample replayed now: 1 until the first collection, then the one it chose.
  size_t sample() const { return sample_.load(std::memory_order_acquire); }
  // One collection (a scrape, `check`'s pass): the next sample, the last one repeating.
  void NextSample();
  // When the capture took the sample replayed now (index.json's time, seconds since the
  // epoch): what a replay's clocks read, so that a rate over two samples is over the time
  // between them, not between two scrapes of the replay. None when not replaying or when
  // the index's time does not read.
  std::optional<double> sample_seconds() const;

  // Files as sysfs.cc asks for them (replaying), and what the live reads returned (recording).
  std::expected<std::string, int> ReplayFile(const std::filesystem::path& host,
                                             size_t max_bytes) const;
  std::expected<std::vector<std::string>, int> ReplayList(const std::filesystem::path& host) const;
  std::expected<std::string, int> ReplayLink(const std::filesystem::path& host) const;
  int ReplayDirectory(const std::filesystem::path& host) const;
  // The capture's directory for `host`, opened once (SysfsDir); its errno.
  std::expected<Directory, int> ReplayOpenDirectory(const std::filesystem::path& host) const;
  void RecordFile(const std::filesystem::path& host, const std::expected<std::string, int>& read);
  void RecordList(const std::filesystem::path& host,
                  const std::expected<std::vector<std::string>, int>& names);
  // `replace`: a resolved path (Canonical) replaces the readlink text or an IsSymlink mark;
  // those never replace what is there.
  void RecordLink(const std::filesystem::path& host, const std::optional<std::string>& target,
                  int error, bool replace);
  bool ReplayExists(const std::filesystem::path& host) const;
  void RecordExists(const std::filesystem::path& host);

 private:
  explicit Session(Layout layout) : layout_(std::move(layout)) {}
  Layout layout_;
  Writer* writer_ = nullptr;
  std::optional<Reader> reader_;
  std::atomic<size_t> sample_{1};
  std::atomic<size_t> collections_{0};
  std::vector<std::optional<double>> sample_seconds_;  // by sample, from 1; replaying only
};

namespace internal {
extern Session* g_active;
extern thread_local int t_unrecorded;
}  // namespace internal

// While one lives, this thread's reads of the host are live and not recorded: for a source
// whose answer is recorded whole instead of the reads it takes (the mr collector's scan of
// every process's descriptors, collectors/probe_capture.h: the holders are kept, not every
// /proc/PID/fd listing of the host).
class UnrecordedScope {
 public:
  UnrecordedScope();
  ~UnrecordedScope();
  UnrecordedScope(const UnrecordedScope&) = delete;
  UnrecordedScope& operator=(const UnrecordedScope&) = delete;
};
// Null when reading the live host (the default).
inline Session* Active() { return internal::g_active; }
// Installs the session for the rest of the process (tests: nullptr to uninstall). Not
// thread-safe by design: call it before the first thread starts.
void Install(Session* session);

}  // namespace rdmascope::capture
