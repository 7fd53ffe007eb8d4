#include "profile/profile_session.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "collectors/mr.h"
#include "collectors/occupancy.h"
#include "collectors/verbs.h"
#include "core/log.h"
#include "core/metric_set.h"
#include "core/version.h"
#include "doctor/checks.h"
#include "doctor/checks_sizing.h"
#include "doctor/report.h"
#include "profile/profile_advice.h"

namespace rdmascope::profile {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const std::string& LabelOf(const ClientMetric& metric, const std::string& name) {
  static const std::string kEmpty;
  for (const auto& label : metric.label) {
    if (label.name == name) return label.value;
  }
  return kEmpty;
}

double ValueOf(const MetricFamily& family, const ClientMetric& metric) {
  switch (family.type) {
    case MetricType::Counter:
      return metric.counter.value;
    case MetricType::Gauge:
      return metric.gauge.value;
    case MetricType::Untyped:
      return metric.untyped.value;
    default:
      return 0;
  }
}

const MetricFamily* FamilyOf(const std::vector<MetricFamily>& families, std::string_view name) {
  for (const MetricFamily& family : families) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

// Series of `name` whose labels include every (label, value) of `match`.
std::vector<const ClientMetric*> Find(const std::vector<MetricFamily>& families,
                                      std::string_view name, const doctor::Matchers& match) {
  std::vector<const ClientMetric*> found;
  const MetricFamily* family = FamilyOf(families, name);
  if (family == nullptr) return found;
  for (const ClientMetric& metric : family->metric) {
    bool all = true;
    for (const auto& [label, value] : match) all = all && LabelOf(metric, label) == value;
    if (all) found.push_back(&metric);
  }
  return found;
}

std::optional<double> One(const std::vector<MetricFamily>& families, std::string_view name,
                          const doctor::Matchers& match) {
  const auto found = Find(families, name, match);
  if (found.empty()) return std::nullopt;
  return ValueOf(*FamilyOf(families, name), *found.front());
}

uint64_t Count(double value) { return value > 0 ? static_cast<uint64_t>(std::llround(value)) : 0; }

// The MR probe's per-process figures, as the mr collector exported them.
std::optional<MrProcess> MrFromFamilies(const std::vector<MetricFamily>& families,
                                        const std::string& pid) {
  const doctor::Matchers match{{"pid", pid}};
  const auto regions = One(families, "rdma_mr_outstanding_regions", match);
  if (!regions) return std::nullopt;
  MrProcess proc;
  proc.pid = static_cast<uint32_t>(std::stoul(pid));
  proc.comm = LabelOf(*Find(families, "rdma_mr_outstanding_regions", match).front(), "comm");
  proc.outstanding_regions = static_cast<int64_t>(*regions);
  proc.outstanding_bytes =
      static_cast<int64_t>(One(families, "rdma_mr_outstanding_bytes", match).value_or(0));
  proc.registrations = Count(One(families, "rdma_mr_registrations_total", match).value_or(0));
  proc.deregistrations = Count(One(families, "rdma_mr_deregistrations_total", match).value_or(0));
  proc.failures = Count(One(families, "rdma_mr_registration_failures_total", match).value_or(0));
  proc.not_huge_aligned_bytes =
      Count(One(families, "rdma_mr_not_hugepage_aligned_bytes_total", match).value_or(0));
  proc.length_not_page_multiple =
      Count(One(families, "rdma_mr_length_not_page_multiple_total", match).value_or(0));
  return proc;
}

// The per-registration details of the MR probe (alignment, churn, per-flag counts) into
// `proc`; false when the collection had none of them (then they are not measured, not 0).
bool MrDetailsFromFamilies(const std::vector<MetricFamily>& families, const std::string& pid,
                           MrProcess& proc) {
  const doctor::Matchers match{{"pid", pid}};
  const auto by_alignment = Find(families, "rdma_mr_registrations_by_alignment_total", match);
  const auto reregistrations = One(families, "rdma_mr_reregistrations_total", match);
  if (by_alignment.empty() || !reregistrations) return false;
  for (const ClientMetric* metric : by_alignment) {
    const std::string& alignment = LabelOf(*metric, "alignment");
    const uint64_t count = Count(metric->counter.value);
    if (alignment == "2MiB") proc.aligned_huge = count;
    if (alignment == "4KiB") proc.aligned_page = count;
    if (alignment == "unaligned") proc.unaligned = count;
  }
  proc.reregistrations = Count(*reregistrations);
  proc.reregistered_bytes =
      Count(One(families, "rdma_mr_reregistered_bytes_total", match).value_or(0));
  proc.access_registrations.fill(0);
  for (const ClientMetric* metric :
       Find(families, "rdma_mr_registrations_by_access_flag_total", match)) {
    const std::string& flag = LabelOf(*metric, "flag");
    for (size_t bit = 0; bit < proc.access_registrations.size(); ++bit) {
      if (AccessFlagName(static_cast<int>(bit)) == flag) {
        proc.access_registrations[bit] = Count(metric->counter.value);
      }
    }
  }
  return true;
}

std::vector<std::string> AccessFlagsSeen(const std::vector<MetricFamily>& families,
                                         const std::string& pid) {
  std::vector<std::string> flags;
  for (const ClientMetric* metric : Find(families, "rdma_mr_access_flag_seen", {{"pid", pid}})) {
    if (metric->gauge.value > 0) flags.push_back(LabelOf(*metric, "flag"));
  }
  return flags;
}

std::optional<Log2Histogram> HistogramOf(const std::vector<MetricFamily>& families,
                                         std::string_view name, const doctor::Matchers& match,
                                         double to_unit) {
  const auto found = Find(families, name, match);
  if (found.empty()) return std::nullopt;
  return Log2FromPrometheus(found.front()->histogram, to_unit);
}

// A histogram over the window: the last view's minus the baseline's (absent there: all of it).
std::optional<Log2Histogram> WindowHistogram(const std::vector<MetricFamily>& now,
                                             const std::vector<MetricFamily>& start,
                                             std::string_view name, const doctor::Matchers& match,
                                             double to_unit) {
  const auto after = HistogramOf(now, name, match, to_unit);
  if (!after) return std::nullopt;
  const auto before = HistogramOf(start, name, match, to_unit);
  return before ? Subtract(*after, *before) : *after;
}

std::string QueueKey(const std::string& kind, const std::string& device,
                     const std::string& handle) {
  return kind + "/" + device + "/" + handle;
}

}  // namespace

Log2Histogram Log2FromPrometheus(const ClientMetric::Histogram& histogram, double to_unit) {
  Log2Histogram out;
  out.count = histogram.sample_count;
  out.sum = histogram.sample_sum * to_unit;
  uint64_t below = 0;
  size_t last = 0;
  for (const ClientMetric::Bucket& bucket : histogram.bucket) {
    size_t index = last + 1;
    if (std::isfinite(bucket.upper_bound)) {
      const double bound = bucket.upper_bound * to_unit;
      index = bound <= 1 ? 0 : static_cast<size_t>(std::ceil(std::log2(bound) - 1e-9));
      last = index;
    }
    if (out.buckets.size() <= index) out.buckets.resize(index + 1, 0);
    const uint64_t cumulative = bucket.cumulative_count;
    out.buckets[index] += cumulative > below ? cumulative - below : 0;
    below = std::max(below, cumulative);
  }
  return out;
}

Log2Histogram Subtract(const Log2Histogram& after, const Log2Histogram& before) {
  Log2Histogram out = after;
  for (size_t b = 0; b < before.buckets.size() && b < out.buckets.size(); ++b) {
    out.buckets[b] = out.buckets[b] > before.buckets[b] ? out.buckets[b] - before.buckets[b] : 0;
  }
  out.count = after.count > before.count ? after.count - before.count : 0;
  out.sum = std::max(0.0, after.sum - before.sum);
  return out;
}

Frame ParseFrame(const std::string& described, const std::string& module) {
  Frame frame{.function = described, .module = module};
  const auto plus = described.rfind("+0x");
  if (plus == std::string::npos || plus == 0) return frame;
  try {
    size_t used = 0;
    const uint64_t offset = std::stoull(described.substr(plus + 3), &used, 16);
    if (plus + 3 + used != described.size()) return frame;
    frame.offset = offset;
    frame.function = described.substr(0, plus);
    // sys::Frame::Describe names an unknown function by its module ("libfoo.so+0x2a40").
    if (frame.function == module) frame.function = "??";
  } catch (const std::exception&) {
  }
  return frame;
}

ProfileSession::ProfileSession(CollectorRunner& runner,
                               std::map<std::string, std::string> probe_errors,
                               SessionOptions options)
    : runner_(runner),
      routes_(runner.CollectDebugRoutes()),
      probe_errors_(std::move(probe_errors)),
      options_(std::move(options)),
      pid_text_(std::to_string(options_.pid)),
      numa_(options_.procfs, sys::ReadCpuTopology(options_.sysfs), options_.pid) {}

ProfileSession::Collection ProfileSession::CollectNow() {
  return {runner_.Collect(), MonotonicSeconds()};
}

void ProfileSession::Begin() {
  start_unix_ = UnixSeconds();
  Collection first = CollectNow();
  start_monotonic_ = first.seconds;
  start_snapshot_.emplace(first.families, first.seconds);
  start_families_ = first.families;
  Absorb(first.families, 0, true);
  previous_ = std::move(first);
  TakeQps();
  // A launched program is still rdmascope's fork waiting to exec: nothing of it to place yet.
  if (options_.attached) numa_.Sample();
}

void ProfileSession::Sample() {
  Collection now = CollectNow();
  Absorb(now.families, now.seconds - start_monotonic_, true);
  previous_ = std::move(now);
  TakeStacks(false);
  TakeQps();
  numa_.Sample();
}

void ProfileSession::TakeQps() {
  if (!options_.qps) return;
  std::vector<VerbsQp> qps = options_.qps(options_.pid);
  std::lock_guard lock(mutex_);
  for (VerbsQp& qp : qps) qps_[{qp.qp_num, qp.handle}] = std::move(qp);
}

void ProfileSession::AddTimelinePoint(const std::string& id, const std::string& title,
                                      const std::string& unit, std::optional<double> limit,
                                      double t, double value) {
  Timeline& line = timelines_[id + "\n" + title];
  line.id = id;
  line.title = title;
  line.unit = unit;
  if (limit) line.limit = limit;
  line.points.push_back({t, value});
}

void ProfileSession::Absorb(const std::vector<MetricFamily>& families, double t,
                            bool whole_collection) {
  std::lock_guard lock(mutex_);
  const doctor::Matchers match{{"pid", pid_text_}};
  bool seen = false;
  if (!mr_exit_seen_) {
    if (auto proc = MrFromFamilies(families, pid_text_)) {
      if (comm_.empty()) comm_ = proc->comm;
      mr_details_ = MrDetailsFromFamilies(families, pid_text_, *proc);
      mr_ = *proc;
      seen = true;
    }
  }
  // Its workload: as exported, else as the workload collector reads it while it runs.
  if (const auto info = Find(families, "rdma_process_workload_info", match); info.size() == 1) {
    workload_.clear();
    for (const auto& label : info.front()->label) {
      if (label.name != "pid" && label.name != "comm" && !label.value.empty()) {
        workload_.emplace_back(label.name, label.value);
      }
    }
  } else if (workload_.empty() && options_.workload && options_.pid != 0) {
    workload_ = options_.workload(options_.pid);
  }
  // The preload library's per-process series: gone once its stats file is (at exit).
  if (whole_collection && !Find(families, "rdma_process_message_size_bytes", match).empty()) {
    last_preload_families_ = families;
  }
  for (const ClientMetric* metric : Find(families, "rdma_process_resources", match)) {
    devices_.insert(LabelOf(*metric, "device"));
    if (comm_.empty()) comm_ = LabelOf(*metric, "comm");
    seen = true;
  }
  // Seen (above): the series of a live process only. Queue series below are not: the verbs
  // probe keeps an exited process's CQs while it is an unreaped zombie.
  // CQs: capacity and feeding depth (verbs probe), occupancy and polls (preload).
  for (const ClientMetric* metric : Find(families, "rdma_cq_capacity_entries", match)) {
    const std::string& device = LabelOf(*metric, "device");
    const std::string& handle = LabelOf(*metric, "cq");
    QueueInfo& cq = queues_[QueueKey("cq", device, handle)];
    cq.kind = "cq";
    cq.device = device;
    cq.handle = handle;
    cq.capacity = Count(metric->gauge.value);
    if (comm_.empty()) comm_ = LabelOf(*metric, "comm");
  }
  for (const ClientMetric* metric : Find(families, "rdma_cq_feeding_wrs", match)) {
    auto it = queues_.find(QueueKey("cq", LabelOf(*metric, "device"), LabelOf(*metric, "cq")));
    if (it != queues_.end()) it->second.feeding_wrs = Count(metric->gauge.value);
  }
  for (const ClientMetric* metric : Find(families, "rdma_cq_outstanding_peak_entries", match)) {
    auto it = queues_.find(QueueKey("cq", LabelOf(*metric, "device"), LabelOf(*metric, "cq")));
    if (it == queues_.end()) continue;
    it->second.peak_occupancy =
        std::max(it->second.peak_occupancy.value_or(0), Count(metric->gauge.value));
  }
  for (const ClientMetric* metric : Find(families, "rdma_cq_polled_completions_total", match)) {
    const std::string& device = LabelOf(*metric, "device");
    const std::string& handle = LabelOf(*metric, "cq");
    auto it = queues_.find(QueueKey("cq", device, handle));
    const auto requested = One(families, "rdma_cq_poll_requested_entries_total",
                               {{"pid", pid_text_}, {"device", device}, {"cq", handle}});
    if (it != queues_.end() && requested && *requested > 0) {
      it->second.poll_batch_fullness = metric->counter.value / *requested;
    }
  }
  for (const ClientMetric* metric : Find(families, "rdma_srq_max_wrs", match)) {
    const std::string& device = LabelOf(*metric, "device");
    const std::string& handle = LabelOf(*metric, "srq");
    QueueInfo& srq = queues_[QueueKey("srq", device, handle)];
    srq.kind = "srq";
    srq.device = device;
    srq.handle = handle;
    srq.capacity = Count(metric->gauge.value);
    if (const auto posted = One(families, "rdma_srq_posted_wrs",
                                {{"pid", pid_text_}, {"device", device}, {"srq", handle}})) {
      srq.peak_occupancy = std::max(srq.peak_occupancy.value_or(0), Count(*posted));
    }
  }
  if (seen && whole_collection) {
    last_families_ = families;
    last_t_ = t;
  }
  if (mr_ && !mr_exit_seen_) {
    AddTimelinePoint("mr_outstanding_bytes", "outstanding MR bytes", "bytes", std::nullopt, t,
                     static_cast<double>(mr_->outstanding_bytes));
  }
  for (const ClientMetric* metric : Find(families, "rdma_cq_outstanding_entries", match)) {
    const std::string& device = LabelOf(*metric, "device");
    const std::string& handle = LabelOf(*metric, "cq");
    const auto it = queues_.find(QueueKey("cq", device, handle));
    std::optional<double> limit;
    if (it != queues_.end() && it->second.capacity) limit = *it->second.capacity;
    AddTimelinePoint("cq_occupancy", "CQ " + handle + " on " + device, "entries", limit, t,
                     metric->gauge.value);
  }
  // NIC throughput: the RDMA ports of the devices the process uses (all, when it holds none).
  if (previous_ && t > 0) {
    const double elapsed = t - (previous_->seconds - start_monotonic_);
    for (const char* direction : {"transmitted", "received"}) {
      const std::string name = std::string("rdma_port_data_") + direction + "_bytes_total";
      for (const ClientMetric* metric : Find(families, name, {})) {
        const std::string& device = LabelOf(*metric, "device");
        if (!devices_.empty() && !devices_.contains(device)) continue;
        const std::string& port = LabelOf(*metric, "port");
        const auto before = One(previous_->families, name, {{"device", device}, {"port", port}});
        if (!before || elapsed <= 0 || metric->counter.value < *before) continue;
        AddTimelinePoint("nic_throughput", device + " port " + port + " " + direction,
                         "bytes_per_second", std::nullopt, t,
                         (metric->counter.value - *before) / elapsed);
      }
    }
  }
}

void ProfileSession::TakeStacks(bool at_exit) {
  const auto route = routes_.find("/debug/mr/stacks");
  if (route == routes_.end()) return;  // the mr collector is disabled
  nlohmann::json body;
  try {
    body = nlohmann::json::parse(route->second("pid=" + pid_text_ + "&top=100"));
  } catch (const std::exception& e) {
    log::Warn("profile: call sites unreadable", {{"err", e.what()}});
    return;
  }
  if (!body.contains("processes")) return;  // probes not attached: said in the notes
  std::vector<RegistrationStack> stacks;
  for (const auto& proc : body["processes"]) {
    if (proc.value("pid", 0U) != options_.pid) continue;
    for (const auto& site : proc["stacks"]) {
      RegistrationStack stack;
      stack.outstanding_regions = site.value("outstanding_regions", uint64_t{0});
      stack.outstanding_bytes = site.value("outstanding_bytes", uint64_t{0});
      for (const auto& frame : site["frames"]) {
        stack.frames.push_back(
            ParseFrame(frame.value("function", "??"), frame.value("module", "")));
      }
      stacks.push_back(std::move(stack));
    }
  }
  std::lock_guard lock(mutex_);
  if (stacks_at_exit_) return;  // the regions left at exit are final
  // A walk that finds nothing at the end may just follow the exit: keep the last one.
  stacks_ = std::move(stacks);
  stacks_at_exit_ = at_exit;
}

void ProfileSession::OnMrExit(const MrProcess& last) {
  if (last.pid != options_.pid) return;
  {
    std::lock_guard lock(mutex_);
    mr_ = last;
    mr_details_ = true;  // the probe's own figures: every field measured
    mr_exit_seen_ = true;
  }
  TakeStacks(true);
}

void ProfileSession::OnPreloadFinished(const OccupancyProcess& last) {
  // A pid of another namespace (untranslated) is not the profiled process, whatever its number.
  if (last.pid != options_.pid || last.pid_ns != 0) return;
  std::lock_guard lock(mutex_);
  preload_finished_.push_back(last);
}

void ProfileSession::ProcessExited() {
  std::vector<OccupancyProcess> mine;
  {
    std::lock_guard lock(mutex_);
    mine = preload_finished_;
  }
  if (mine.empty()) return;
  MetricSet set;
  MapOccupancy(mine, set);
  preload_at_exit_ = set.Take();
  Absorb(preload_at_exit_, MonotonicSeconds() - start_monotonic_, false);
}

void ProfileSession::SetProcessPerf(std::vector<sys::ProcessPerfCounters::Event> events) {
  std::lock_guard lock(mutex_);
  process_perf_ = std::move(events);
}

bool ProfileSession::exit_seen() const {
  std::lock_guard lock(mutex_);
  return mr_exit_seen_;
}

Progress ProfileSession::progress() const {
  std::lock_guard lock(mutex_);
  Progress progress{.elapsed_seconds = MonotonicSeconds() - start_monotonic_};
  if (mr_) {
    progress.registrations = mr_->registrations;
    progress.events = mr_->registrations + mr_->deregistrations + mr_->failures;
    progress.outstanding_bytes = mr_->outstanding_bytes;
  }
  progress.events += queues_.size();
  return progress;
}

ProfileData ProfileSession::Finish(const std::string& end_reason, std::optional<int> exit_status,
                                   const std::vector<std::string>& extra_notes) {
  Collection last = CollectNow();  // an exited process's MR figures arrive via OnMrExit
  const double t = last.seconds - start_monotonic_;
  Absorb(last.families, t, true);
  TakeQps();
  const bool exited = end_reason == "exited" || exit_status.has_value();

  std::lock_guard lock(mutex_);
  ProfileData data;
  data.rdmascope_version = kVersion;
  data.command = options_.command;
  data.pid = options_.pid;
  data.comm = comm_;
  data.start_unix_seconds = start_unix_;
  data.duration_seconds = t;
  data.end_reason = end_reason;
  data.exit_status = exit_status;
  data.notes = extra_notes;
  data.probes_active = !probe_errors_.contains("mr") && routes_.contains("/debug/mr/stacks");
  if (const auto it = probe_errors_.find("mr"); it != probe_errors_.end()) {
    data.notes.push_back("MR probes not attached: " + it->second);
  }
  // The view of the process: the last collection that still showed it.
  const std::vector<MetricFamily>& view = exited ? last_families_ : last.families;
  const doctor::Matchers match{{"pid", pid_text_}};

  data.workload = workload_;

  MrSummary& mr = data.mr;
  if (mr_) {
    if (data.comm.empty()) data.comm = mr_->comm;
    mr.registrations = mr_->registrations;
    mr.deregistrations = mr_->deregistrations;
    mr.failures = mr_->failures;
    mr.outstanding_regions = static_cast<uint64_t>(std::max<int64_t>(0, mr_->outstanding_regions));
    mr.outstanding_bytes = static_cast<uint64_t>(std::max<int64_t>(0, mr_->outstanding_bytes));
    mr.not_hugepage_aligned_bytes = mr_->not_huge_aligned_bytes;
    mr.length_not_page_multiple = mr_->length_not_page_multiple;
    if (exited && mr_exit_seen_) {
      mr.released_at_exit_regions = mr.outstanding_regions;
      mr.released_at_exit_bytes = mr.outstanding_bytes;
    }
  }
  mr.access_flags_seen = AccessFlagsSeen(view, pid_text_);
  if (mr_ && mr_details_) {
    mr.aligned_2mib = mr_->aligned_huge;
    mr.aligned_4kib = mr_->aligned_page;
    mr.unaligned = mr_->unaligned;
    mr.churn_registrations = mr_->reregistrations;
    mr.churn_bytes = mr_->reregistered_bytes;
    for (size_t bit = 0; bit < mr_->access_registrations.size(); ++bit) {
      if (mr_->access_registrations[bit] == 0) continue;
      mr.access_flags[AccessFlagName(static_cast<int>(bit))] = mr_->access_registrations[bit];
    }
  } else {
    mr.unmeasured = {"aligned_2mib",        "aligned_4kib", "unaligned",
                     "churn_registrations", "churn_bytes",  "access_flags"};
  }
  // The probe's histograms are per comm (processes of the same name are summed) and keep
  // exited processes' counts: the last collection has every registration up to the exit.
  if (!data.comm.empty()) {
    const doctor::Matchers by_comm{{"comm", data.comm}};
    if (auto sizes = WindowHistogram(last.families, start_families_,
                                     "rdma_mr_registration_size_bytes", by_comm, 1)) {
      mr.size_bytes = *sizes;
      mr.registered_bytes = static_cast<uint64_t>(sizes->sum);
    }
    if (auto latency = WindowHistogram(last.families, start_families_,
                                       "rdma_mr_registration_duration_seconds", by_comm, 1e9)) {
      mr.latency_ns = *latency;
    }
  }
  if (options_.attached) {
    double restrack = 0;
    for (const ClientMetric* metric : Find(start_families_, "rdma_process_mr_bytes", match)) {
      restrack += metric->gauge.value;
    }
    if (restrack > 0) {
      mr.restrack_bytes = Count(restrack);
      if (mr.restrack_bytes > mr.outstanding_bytes) {
        mr.from_restrack_only = true;
        data.notes.push_back(std::to_string(*mr.restrack_bytes - mr.outstanding_bytes) +
                             " registered bytes predate the attach: seen by restrack only, "
                             "without call stacks");
        mr.outstanding_bytes = *mr.restrack_bytes;
      }
    }
  }
  data.stacks = stacks_;
  std::sort(data.stacks.begin(), data.stacks.end(), [](const auto& a, const auto& b) {
    return a.outstanding_bytes != b.outstanding_bytes ? a.outstanding_bytes > b.outstanding_bytes
                                                      : a.registered_bytes > b.registered_bytes;
  });
  if (exited && mr.outstanding_regions > 0 && !stacks_at_exit_) {
    data.notes.push_back(
        "the call sites of the regions left at exit were not read before the "
        "probe forgot the process; the last walk is shown");
  }

  for (const auto& [key, queue] : queues_) data.queues.push_back(queue);
  for (const ClientMetric* metric : Find(view, "rdma_process_qps", match)) {
    data.qps_by_type[LabelOf(*metric, "type")] += Count(metric->gauge.value);
  }

  // Messages (preload): the stats read at exit (a killed program's file outlives it), else the
  // last collection that had them (the library removes its file at a normal exit).
  const std::vector<MetricFamily>& preload = !preload_at_exit_.empty() ? preload_at_exit_
                                             : exited                  ? last_preload_families_
                                                                       : last.families;
  for (const auto& [direction, target] :
       {std::pair{"send", &data.messages.send_bytes}, {"recv", &data.messages.recv_bytes}}) {
    if (auto h = WindowHistogram(preload, start_families_, "rdma_process_message_size_bytes",
                                 {{"pid", pid_text_}, {"direction", direction}}, 1)) {
      *target = *h;
    }
  }
  if (auto h = WindowHistogram(preload, start_families_, "rdma_process_completion_latency_seconds",
                               match, 1e9)) {
    data.messages.completion_latency_ns = *h;
  }
  // How much of the post-to-poll latency is queueing (Little's law), next to the round trip
  // queues.qp_depth takes from it (profile_advice.h).
  if (auto note = QueueingNote(data)) data.notes.push_back(std::move(*note));
  // Active: its per-process series were found (an empty histogram would read as "0 messages").
  data.preload_active =
      !Find(preload, "rdma_process_message_size_bytes", {{"pid", pid_text_}}).empty();

  // Counters over the window: ports and netdevs of the devices the process used (all if none).
  std::set<std::string> netdevs;
  for (const ClientMetric* metric : Find(last.families, "rdma_port_info", {})) {
    if (devices_.empty() || devices_.contains(LabelOf(*metric, "device"))) {
      netdevs.insert(LabelOf(*metric, "netdev"));
    }
  }
  for (const MetricFamily& family : last.families) {
    if (family.type != MetricType::Counter) continue;
    const bool port = family.name.starts_with("rdma_port_");
    if (!port && !family.name.starts_with("rdma_netdev_")) continue;
    for (const ClientMetric& metric : family.metric) {
      const std::string& device = LabelOf(metric, "device");
      if (port ? !devices_.empty() && !devices_.contains(device) : !netdevs.contains(device)) {
        continue;
      }
      doctor::Matchers labels;
      for (const auto& label : metric.label) labels.emplace_back(label.name, label.value);
      const auto before = One(start_families_, family.name, labels);
      if (!before || metric.counter.value < *before) continue;  // new or reset: no honest delta
      std::string counter = family.name;
      for (const auto& label : metric.label) {
        if (label.name != "device" && label.name != "port") counter += "{" + label.value + "}";
      }
      const double delta = metric.counter.value - *before;
      data.counters.push_back({.device = device,
                               .port = LabelOf(metric, "port"),
                               .counter = counter,
                               .delta = delta,
                               .per_second = t > 0 ? delta / t : 0});
    }
  }

  // Perf: the process's own counters when they could be opened, else host-wide events (the
  // perf collector counts per CPU/node, not per process).
  if (process_perf_) {
    for (const sys::ProcessPerfCounters::Event& event : *process_perf_) {
      if (event.value) {
        data.perf.events[event.name] = *event.value;
        data.perf.process_own = true;
      } else {
        data.perf.unavailable[event.name] =
            event.reason.empty() ? "the event has not run" : event.reason;
      }
    }
  }
  for (const ClientMetric* metric : data.perf.process_own
                                        ? std::vector<const ClientMetric*>{}
                                        : Find(last.families, "rdma_perf_events_total", {})) {
    const std::string& event = LabelOf(*metric, "event");
    const auto before = One(start_families_, "rdma_perf_events_total",
                            {{"event", event}, {"node", LabelOf(*metric, "node")}});
    if (before && metric->counter.value >= *before) {
      data.perf.events[event] += metric->counter.value - *before;
    }
  }
  if (!data.perf.events.empty()) {
    if (!data.perf.process_own) {
      data.notes.push_back("perf events are host-wide over the window, not the process's own");
    }
    const auto& events = data.perf.events;
    if (events.contains("instructions") && events.contains("cycles") && events.at("cycles") > 0) {
      data.perf.ipc = events.at("instructions") / events.at("cycles");
    }
    if (events.contains("LLC-load-misses") && events.contains("LLC-loads") &&
        events.at("LLC-loads") > 0) {
      data.perf.llc_miss_ratio = events.at("LLC-load-misses") / events.at("LLC-loads");
    }
  }
  std::string nic_device;
  for (const std::string& device : devices_) {
    if (const auto node = One(last.families, "rdma_device_numa_node", {{"device", device}})) {
      data.perf.nic_numa_node = static_cast<int>(*node);
      nic_device = device;
      break;
    }
  }
  data.numa = numa_.Summarize(nic_device, data.perf.nic_numa_node);
  for (const ThreadPlacement& thread : data.numa.threads) {
    data.perf.thread_numa_nodes.push_back(thread.majority_node);
  }
  if (data.numa.threads.empty()) {
    data.notes.push_back("threads' NUMA nodes not measured: no thread of the process was read");
  }
  if (data.numa.malformed_numa_maps_lines > 0) {
    log::Warn("profile: malformed numa_maps lines skipped",
              {{"pid", pid_text_}, {"lines", std::to_string(data.numa.malformed_numa_maps_lines)}});
    data.notes.push_back(std::to_string(data.numa.malformed_numa_maps_lines) +
                         " malformed numa_maps lines skipped: memory per node is a lower bound");
  }

  for (auto& [key, line] : timelines_) data.timelines.push_back(line);

  // Each QP with its capacities; an RC QP's needed send depth is queues.qp_depth's figure
  // (with the measured completion latency as its round trip: the messages are read above).
  const doctor::Snapshot qp_view(exited ? view : last.families, last.seconds);
  for (const auto& [key, qp] : qps_) {
    QueueInfo info{.kind = "qp",
                   .device = qp.device,
                   .handle = std::to_string(qp.qp_num),
                   .type = QpTypeName(qp.type),
                   .capacity = qp.max_send_wr};
    if (!qp.srq) info.max_recv_wr = qp.max_recv_wr;
    info.max_send_sge = qp.max_send_sge;
    info.max_recv_sge = qp.max_recv_sge;
    info.uses_srq = qp.srq;
    if (info.type == "RC" && !qp.device.empty() && qp.max_send_wr > 0) {
      if (const auto need =
              doctor::QpDepthNeeded(qp_view, qp.device, pid_text_,
                                    qp.comm.empty() ? comm_ : qp.comm, MeasuredOptions(data))) {
        info.needed_send_wrs = Count(need->needed);
        info.recommended_send_wrs = Count(need->recommended);
      }
    }
    data.queues.push_back(std::move(info));
  }

  // Advice: doctor's checks over the window's first and last collections, with the measured
  // completion latency (profile_advice.h), kept to this process and the devices it used.
  const doctor::Snapshot final_snapshot(exited ? view : last.families, last.seconds);
  for (doctor::Finding& finding :
       doctor::RunChecks(final_snapshot, &*start_snapshot_, MeasuredOptions(data))) {
    if (finding.severity == doctor::Severity::kOk || finding.severity == doctor::Severity::kSkip) {
      continue;
    }
    std::string pid, device;
    for (const auto& [label, value] : finding.scope) {
      if (label == "pid") pid = value;
      if (label == "device") device = value;
    }
    const bool mine = pid == pid_text_ ||
                      (pid.empty() && (device.empty() || devices_.empty() ||
                                       devices_.contains(device) || netdevs.contains(device)));
    // host.numa_placement: the sampled figures below replace doctor's one-instant view.
    if (mine && finding.id == "host.numa_placement" && data.numa.off_nic_share) continue;
    if (mine) data.advice.push_back(std::move(finding));
  }
  std::string comm = data.comm;
  for (const ThreadPlacement& thread : data.numa.threads) {
    if (comm.empty() && thread.tid == options_.pid) comm = thread.comm;
  }
  if (auto numa = NumaPlacementAdvice(data.numa, options_.pid, comm, options_.command,
                                      MeasuredOptions(data).remote_numa_ratio);
      numa && numa->severity != doctor::Severity::kOk) {
    data.advice.push_back(std::move(*numa));
  }
  doctor::SortFindings(data.advice);
  if (!data.preload_active) {
    data.notes.push_back(
        "preload library not active: no message sizes, completion latency or "
        "CQ occupancy");
  }
  for (const std::string& note : notes_) data.notes.push_back(note);
  return data;
}

}  // namespace rdmascope::profile
