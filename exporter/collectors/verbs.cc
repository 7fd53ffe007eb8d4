#include "collectors/verbs.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "collectors/probe_capture.h"
#include "collectors/shared_metrics.h"
#include "core/capture.h"
#include "core/log.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kCqRequested{"rdma_cq_requested_entries",
                                  "Entries the application asked for in ibv_create_cq.",
                                  MetricType::Gauge};
constexpr MetricDesc kCqFeeding{"rdma_cq_feeding_wrs",
                                "Summed depth of the queues completing into the CQ: max send WRs "
                                "of QPs using it as send CQ, max receive WRs of QPs using it as "
                                "receive CQ (an SRQ's depth once instead, for QPs on an SRQ).",
                                MetricType::Gauge};
constexpr MetricDesc kSrqLimitReached{
    "rdma_srq_limit_reached_total", "SRQ_LIMIT_REACHED events for this SRQ.", MetricType::Counter};
constexpr MetricDesc kAsyncEvents{"rdma_async_events_total",
                                  "Asynchronous events the process received from "
                                  "ibv_get_async_event, by type.",
                                  MetricType::Counter};
constexpr MetricDesc kMinSendWrs{
    "rdma_process_qp_min_send_wrs",
    "Smallest send queue depth (max_send_wr as the provider granted it) of the process's RC QPs "
    "on the device: the QP that keeps the least work in flight.",
    MetricType::Gauge};
constexpr MetricDesc kMaxSendWrs{
    "rdma_process_qp_max_send_wrs",
    "Largest send queue depth (max_send_wr as the provider granted it) of the process's RC QPs "
    "on the device: the QP holding the most work-queue memory.",
    MetricType::Gauge};
constexpr MetricDesc kTotalSendWrs{
    "rdma_process_qp_total_send_wrs",
    "Summed send queue depth (max_send_wr as the provider granted it) of the process's RC QPs on "
    "the device: the most sends it can keep in flight there across its QPs.",
    MetricType::Gauge};
constexpr MetricDesc kOmitted{
    "rdmascope_verbs_queues_omitted",
    "CQs and SRQs not exported this scrape (--collector.verbs.max-queue-series).",
    MetricType::Gauge};
constexpr MetricDesc kLost{"rdma_verbs_lost_total",
                           "Verbs calls or objects not tracked because a BPF map was full, by "
                           "reason (objects: --collector.verbs.max-queues; processes: "
                           "--collector.verbs.max-processes).",
                           MetricType::Counter};

// enum ibv_event_type, in order.
constexpr std::array<std::string_view, 20> kEventNames = {"CQ_ERR",
                                                          "QP_FATAL",
                                                          "QP_REQ_ERR",
                                                          "QP_ACCESS_ERR",
                                                          "COMM_EST",
                                                          "SQ_DRAINED",
                                                          "PATH_MIG",
                                                          "PATH_MIG_ERR",
                                                          "DEVICE_FATAL",
                                                          "PORT_ACTIVE",
                                                          "PORT_ERR",
                                                          "LID_CHANGE",
                                                          "PKEY_CHANGE",
                                                          "SM_CHANGE",
                                                          "SRQ_ERR",
                                                          "SRQ_LIMIT_REACHED",
                                                          "QP_LAST_WQE_REACHED",
                                                          "CLIENT_REREGISTER",
                                                          "GID_CHANGE",
                                                          "WQ_FATAL"};

// Always exported (from 0), so that increase() sees the first one; the others when non-zero.
constexpr std::array<std::string_view, 10> kErrorEvents = {
    "CQ_ERR",       "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR",     "PATH_MIG_ERR",
    "DEVICE_FATAL", "PORT_ERR", "SRQ_ERR",    "SRQ_LIMIT_REACHED", "WQ_FATAL"};

// Fill ratio capacity / feeding: the smaller, the more likely the CQ overflows.
double SizingRatio(const VerbsCq& cq) {
  return cq.feeding_wrs == 0
             ? 1e300
             : static_cast<double>(cq.entries) / static_cast<double>(cq.feeding_wrs);
}

}  // namespace

