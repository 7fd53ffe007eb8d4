#include "bpf/verbs_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <set>
#include <tuple>

#include "bpf/process_liveness.h"
#include "bpf/uprobe_attach.h"
#include "core/log.h"
#include "core/process_metrics.h"
#include "core/sysfs.h"
#include "verbs.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#include "verbs.skel.h"
#pragma GCC diagnostic pop

namespace rdmascope {

// The probe reads libibverbs' structs from application memory at these offsets: check them
// against the header this exporter is built with, so that a layout change breaks the build.
static_assert(offsetof(ibv_context, device) == VERBS_CONTEXT_DEVICE);
static_assert(offsetof(ibv_device, name) == VERBS_DEVICE_NAME);
static_assert(sizeof(ibv_device::name) == VERBS_DEVICE_NAME_LEN);
static_assert(offsetof(ibv_cq, context) == VERBS_CQ_CONTEXT);
static_assert(offsetof(ibv_cq, handle) == VERBS_CQ_HANDLE);
static_assert(offsetof(ibv_cq, cqe) == VERBS_CQ_CQE);
static_assert(offsetof(ibv_qp, context) == VERBS_QP_CONTEXT);
static_assert(offsetof(ibv_qp, handle) == VERBS_QP_HANDLE);
static_assert(offsetof(ibv_qp, qp_num) == VERBS_QP_NUM);
static_assert(offsetof(ibv_qp_init_attr, send_cq) == VERBS_QP_INIT_SEND_CQ);
static_assert(offsetof(ibv_qp_init_attr, recv_cq) == VERBS_QP_INIT_RECV_CQ);
static_assert(offsetof(ibv_qp_init_attr, srq) == VERBS_QP_INIT_SRQ);
static_assert(offsetof(ibv_qp_init_attr, cap) + offsetof(ibv_qp_cap, max_send_wr) ==
              VERBS_QP_INIT_MAX_SEND_WR);
static_assert(offsetof(ibv_qp_init_attr, cap) + offsetof(ibv_qp_cap, max_recv_wr) ==
              VERBS_QP_INIT_MAX_RECV_WR);
static_assert(offsetof(ibv_qp_init_attr, cap) + offsetof(ibv_qp_cap, max_send_sge) ==
              VERBS_QP_INIT_MAX_SEND_SGE);
static_assert(offsetof(ibv_qp_init_attr, cap) + offsetof(ibv_qp_cap, max_recv_sge) ==
              VERBS_QP_INIT_MAX_RECV_SGE);
static_assert(offsetof(ibv_qp_init_attr, qp_type) == VERBS_QP_INIT_QP_TYPE);
static_assert(offsetof(ibv_qp_attr, qp_state) == VERBS_QP_ATTR_STATE);
static_assert(offsetof(ibv_srq, context) == VERBS_SRQ_CONTEXT);
static_assert(offsetof(ibv_srq, handle) == VERBS_SRQ_HANDLE);
static_assert(offsetof(ibv_srq_init_attr, attr) + offsetof(ibv_srq_attr, max_wr) ==
              VERBS_SRQ_INIT_MAX_WR);
static_assert(offsetof(ibv_srq_attr, max_wr) == VERBS_SRQ_ATTR_MAX_WR);
static_assert(offsetof(ibv_srq_attr, srq_limit) == VERBS_SRQ_ATTR_LIMIT);
static_assert(offsetof(ibv_async_event, element) == VERBS_ASYNC_EVENT_ELEMENT);
static_assert(offsetof(ibv_async_event, event_type) == VERBS_ASYNC_EVENT_TYPE);
static_assert(IBV_QP_STATE == VERBS_QP_STATE_MASK);
static_assert(IBV_SRQ_MAX_WR == VERBS_SRQ_MAX_WR_MASK && IBV_SRQ_LIMIT == VERBS_SRQ_LIMIT_MASK);
static_assert(IBV_EVENT_SRQ_LIMIT_REACHED == VERBS_EVENT_SRQ_LIMIT_REACHED);
static_assert(kVerbsAsyncEventTypes == VERBS_ASYNC_EVENT_TYPES);

namespace {

// Keys as the kernel stores them (padding zeroed): byte order is a valid order.
template <typename Key>
struct KeyBytesLess {
  bool operator()(const Key& a, const Key& b) const { return std::memcmp(&a, &b, sizeof a) < 0; }
};

// Calls visit(key, value) once for every entry of a hash map; deletes the entries it returns
// true for, and adds the number of entries it met to `visited`. bpf_map_get_next_key() restarts
// from the first key when the current one was deleted meanwhile (the probes delete on destroy):
// entries seen already are skipped, so that nothing is counted twice. Returns 0 when the walk saw
// the whole map, else the errno that cut it short (get_next_key failing otherwise than ENOENT, the
// end) or made it skip an entry (lookup failing otherwise than ENOENT, an entry deleted meanwhile):
// its figures are partial.
template <typename Key, typename Value, typename Visitor>
int ForEach(int fd, size_t& visited, Visitor visit) {
  std::vector<Key> doomed;
  std::set<Key, KeyBytesLess<Key>> seen;
  Key key{};
  Key next{};
  const void* previous = nullptr;
  int walk_errno = 0;
  for (;;) {
    if (bpf_map_get_next_key(fd, previous, &next) != 0) {
      if (errno != ENOENT) walk_errno = errno;
      break;
    }
    key = next;
    previous = &key;
    if (!seen.insert(key).second) continue;
    ++visited;
    Value value{};
    if (bpf_map_lookup_elem(fd, &key, &value) != 0) {
      if (errno != ENOENT && walk_errno == 0) walk_errno = errno;
      continue;
    }
    if (visit(key, value)) doomed.push_back(key);
  }
  // The entries judged are judged rightly even when the walk stopped early (each on its own
  // entry, or on an owner positively gone): deleted all the same.
  for (const Key& k : doomed) bpf_map_delete_elem(fd, &k);
  return walk_errno;
}

}  // namespace

std::map<uint64_t, CqFeeding> ComputeCqFeeding(const std::vector<VerbsQpLinks>& qps,
                                               const std::map<uint64_t, uint32_t>& srq_max_wr) {
  std::map<uint64_t, CqFeeding> feeding;
  std::set<std::pair<uint64_t, uint64_t>> srq_counted;  // (recv cq, srq)
  for (const VerbsQpLinks& qp : qps) {
    if (qp.send_cq != 0) {
      feeding[qp.send_cq].wrs += qp.max_send_wr;
      feeding[qp.send_cq].qps += 1;
    }
    if (qp.recv_cq == 0) continue;
    if (qp.recv_cq != qp.send_cq) feeding[qp.recv_cq].qps += 1;
    if (qp.srq == 0) {
      feeding[qp.recv_cq].wrs += qp.max_recv_wr;
    } else if (srq_counted.insert({qp.recv_cq, qp.srq}).second) {
      const auto srq = srq_max_wr.find(qp.srq);
      if (srq != srq_max_wr.end()) feeding[qp.recv_cq].wrs += srq->second;
    }
  }
  return feeding;
}

std::map<std::string, RcSendWrsRange> RcSendWrs(const std::vector<VerbsQpLinks>& qps,
                                                const std::map<uint64_t, std::string>& cq_devices) {
  std::map<std::string, RcSendWrsRange> range;
  for (const VerbsQpLinks& qp : qps) {
    if (qp.type != IBV_QPT_RC || qp.max_send_wr == 0) continue;
    const auto device = cq_devices.find(qp.send_cq);
    if (device == cq_devices.end()) continue;
    const auto [it, inserted] =
        range.try_emplace(device->second, RcSendWrsRange{qp.max_send_wr, qp.max_send_wr, 0});
    if (!inserted) {
      it->second.min = std::min(it->second.min, qp.max_send_wr);
      it->second.max = std::max(it->second.max, qp.max_send_wr);
    }
    it->second.total += qp.max_send_wr;
  }
  return range;
}

std::expected<std::unique_ptr<VerbsProbe>, std::string> VerbsProbe::Attach(
    const VerbsProbeOptions& options, std::filesystem::path procfs) {
  RouteLibbpfLogs();
  std::unique_ptr<VerbsProbe> probe(new VerbsProbe());
  probe->procfs_ = std::move(procfs);
  probe->ns_per_tick_ = sys::NsPerClockTick();
  probe->skel_ = verbs_bpf__open();
  if (probe->skel_ == nullptr) {
    return std::unexpected("cannot open the BPF object: " + ErrnoText(errno));
  }
  bpf_map__set_max_entries(probe->skel_->maps.cqs, options.max_queues);
  bpf_map__set_max_entries(probe->skel_->maps.qps, options.max_queues);
  bpf_map__set_max_entries(probe->skel_->maps.srqs, std::max<uint32_t>(options.max_queues / 4, 1));
  bpf_map__set_max_entries(probe->skel_->maps.procs, options.max_processes);
  if (const int err = verbs_bpf__load(probe->skel_); err != 0) {
    return std::unexpected(
        "cannot load the BPF programs (root, BTF at /sys/kernel/btf/vmlinux and a kernel with "
        "uprobes are needed): " +
        ErrnoText(err));
  }
  auto& p = probe->skel_->progs;
  const UprobeEntryPoint table[] = {
      {"ibv_create_cq", p.create_cq_entry, p.create_cq_return},
      {"ibv_resize_cq", p.resize_cq_entry, p.resize_cq_return},
      {"ibv_destroy_cq", p.destroy_cq_entry, p.destroy_cq_return},
      {"ibv_create_qp", p.create_qp_entry, p.create_qp_return},
      {"ibv_modify_qp", p.modify_qp_entry, p.modify_qp_return},
      {"ibv_destroy_qp", p.destroy_qp_entry, p.destroy_qp_return},
      {"ibv_create_srq", p.create_srq_entry, p.create_srq_return},
      {"ibv_modify_srq", p.modify_srq_entry, p.modify_srq_return},
      {"ibv_destroy_srq", p.destroy_srq_entry, p.destroy_srq_return},
      {"ibv_get_async_event", p.get_async_event_entry, p.get_async_event_return},
  };
  const std::vector<std::string> targets = UprobeTargets(options.libraries, options.binaries);
  if (targets.empty()) return std::unexpected("no libibverbs to attach to");
  for (const std::string& target : targets) {
    // Current versions only: the IBVERBS_1.0 wrappers hand out their own structs and call
    // the 1.1 functions with the real objects, which is what the probes key on.
    const auto attached =
        AttachUprobes(target, table, /*default_versions_only=*/true, probe->links_);
    if (!attached) return std::unexpected(attached.error());
    log::Info("verbs probes attached",
              {{"target", target}, {"entry_points", std::to_string(attached->entry_points)}});
  }
  bpf_link* exit_link = bpf_program__attach(p.verbs_exit);
  if (exit_link == nullptr) {
    return std::unexpected("cannot attach sched_process_exit: " + ErrnoText(errno));
  }
  probe->links_.push_back(exit_link);
  bpf_link* exec_link = bpf_program__attach(p.verbs_exec);
  if (exec_link == nullptr) {
    return std::unexpected("cannot attach sched_process_exec: " + ErrnoText(errno));
  }
  probe->links_.push_back(exec_link);
  return probe;
}

VerbsProbe::~VerbsProbe() {
  for (bpf_link* link : links_) bpf_link__destroy(link);
  if (skel_ != nullptr) verbs_bpf__destroy(skel_);
}

VerbsSnapshot VerbsProbe::Snapshot() {
  std::lock_guard lock(mutex_);
  VerbsSnapshot snapshot;
  // The globals first: their insert count, read before the walk, is never ahead of the maps.
  verbs_globals globals{};
  const uint32_t zero = 0;
  const bool globals_known =
      bpf_map_lookup_elem(bpf_map__fd(skel_->maps.globals), &zero, &globals) == 0;
  if (globals_known) {
    snapshot.lost_calls = globals.lost_calls;
    snapshot.lost_objects = globals.lost_objects;
    snapshot.lost_processes = globals.lost_procs;
  } else {
    snapshot.globals_known = false;
    log::Warn("cannot read the verbs probes' globals map: rdma_verbs_lost_total left out",
              {{"err", std::strerror(errno)}});
  }
  const uint64_t inserts = globals.inserts;
  // Only the probes add entries: maps found empty, with nothing inserted since, are empty.
  if (globals_known && walked_empty_ && inserts == inserts_at_walk_) return snapshot;
  walked_empty_ = false;  // until this walk has seen all four maps whole
  size_t visited = 0;     // entries of the four maps this walk met
  // Owners not known to be gone: (pid, exec generation, start). Owners positively gone (no
  // such pid, or the pid reused) are deleted with their objects; an owner whose /proc entry
  // could not be read this time is kept and reported, and asked again at the next scrape.
  // The owner of an image that exec'd was deleted by the probe (verbs_exec).
  std::set<std::tuple<uint32_t, uint32_t, uint64_t>> live;
  std::map<uint32_t, VerbsProcess> processes;
  const int procs_fd = bpf_map__fd(skel_->maps.procs);
  // A walk cut short leaves the snapshot partial: it says so (walk_error) and the collector
  // serves none of it rather than counts that look complete; the next scrape walks again.
  const auto failed = [](const char* map, int err) {
    VerbsSnapshot partial;
    partial.walk_error =
        std::string("cannot walk the verbs probes' ") + map + " map: " + std::strerror(err);
    return partial;
  };
  const int procs_err = ForEach<verbs_proc_key, verbs_proc>(
      procs_fd, visited, [&](const verbs_proc_key& key, const verbs_proc& proc) {
        const uint32_t pid = key.tgid;
        const Liveness liveness = ProcessLiveness(procfs_, pid, proc.proc_start, ns_per_tick_);
        if (liveness == Liveness::kGone) return true;
        if (liveness == Liveness::kUnknown) {
          log::Debug("verbs: cannot tell whether a process still runs; keeping its objects",
                     {{"pid", std::to_string(pid)}});
        }
        live.insert({pid, key.exec_id, proc.proc_start});
        VerbsProcess& out = processes[pid];
        out.pid = pid;
        out.comm = sysfs::FixedString(proc.comm, sizeof proc.comm);
        std::copy(std::begin(proc.async_events), std::end(proc.async_events),
                  out.async_events.begin());
        return false;
      });
  if (procs_err != 0) return failed("process", procs_err);
  const auto owned_by_live = [&](const verbs_key& key, uint64_t proc_start) {
    return live.contains({key.tgid, key.exec_id, proc_start});
  };
  // An object not owned by a live owner is reported by no one; it is deleted only once its
  // owner's entry is gone (deleted above, or by the exec probe): an owner the walk above
  // missed because it registered meanwhile keeps its objects, and so does one whose entry
  // could not be read (an error other than ENOENT says nothing of the owner).
  const auto orphaned = [&](const verbs_key& key, uint64_t proc_start) {
    const verbs_proc_key owner{.tgid = key.tgid, .exec_id = key.exec_id, .proc_start = proc_start};
    verbs_proc proc{};
    return bpf_map_lookup_elem(procs_fd, &owner, &proc) != 0 && errno == ENOENT;
  };

  std::map<std::pair<uint32_t, uint64_t>, verbs_cq> cqs;
  const int cqs_err = ForEach<verbs_key, verbs_cq>(bpf_map__fd(skel_->maps.cqs), visited,
                                                   [&](const verbs_key& key, const verbs_cq& cq) {
                                                     if (!owned_by_live(key, cq.proc_start)) {
                                                       return orphaned(key, cq.proc_start);
                                                     }
                                                     cqs[{key.tgid, key.object}] = cq;
                                                     return false;
                                                   });
  if (cqs_err != 0) return failed("CQ", cqs_err);
  std::map<uint32_t, std::map<uint64_t, uint32_t>> srq_depths;  // pid -> srq -> max_wr
  const int srqs_err = ForEach<verbs_key, verbs_srq>(
      bpf_map__fd(skel_->maps.srqs), visited, [&](const verbs_key& key, const verbs_srq& srq) {
        if (!owned_by_live(key, srq.proc_start)) return orphaned(key, srq.proc_start);
        srq_depths[key.tgid][key.object] = srq.max_wr;
        snapshot.srqs.push_back({.pid = key.tgid,
                                 .comm = processes[key.tgid].comm,
                                 .device = sysfs::FixedString(srq.device, sizeof srq.device),
                                 .handle = srq.handle,
                                 .max_wr = srq.max_wr,
                                 .limit = srq.limit,
                                 .limit_events = srq.limit_events});
        return false;
      });
  if (srqs_err != 0) return failed("SRQ", srqs_err);
  std::map<uint32_t, std::vector<VerbsQpLinks>> qps;
  std::vector<uint64_t> qp_send_cqs;  // of snapshot.qps, in the same order
  const int qps_err = ForEach<verbs_key, verbs_qp>(
      bpf_map__fd(skel_->maps.qps), visited, [&](const verbs_key& key, const verbs_qp& qp) {
        if (!owned_by_live(key, qp.proc_start)) return orphaned(key, qp.proc_start);
        qps[key.tgid].push_back(
            {qp.send_cq, qp.recv_cq, qp.srq, qp.max_send_wr, qp.max_recv_wr, qp.type});
        processes[key.tgid].qps += 1;
        snapshot.qps.push_back({.pid = key.tgid,
                                .qp_num = qp.qp_num,
                                .handle = qp.handle,
                                .type = qp.type,
                                .max_send_wr = qp.max_send_wr,
                                .max_recv_wr = qp.max_recv_wr,
                                .max_send_sge = qp.max_send_sge,
                                .max_recv_sge = qp.max_recv_sge,
                                .srq = qp.srq != 0});
        qp_send_cqs.push_back(qp.send_cq);
        return false;
      });
  if (qps_err != 0) return failed("QP", qps_err);

  std::map<uint32_t, std::map<uint64_t, CqFeeding>> feeding;
  for (const auto& [pid, links] : qps) feeding[pid] = ComputeCqFeeding(links, srq_depths[pid]);
  std::map<uint32_t, std::map<uint64_t, std::string>> cq_devices;  // pid -> cq -> device
  for (const auto& [key, cq] : cqs) {
    cq_devices[key.first][key.second] = sysfs::FixedString(cq.device, sizeof cq.device);
  }
  for (const auto& [pid, links] : qps) {
    processes[pid].rc_send_wrs = RcSendWrs(links, cq_devices[pid]);
  }
  for (const auto& [key, cq] : cqs) {
    const CqFeeding fed = feeding[key.first][key.second];
    snapshot.cqs.push_back({.pid = key.first,
                            .comm = processes[key.first].comm,
                            .device = sysfs::FixedString(cq.device, sizeof cq.device),
                            .handle = cq.handle,
                            .requested_entries = cq.requested_entries,
                            .entries = cq.entries,
                            .feeding_wrs = fed.wrs,
                            .feeding_qps = fed.qps});
  }
  for (size_t i = 0; i < snapshot.qps.size(); ++i) {
    VerbsQp& qp = snapshot.qps[i];
    qp.comm = processes[qp.pid].comm;
    const auto& devices = cq_devices[qp.pid];
    if (const auto it = devices.find(qp_send_cqs[i]); it != devices.end()) qp.device = it->second;
  }
  std::sort(snapshot.qps.begin(), snapshot.qps.end(), [](const VerbsQp& a, const VerbsQp& b) {
    return std::tie(a.pid, a.qp_num, a.handle) < std::tie(b.pid, b.qp_num, b.handle);
  });
  const auto by_pid_handle = [](const auto& a, const auto& b) {
    return std::tie(a.pid, a.device, a.handle) < std::tie(b.pid, b.device, b.handle);
  };
  std::sort(snapshot.cqs.begin(), snapshot.cqs.end(), by_pid_handle);
  std::sort(snapshot.srqs.begin(), snapshot.srqs.end(), by_pid_handle);
  std::set<uint32_t> live_pids;
  for (const auto& owner : live) live_pids.insert(std::get<0>(owner));
  for (auto& [pid, process] : processes) {
    if (live_pids.contains(pid)) snapshot.processes.push_back(std::move(process));
  }

  walked_empty_ = globals_known && visited == 0;
  inserts_at_walk_ = inserts;
  return snapshot;
}

}  // namespace rdmascope
