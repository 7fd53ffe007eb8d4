// One `rdmascope profile` window over one process: runs the collectors `serve` runs (the same
// CollectorRunner, probes and preload stats), samples them every --interval, and turns what
// they saw of that process into ProfileData (profile_data.h). Nothing here reads the host by
// another path: figures come from the collectors' metric families, the MR probe's
// /debug/mr/stacks and its exit observer, and the occupancy collector's stats-file parser.
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bpf/mr_probe.h"
#include "bpf/verbs_probe.h"
#include "collectors/occupancy.h"
#include "core/collector_runner.h"
#include "doctor/samples.h"
#include "profile/numa_sampler.h"
#include "profile/profile_data.h"
#include "sys/perf_events.h"

namespace rdmascope::profile {

struct SessionOptions {
  uint32_t pid = 0;
  bool attached = false;              // --pid: the process ran before the probes attached
  std::filesystem::path preload_dir;  // where its preload library writes (may be empty)
  std::vector<std::string> command;
  // Roots of the threads' and memory's NUMA placement (--path.procfs, --path.sysfs).
  std::filesystem::path procfs = "/proc";
  std::filesystem::path sysfs = "/sys";
  // The QPs of a pid with their capacities (VerbsCollector::Qps); empty: no verbs collector.
  std::function<std::vector<VerbsQp>(uint32_t pid)> qps;
  // Who runs a pid (WorkloadCollector::Describe), for a process no collector exported with
  // rdma_process_workload_info (attached after its registrations); empty: no workload collector.
  std::function<std::vector<std::pair<std::string, std::string>>(uint32_t pid)> workload;
};

// What the progress line on stderr shows.
struct Progress {
  double elapsed_seconds = 0;
  uint64_t registrations = 0;  // MR registrations of the process in the window
  uint64_t events = 0;         // registrations + deregistrations + queue objects seen
  int64_t outstanding_bytes = 0;
};

// A log2 histogram (profile_data.h) from a Prometheus histogram whose bucket bounds are powers
// of two in `unit` (the bound times `to_unit`: 1e9 for seconds -> ns). Cumulative buckets are
// un-accumulated; the +Inf bucket becomes the bucket past the last bound.
Log2Histogram Log2FromPrometheus(const prometheus::ClientMetric::Histogram& histogram,
                                 double to_unit);
// `after` minus `before`, bucket by bucket (a histogram of the window).
Log2Histogram Subtract(const Log2Histogram& after, const Log2Histogram& before);

// "leak_regions+0x1c" (sys::Frame::Describe) -> function "leak_regions", offset 0x1c.
Frame ParseFrame(const std::string& described, const std::string& module);

class ProfileSession {
 public:
  ProfileSession(CollectorRunner& runner, std::map<std::string, std::string> probe_errors,
                 SessionOptions options);

  // The first collection: the baseline of every delta. Call once, before the window.
  void Begin();
  // One sample: timelines, peaks, and the call sites of the outstanding regions (symbolised
  // now, while the process is alive: a dead process's maps cannot be read).
  void Sample();
  // The process has exited and a collection ran since: its final preload figures (handed over
  // by OnPreloadFinished) become the window's message figures.
  void ProcessExited();
  // From the MR probe's exit observer (MrCollector::SetExitObserver), inside a collection.
  void OnMrExit(const MrProcess& last);
  // From the occupancy collector's finished-process observer, inside a collection: the final
  // figures of a stale stats file, read once before the collector deletes it.
  void OnPreloadFinished(const OccupancyProcess& last);
  // The last collection, deltas, advice. Call once.
  ProfileData Finish(const std::string& end_reason, std::optional<int> exit_status,
                     const std::vector<std::string>& extra_notes);

  // The process's own perf counters (sys::ProcessPerfCounters), read at the end of the
  // window: they replace the host-wide events in the report. Call before Finish().
  void SetProcessPerf(std::vector<sys::ProcessPerfCounters::Event> events);

  Progress progress() const;
  // The MR probe has seen the process exit (--pid: it may linger as another parent's zombie).
  bool exit_seen() const;

 private:
  struct Collection {
    std::vector<prometheus::MetricFamily> families;
    double seconds = 0;
  };
  Collection CollectNow();
  // Updates the figures of the process from `families`; `whole_collection`: a collection of
  // every collector (not the preload stats read at exit alone), kept as the last view.
  void Absorb(const std::vector<prometheus::MetricFamily>& families, double t,
              bool whole_collection);
  void TakeStacks(bool at_exit);
  void AddTimelinePoint(const std::string& id, const std::string& title, const std::string& unit,
                        std::optional<double> limit, double t, double value);

  CollectorRunner& runner_;
  DebugRoutes routes_;
  std::map<std::string, std::string> probe_errors_;
  SessionOptions options_;
  std::string pid_text_;
  double start_monotonic_ = 0;
  double start_unix_ = 0;
  std::optional<doctor::Snapshot> start_snapshot_;
  std::vector<prometheus::MetricFamily> start_families_;
  std::vector<prometheus::MetricFamily> last_families_;  // the last collection seeing the pid
  double last_t_ = 0;
  std::optional<Collection> previous_;  // for rates in timelines

  mutable std::mutex mutex_;     // OnMrExit runs inside a collection; progress() from any thread
  std::optional<MrProcess> mr_;  // the probe's figures for the pid, the last seen
  bool mr_exit_seen_ = false;
  bool mr_details_ = false;                // mr_ holds alignment, churn and per-flag counts
  std::vector<RegistrationStack> stacks_;  // the last walk, symbolised
  bool stacks_at_exit_ = false;
  std::string comm_;
  std::vector<std::pair<std::string, std::string>> workload_;  // the last one seen
  std::map<std::string, QueueInfo> queues_;                    // by kind/device/handle
  std::map<std::string, Timeline> timelines_;
  std::vector<std::string> notes_;
  std::set<std::string> devices_;  // RDMA devices the process holds objects on (restrack)
  std::vector<OccupancyProcess> preload_finished_;  // the pid's images whose files went stale
  std::vector<prometheus::MetricFamily> preload_at_exit_;
  std::vector<prometheus::MetricFamily> last_preload_families_;  // with its message series
  std::optional<std::vector<sys::ProcessPerfCounters::Event>> process_perf_;
  NumaSampler numa_;  // threads' nodes and memory per node, at each sample
  // The process's QPs, the last time each was seen (an exited process's are forgotten).
  std::map<std::pair<uint32_t, uint32_t>, VerbsQp> qps_;  // (qp_num, handle) -> QP
  void TakeQps();
};

}  // namespace rdmascope::profile