std::string AsyncEventName(size_t type) {
  if (type < kEventNames.size()) return std::string(kEventNames[type]);
  if (type == kVerbsAsyncEventTypes - 1) return "OTHER";
  return "TYPE_" + std::to_string(type);
}

std::string QpTypeName(uint32_t type) {
  switch (static_cast<ibv_qp_type>(type)) {
    case IBV_QPT_RC:
      return "RC";
    case IBV_QPT_UC:
      return "UC";
    case IBV_QPT_UD:
      return "UD";
    case IBV_QPT_RAW_PACKET:
      return "RAW_PACKET";
    case IBV_QPT_XRC_SEND:
      return "XRC_SEND";
    case IBV_QPT_XRC_RECV:
      return "XRC_RECV";
    case IBV_QPT_DRIVER:
      return "DRIVER";
    default:
      return "TYPE_" + std::to_string(type);
  }
}

void MapVerbsSnapshot(const VerbsSnapshot& snapshot, size_t max_queue_series, MetricSet& out) {
  // A partial walk would serve counts that look complete: the collector fails instead (no
  // series from it this scrape; the runner logs the reason when it changes).
  if (!snapshot.walk_error.empty()) throw std::runtime_error(snapshot.walk_error);
  std::vector<const VerbsCq*> cqs;
  for (const VerbsCq& cq : snapshot.cqs) cqs.push_back(&cq);
  std::stable_sort(cqs.begin(), cqs.end(), [](const VerbsCq* a, const VerbsCq* b) {
    return SizingRatio(*a) < SizingRatio(*b);
  });
  size_t budget = max_queue_series;
  size_t omitted = 0;
  for (const VerbsCq* cq : cqs) {
    if (budget == 0) {
      ++omitted;
      continue;
    }
    --budget;
    // Label holds string_views: the numbers' text must outlive `labels`.
    const std::string pid = std::to_string(cq->pid);
    const std::string handle = std::to_string(cq->handle);
    const std::vector<Label> labels{
        {"device", cq->device}, {"pid", pid}, {"comm", cq->comm}, {"cq", handle}};
    out.Add(kCqCapacity, labels, cq->entries);
    out.Add(kCqRequested, labels, cq->requested_entries);
    out.Add(kCqFeeding, labels, static_cast<double>(cq->feeding_wrs));
  }
  for (const VerbsSrq& srq : snapshot.srqs) {
    if (budget == 0) {
      ++omitted;
      continue;
    }
    --budget;
    const std::string pid = std::to_string(srq.pid);
    const std::string handle = std::to_string(srq.handle);
    const std::vector<Label> labels{
        {"device", srq.device}, {"pid", pid}, {"comm", srq.comm}, {"srq", handle}};
    out.Add(kSrqMax, labels, srq.max_wr);
    out.Add(kSrqLimit, labels, srq.limit);
    out.Add(kSrqLimitReached, labels, static_cast<double>(srq.limit_events));
  }
  out.Add(kOmitted, {}, static_cast<double>(omitted));
  for (const VerbsProcess& proc : snapshot.processes) {
    const std::string pid = std::to_string(proc.pid);
    for (const auto& [device, wrs] : proc.rc_send_wrs) {
      const std::vector<Label> labels{{"device", device}, {"pid", pid}, {"comm", proc.comm}};
      out.Add(kMinSendWrs, labels, wrs.min);
      out.Add(kMaxSendWrs, labels, wrs.max);
      out.Add(kTotalSendWrs, labels, static_cast<double>(wrs.total));
    }
    for (size_t type = 0; type < proc.async_events.size(); ++type) {
      const std::string name = AsyncEventName(type);
      const bool always =
          std::find(kErrorEvents.begin(), kErrorEvents.end(), name) != kErrorEvents.end();
      if (proc.async_events[type] == 0 && !always) continue;
      out.Add(kAsyncEvents,
              {{"pid", std::to_string(proc.pid)}, {"comm", proc.comm}, {"event", name}},
              static_cast<double>(proc.async_events[type]));
    }
  }
  if (!snapshot.globals_known) return;  // unread: no series rather than 0s
  out.Add(kLost, {{"reason", "calls"}}, static_cast<double>(snapshot.lost_calls));
  out.Add(kLost, {{"reason", "objects"}}, static_cast<double>(snapshot.lost_objects));
  out.Add(kLost, {{"reason", "processes"}}, static_cast<double>(snapshot.lost_processes));
}

