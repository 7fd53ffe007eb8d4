// User-space side of probes/verbs.bpf.c: loads the CO-RE object, attaches entry and return
// uprobes to the CQ, QP and SRQ lifecycle calls and ibv_get_async_event of each library, and
// turns its maps into a snapshot at scrape time: per CQ its capacity and the summed depth of
// the queues completing into it, per SRQ its depth and limit, per process its async events.
// Objects of processes that exited (or whose pid was reused) are deleted then.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct verbs_bpf;
struct bpf_link;

namespace rdmascope {

struct VerbsProbeOptions {
  std::vector<std::string> libraries;  // libibverbs.so.1 files (default: the one we link)
  std::vector<std::string> binaries;   // statically linked programs
  uint32_t max_queues = 65536;         // CQs and QPs tracked (each a BPF hash map)
  uint32_t max_processes = 4096;
};

inline constexpr size_t kVerbsAsyncEventTypes = 32;

struct VerbsCq {
  uint32_t pid = 0;
  std::string comm;
  std::string device;
  uint32_t handle = 0;
  uint32_t requested_entries = 0;
  uint32_t entries = 0;      // actual capacity
  uint64_t feeding_wrs = 0;  // see docs/metrics.md: sends + receives + SRQs completing here
  uint32_t feeding_qps = 0;
};

struct VerbsSrq {
  uint32_t pid = 0;
  std::string comm;
  std::string device;
  uint32_t handle = 0;
  uint32_t max_wr = 0;
  uint32_t limit = 0;  // 0: not armed
  uint64_t limit_events = 0;
};

// One QP as created: its capacities as the provider granted them (written back into
// ibv_qp_init_attr.cap), for `rdmascope profile`'s per-QP depths (never a metric series).
struct VerbsQp {
  uint32_t pid = 0;
  std::string comm;
  std::string device;  // of its send CQ; empty when that CQ predates the probes
  uint32_t qp_num = 0;
  uint32_t handle = 0;
  uint32_t type = 0;  // enum ibv_qp_type
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_recv_sge = 0;
  bool srq = false;  // receives from an SRQ (max_recv_wr is then not its own)
};

struct RcSendWrsRange {
  uint32_t min = 0;
  uint32_t max = 0;
  uint64_t total = 0;  // summed over the QPs: the most sends the process keeps in flight
  bool operator==(const RcSendWrsRange&) const = default;
};

struct VerbsProcess {
  uint32_t pid = 0;
  std::string comm;
  uint32_t qps = 0;
  std::array<uint64_t, kVerbsAsyncEventTypes> async_events{};
  // Per device: the smallest, the largest and the summed send queue depth of the process's RC
  // QPs (RcSendWrs). Three figures per (process, device), never one per QP, so the series count
  // stays bounded.
  std::map<std::string, RcSendWrsRange> rc_send_wrs;
};

struct VerbsSnapshot {
  std::vector<VerbsCq> cqs;  // by pid, then handle
  std::vector<VerbsSrq> srqs;
  std::vector<VerbsQp> qps;             // by pid, then qp_num
  std::vector<VerbsProcess> processes;  // by pid
  uint64_t lost_calls = 0;
  uint64_t lost_objects = 0;
  uint64_t lost_processes = 0;
  // false: the probes' globals map could not be read; the lost counters are left out.
  bool globals_known = true;
  // Not empty: a map walk was cut short by an error (which map, the errno): the snapshot
  // holds nothing else, none of it is to be served, and the next Snapshot() walks again.
  std::string walk_error;
};

// A QP as the probe recorded it, for the feeding computation.
struct VerbsQpLinks {
  uint64_t send_cq = 0;
  uint64_t recv_cq = 0;
  uint64_t srq = 0;
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t type = 0;  // enum ibv_qp_type
};

// Per CQ pointer: the work that can complete into it. Send queues count their depth on their
// send CQ; receive queues on their receive CQ, except that the QPs sharing an SRQ count the
// SRQ's depth once per receive CQ (they receive from the SRQ, not from their own queue).
struct CqFeeding {
  uint64_t wrs = 0;
  uint32_t qps = 0;
};
std::map<uint64_t, CqFeeding> ComputeCqFeeding(const std::vector<VerbsQpLinks>& qps,
                                               const std::map<uint64_t, uint32_t>& srq_max_wr);

// Per device (the device of each QP's send CQ, `cq_devices`: CQ pointer -> device name): the
// smallest and largest max_send_wr of the RC QPs. The send queue depth bounds the work a QP
// keeps in flight, so the shallowest RC QP is the one that cannot fill the bandwidth-delay
// product, and the deepest the one holding work-queue memory the link can never use (doctor's
// queues.qp_depth). QPs whose send CQ is unknown (created before the probes attached) and
// receive-only QPs (max_send_wr 0) give no figure.
std::map<std::string, RcSendWrsRange> RcSendWrs(const std::vector<VerbsQpLinks>& qps,
                                                const std::map<uint64_t, std::string>& cq_devices);

class VerbsProbe {
 public:
  static std::expected<std::unique_ptr<VerbsProbe>, std::string> Attach(
      const VerbsProbeOptions& options, std::filesystem::path procfs);
  ~VerbsProbe();
  VerbsProbe(const VerbsProbe&) = delete;
  VerbsProbe& operator=(const VerbsProbe&) = delete;

  size_t link_count() const { return links_.size(); }
  VerbsSnapshot Snapshot();

 private:
  VerbsProbe() = default;
  verbs_bpf* skel_ = nullptr;
  std::vector<bpf_link*> links_;
  std::filesystem::path procfs_;
  uint64_t ns_per_tick_ = 10000000;  // 1e9 / USER_HZ
  std::mutex mutex_;                 // map cleanup must not run twice at once
  // The last walk found all four maps empty, with the probes' insert count at this value:
  // while the count stands still they are still empty, and the walk is skipped.
  bool walked_empty_ = false;
  uint64_t inserts_at_walk_ = 0;
};

}  // namespace rdmascope
