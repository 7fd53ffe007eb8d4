// What `rdmascope profile` measured for one process over one window: filled by the profile
// session (profile_session.cc) from the same collectors and probes `serve` runs, written out by
// the writers (profile.json, pprof, folded stacks, HTML). Fields the session could not measure
// stay empty (std::nullopt / empty vector) and the writers say "not measured", never 0.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "doctor/finding.h"

namespace rdmascope::profile {

// 2: the "numa" section (threads' NUMA nodes against the NIC's, memory per node).
inline constexpr int kProfileSchemaVersion = 2;

// One symbolized frame, as /debug/mr/stacks prints it (no absolute address: ASLR).
struct Frame {
  std::string function;  // demangled name, or "??" when unknown
  std::string module;    // file name of the object (libfoo.so.1, the program)
  uint64_t offset = 0;   // offset of the call site from the function's start
};

// Memory registrations of one call stack.
struct RegistrationStack {
  std::vector<Frame> frames;         // innermost first
  uint64_t outstanding_regions = 0;  // still registered at the end of the window / at exit
  uint64_t outstanding_bytes = 0;
  uint64_t registrations = 0;  // during the window (0 if unknown for this stack)
  uint64_t registered_bytes = 0;
};

// Log2 histogram: bucket b counts values in (2^(b-1), 2^b] (bucket 0: value 0 or 1).
struct Log2Histogram {
  std::vector<uint64_t> buckets;
  uint64_t count = 0;
  double sum = 0;  // in the histogram's unit
  // Quantile estimated from the buckets (upper bound of the bucket holding it): a figure the
  // data guarantees is not exceeded; exact for sizes that are powers of two.
  std::optional<double> Quantile(double q) const;
  // Quantile interpolated linearly inside the bucket that holds it, as Prometheus's
  // histogram_quantile does: for continuous values (latencies) the upper bound is biased up
  // to 2x, this is not biased but only as good as the bucket: within (2^(b-1), 2^b].
  std::optional<double> Interpolated(double q) const;
};

struct MrSummary {
  uint64_t registrations = 0, deregistrations = 0, failures = 0;
  uint64_t registered_bytes = 0;
  uint64_t outstanding_regions = 0, outstanding_bytes = 0;  // at the end / at exit
  uint64_t released_at_exit_regions = 0, released_at_exit_bytes = 0;
  // Registrations whose address and length are both multiples of 2 MiB; of 4 KiB but not
  // both of 2 MiB; neither (implicit ODP registrations are in none of the three).
  uint64_t aligned_2mib = 0, aligned_4kib = 0, unaligned = 0;
  uint64_t churn_registrations = 0;              // a deregistered (address, length) registered
  uint64_t churn_bytes = 0;                      // again, and the bytes of those registrations
  std::map<std::string, uint64_t> access_flags;  // "LOCAL_WRITE" -> registrations with it
  Log2Histogram size_bytes;
  Log2Histogram latency_ns;
  bool from_restrack_only = false;  // --pid: registrations made before attach (restrack view)
  // A field above the MR probe could not measure (e.g. a collection that lacked its series)
  // is listed in `unmeasured` ("aligned_2mib", "churn_registrations", "access_flags"...)
  // instead of reading as 0.
  std::optional<uint64_t> not_hugepage_aligned_bytes;  // registered bytes, address or length
                                                       // not 2 MiB-aligned
  std::optional<uint64_t> length_not_page_multiple;    // registrations, length % 4096 != 0
  std::vector<std::string> access_flags_seen;          // IBV_ACCESS_* names used at least once
  std::optional<uint64_t> restrack_bytes;  // --pid: MR bytes restrack shows for the process
  std::vector<std::string> unmeasured;     // names of the fields above not measured
};

struct QueueInfo {
  std::string kind;  // "cq", "srq", "qp"
  std::string device;
  std::string handle;                   // the `cq`/`srq` label of the metrics; qp number for QPs
  std::string type;                     // QP type (RC, UD...), empty for CQ/SRQ
  std::optional<uint64_t> capacity;     // CQ entries, SRQ max_wr, QP max_send_wr
  std::optional<uint64_t> feeding_wrs;  // CQ: summed depth of the queues completing into it
  std::optional<uint64_t> peak_occupancy;
  std::optional<double> poll_batch_fullness;  // polled / requested entries, 0..1
  // QPs (verbs probe, ibv_qp_init_attr.cap as the provider granted it): capacity is max_send_wr.
  std::optional<uint64_t> max_recv_wr;  // nullopt for a QP on an SRQ (the SRQ's depth counts)
  std::optional<uint64_t> max_send_sge;
  std::optional<uint64_t> max_recv_sge;
  bool uses_srq = false;
  // RC QPs: the send depth queues.qp_depth says the device's port needs (doctor::QpDepthNeeded:
  // rate x round trip / message size) and its power of two; nullopt when no port is active.
  std::optional<uint64_t> needed_send_wrs;
  std::optional<uint64_t> recommended_send_wrs;
};

struct MessageSummary {
  Log2Histogram send_bytes;             // scatter-gather lengths of ibv_post_send work requests
  Log2Histogram recv_bytes;             // of ibv_post_recv
  Log2Histogram completion_latency_ns;  // post-to-poll time of sampled signalled requests
};

struct PerfSummary {
  std::map<std::string, double> events;  // event name -> count over the window
  // true: `events` are the process's own (counted on its threads, inherited by new ones);
  // false: host-wide, from the perf collector.
  bool process_own = false;
  std::map<std::string, std::string> unavailable;  // event -> why it could not be counted
  std::optional<double> ipc;
  std::optional<double> llc_miss_ratio;
  std::vector<int> thread_numa_nodes;  // each thread's majority node (NumaSummary)
  std::optional<int> nic_numa_node;
};

// One thread over the window: the NUMA node of the CPU it last ran on, at each sample that saw
// it (numa_sampler.h).
struct ThreadPlacement {
  uint32_t tid = 0;
  std::string comm;
  std::map<int, uint64_t> samples_by_node;
  int majority_node = 0;  // the node with the most samples (the lowest of a tie)
};

// Threads' NUMA nodes against the NIC's, and the process's memory per node (numa_sampler.h).
struct NumaSummary {
  std::vector<ThreadPlacement> threads;     // by tid; empty: not measured
  uint64_t samples = 0;                     // thread samples, all threads
  std::string nic_device;                   // the RDMA device the NIC node is of
  std::optional<int> nic_node;              // its numa_node; unknown (or -1) -> nullopt
  std::optional<uint64_t> off_nic_samples;  // thread samples on another node than nic_node
  std::optional<double> off_nic_share;      // off_nic_samples / samples
  // /proc/PID/numa_maps, the last reading of the live process; nullopt: not measured.
  std::optional<std::map<int, uint64_t>> memory_bytes_by_node;
  std::optional<double> memory_off_nic_share;  // share of those bytes on another node
  uint64_t malformed_numa_maps_lines = 0;      // skipped
};

// One counter of a NIC or RDMA port over the window.
struct CounterDelta {
  std::string device, port, counter;  // port empty for netdevs
  double delta = 0;
  double per_second = 0;
};

struct TimePoint {
  double t_seconds = 0;  // since the start of the window
  double value = 0;
};

// A plot: outstanding MR bytes, one CQ's occupancy (limit = its capacity), NIC throughput.
struct Timeline {
  std::string id;     // "mr_outstanding_bytes", "cq_occupancy", "nic_throughput"
  std::string title;  // "CQ 3 on rxe0", "eth0 transmit"
  std::string unit;   // "bytes", "entries", "bytes_per_second"
  std::optional<double> limit;
  std::vector<TimePoint> points;
};

struct ProfileData {
  int schema_version = kProfileSchemaVersion;
  std::string rdmascope_version;
  std::vector<std::string> command;  // empty in --pid mode
  uint32_t pid = 0;
  std::string comm;
  // Who runs it: rdma_process_workload_info's labels (namespace, pod, container, pod_uid,
  // container_id, slurm_job_id, slurm_step_id, systemd_unit), those with a value.
  std::vector<std::pair<std::string, std::string>> workload;
  double start_unix_seconds = 0;
  double duration_seconds = 0;
  std::string end_reason;  // "exited", "duration", "interrupted"
  std::optional<int> exit_status;
  bool preload_active = false;     // the stats of the preload library were found
  bool probes_active = false;      // the MR/verbs probes were attached
  std::vector<std::string> notes;  // what could not be measured and why

  MrSummary mr;
  std::vector<RegistrationStack> stacks;  // by outstanding bytes, then registered bytes
  std::vector<QueueInfo> queues;
  std::map<std::string, uint64_t> qps_by_type;  // restrack: QPs of the process by type
  MessageSummary messages;
  PerfSummary perf;
  NumaSummary numa;
  std::vector<CounterDelta> counters;
  std::vector<Timeline> timelines;
  std::vector<doctor::Finding> advice;  // same ids and engine as doctor
};

}  // namespace rdmascope::profile