VerbsCollector::VerbsCollector(const VerbsOptions& options, std::filesystem::path procfs)
    : max_queue_series_(options.max_queue_series), replay_(ReplayingCapture()) {
  if (replay_) {
    // No probe: the capture's reading answers. The attach result as sample 1 recorded it,
    // for doctor's probe errors.
    try {
      const VerbsProbeReading first = ReplayedReading();
      if (!first.attached) attach_error_ = first.error;
    } catch (const std::exception& error) {
      log::Warn("verbs: the capture's probe reading is refused", {{"err", error.what()}});
    }
    return;
  }
  auto probe = [&options, &procfs] {
    // What attaching reads is not the host's answer a replay needs (probe_capture.h).
    const capture::UnrecordedScope unrecorded;
    return VerbsProbe::Attach(options.probe, std::move(procfs));
  }();
  if (probe) {
    probe_ = std::move(*probe);
  } else {
    attach_error_ = probe.error();
    log::Warn("verbs probes not attached; CQ/SRQ sizing and async event metrics are absent",
              {{"err", attach_error_}});
    RecordNotRecorded("verbs: eBPF probes", "not attached: " + attach_error_);
  }
}

VerbsProbeReading VerbsCollector::LiveReading() const {
  VerbsProbeReading reading{.attached = probe_ != nullptr, .error = attach_error_};
  if (probe_) {
    // The probes' own reads are inputs of the reading, which is recorded whole.
    const capture::UnrecordedScope unrecorded;
    reading.links = probe_->link_count();
    reading.snapshot = probe_->Snapshot();
  }
  if (RecordingCapture()) RecordProbeFile(kVerbsCaptureFile, VerbsReadingToJson(reading));
  return reading;
}

VerbsProbeReading VerbsCollector::ReplayedReading() {
  const auto text = ReplayProbeFile(kVerbsCaptureFile);
  if (!text) throw std::runtime_error("capture's eBPF snapshot refused: " + text.error());
  auto reading = VerbsReadingFromJson(*text);
  if (!reading) {
    throw std::runtime_error("capture's eBPF snapshot refused: " + std::string(kVerbsCaptureFile) +
                             ": " + reading.error());
  }
  return std::move(*reading);
}

CollectResult MapVerbsReading(const VerbsProbeReading& reading, size_t max_queue_series,
                              MetricSet& out) {
  out.Add(kProbeAttached, {{"probe", "verbs"}}, reading.attached ? 1 : 0);
  if (!reading.attached) {
    return {.no_data = true, .detail = "eBPF probes not attached: " + reading.error};
  }
  out.Add(kProbeLinks, {{"probe", "verbs"}}, static_cast<double>(reading.links));
  const VerbsSnapshot& snapshot = reading.snapshot;
  MapVerbsSnapshot(snapshot, max_queue_series, out);
  return {.detail = std::to_string(snapshot.processes.size()) + " processes, " +
                    std::to_string(snapshot.cqs.size()) + " CQs, " +
                    std::to_string(snapshot.srqs.size()) + " SRQs"};
}

CollectResult VerbsCollector::Collect(MetricSet& out) const {
  return MapVerbsReading(replay_ ? ReplayedReading() : LiveReading(), max_queue_series_, out);
}

std::vector<VerbsQp> VerbsCollector::Qps(uint32_t pid) const {
  std::vector<VerbsQp> qps;
  if (!probe_) return qps;
  VerbsSnapshot snapshot = probe_->Snapshot();
  if (!snapshot.walk_error.empty()) {
    log::Warn("verbs probes: QP depths left out", {{"err", snapshot.walk_error}});
    return qps;
  }
  for (VerbsQp& qp : snapshot.qps) {
    if (qp.pid == pid) qps.push_back(std::move(qp));
  }
  return qps;
}

}  // namespace rdmascope
