// The eBPF collectors (mr, verbs) behind the host boundary of core/capture.h. Their kernel
// answers are BPF maps, not bytes a read returns, so the boundary is what each collection
// takes out of them: the probes' snapshot and whether they attached, one JSON file per
// sample (mr_snapshot_json.h, verbs_snapshot_json.h). Live, nothing here is asked beyond one
// branch; recording, the collectors run as live and write the file; replaying, they are built
// without probes and read it. The mr collector's other sources are files (procfs, through the
// boundary already) and the scan of every process's descriptors for uverbs holders, which is
// recorded as its answer (CapturedProcfs).
#pragma once

#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sys/privileged_procfs.h"

namespace rdmascope {

// A recording is installed: the collectors write their probes' readings.
bool RecordingCapture();
// A replay is installed: build no probe, read the capture.
bool ReplayingCapture();
// Recording: `text` as the open sample's `rel`; nothing otherwise.
void RecordProbeFile(std::string_view rel, std::string_view text);
// Recording: the index's not_recorded gets `source` with why (the probes did not attach).
void RecordNotRecorded(std::string source, std::string reason);
// Replaying: the sample replayed now's `rel`, within probe_json::kMaxBytes; a message naming
// the file else ("bpf/mr.json: not in sample 2", "...: EFBIG").
std::expected<std::string, std::string> ReplayProbeFile(std::string_view rel);

// "mr/uverbs_holders": one line per process holding uverbs devices open, "PID uverbs0 uverbs1".
inline constexpr std::string_view kUverbsHoldersFile = "mr/uverbs_holders";
std::string FormatUverbsHolders(const sys::UverbsHolderMap& holders);
// nullopt for a line that is not a pid (1..2^31-1) and uverbsN names, or a pid twice.
std::optional<sys::UverbsHolderMap> ParseUverbsHolders(std::string_view text);

// The procfs reads of the mr collector's pinned memory under a capture session: the uverbs
// holders scan is recorded as its answer (the descriptors' listings and links are not kept),
// and replayed from it; the namespaces are read through this process's boundary (not a
// broker's: a broker process reads its own host). Live reads go to `live`.
class CapturedProcfs final : public sys::PrivilegedProcfs {
 public:
  explicit CapturedProcfs(std::shared_ptr<sys::PrivilegedProcfs> live) : live_(std::move(live)) {}
  std::expected<std::string, int> Maps(uint32_t pid, size_t max_bytes) override {
    return live_->Maps(pid, max_bytes);
  }
  std::expected<sys::OpenedFile, std::string> OpenMapping(uint32_t pid,
                                                          const sys::MappedFile& mapping) override {
    return live_->OpenMapping(pid, mapping);
  }
  std::expected<sys::OpenedFile, std::string> OpenInRoot(uint32_t pid,
                                                         std::string_view path) override {
    return live_->OpenInRoot(pid, path);
  }
  std::vector<std::optional<std::string>> Namespaces(sys::NamespaceKind kind,
                                                     std::span<const uint32_t> pids) override {
    return live_->Namespaces(kind, pids);
  }
  std::expected<sys::UverbsHolderMap, std::string> UverbsHolders() override;
  bool InThisProcess() const override { return live_->InThisProcess(); }

 private:
  std::shared_ptr<sys::PrivilegedProcfs> live_;
};

}  // namespace rdmascope
