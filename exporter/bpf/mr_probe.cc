#include "bpf/mr_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <set>

#include "bpf/uprobe_attach.h"
#include "core/log.h"
#include "mr.h"

// bpftool's generated skeleton is C; keep its casts out of our warning set.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#include "mr.skel.h"
#pragma GCC diagnostic pop

namespace rdmascope {
namespace {

// The skeleton's programs, addressed by member so that the table below says which pair of
// programs each entry point gets.
using Programs = decltype(mr_bpf::progs);
using Program = bpf_program* Programs::*;

struct EntryPoint {
  const char* name;
  Program on_entry;
  Program on_return;  // nullptr: nothing to learn on return
};

// Every registration entry point of libibverbs (all versions of each name are attached;
// names a library lacks, like ibv_reg_mr_ex before rdma-core 5x, are skipped).
// ibv_import_mr and ibv_reg_mr_ex return an ibv_mr like a registration; their access flags
// are not read. ibv_unimport_mr returns void.
// clang-format off
constexpr EntryPoint kEntryPoints[] = {
    {"ibv_reg_mr",        &Programs::reg_mr_entry,        &Programs::reg_mr_return},
    {"ibv_reg_mr_iova",   &Programs::reg_mr_iova_entry,   &Programs::reg_mr_return},
    {"ibv_reg_mr_iova2",  &Programs::reg_mr_iova_entry,   &Programs::reg_mr_return},
    {"ibv_reg_dmabuf_mr", &Programs::reg_dmabuf_mr_entry, &Programs::reg_mr_return},
    {"ibv_reg_mr_ex",     &Programs::import_mr_entry,     &Programs::reg_mr_return},
    {"ibv_import_mr",     &Programs::import_mr_entry,     &Programs::reg_mr_return},
    {"ibv_dereg_mr",      &Programs::dereg_mr_entry,      &Programs::dereg_mr_return},
    {"ibv_rereg_mr",      &Programs::rereg_mr_entry,      &Programs::rereg_mr_return},
    {"ibv_unimport_mr",   &Programs::unimport_mr_entry,   nullptr},
};
// clang-format on

std::string Errno(int err) { return ErrnoText(err); }

}  // namespace

void MrProcess::AddCounters(const MrProcess& other) {
  registrations += other.registrations;
  deregistrations += other.deregistrations;
  failures += other.failures;
  lost_regions += other.lost_regions;
  not_huge_aligned_bytes += other.not_huge_aligned_bytes;
  length_not_page_multiple += other.length_not_page_multiple;
}

void MrProcess::AddAll(const MrProcess& other) {
  AddCounters(other);
  outstanding_regions += other.outstanding_regions;
  outstanding_bytes += other.outstanding_bytes;
  access_seen |= other.access_seen;
  leak_suspect_regions += other.leak_suspect_regions;
  leak_suspect_bytes += other.leak_suspect_bytes;
}

void MrHistograms::Add(const MrHistograms& other) {
  latency.resize(std::max(latency.size(), other.latency.size()));
  size.resize(std::max(size.size(), other.size.size()));
  for (size_t i = 0; i < other.latency.size(); ++i) latency[i] += other.latency[i];
  for (size_t i = 0; i < other.size.size(); ++i) size[i] += other.size[i];
  latency_sum_ns += other.latency_sum_ns;
  size_sum_bytes += other.size_sum_bytes;
}

namespace {
MrHistograms HistogramsOf(const mr_proc& proc) {
  MrHistograms h;
  h.latency.assign(std::begin(proc.latency), std::end(proc.latency));
  h.size.assign(std::begin(proc.size), std::end(proc.size));
  h.latency_sum_ns = proc.latency_sum_ns;
  h.size_sum_bytes = proc.size_sum_bytes;
  return h;
}

std::string CommOf(const mr_proc& proc) {
  std::string comm(proc.comm, strnlen(proc.comm, sizeof proc.comm));
  return comm.empty() ? "unknown" : comm;
}

MrProcess ProcessOf(uint32_t pid, const mr_proc& proc) {
  return {
      .pid = pid,
      .comm = std::string(proc.comm, strnlen(proc.comm, sizeof proc.comm)),
      .registrations = proc.registrations,
      .deregistrations = proc.deregistrations,
      .failures = proc.failures,
      .lost_regions = proc.lost_regions,
      .outstanding_regions = proc.outstanding_regions,
      .outstanding_bytes = proc.outstanding_bytes,
      .access_seen = proc.access_seen,
      .not_huge_aligned_bytes = proc.not_huge_aligned_bytes,
      .length_not_page_multiple = proc.length_not_page_multiple,
  };
}
}  // namespace

std::optional<uint64_t> ParseDurationNs(std::string_view text) {
  // Units as Prometheus accepts them, longest first so that "ms" is not read as "m".
  static constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"ms", 1000000ULL},         {"s", 1000000000ULL},     {"m", 60000000000ULL},
      {"h", 3600000000000ULL},    {"d", 86400000000000ULL}, {"w", 604800000000000ULL},
      {"y", 31536000000000000ULL}};
  if (text.empty()) return std::nullopt;
  uint64_t total = 0;
  while (!text.empty()) {
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0 || digits > 12) return std::nullopt;
    uint64_t number = 0;
    for (size_t i = 0; i < digits; ++i) number = number * 10 + static_cast<uint64_t>(text[i] - '0');
    text.remove_prefix(digits);
    bool matched = false;
    for (const auto& [unit, ns] : kUnits) {
      if (text.starts_with(unit)) {
        if (number > UINT64_MAX / ns || total > UINT64_MAX - number * ns) return std::nullopt;
        total += number * ns;
        text.remove_prefix(unit.size());
        matched = true;
        break;
      }
    }
    if (!matched) return std::nullopt;
  }
  return total;
}

std::expected<std::unique_ptr<MrProbe>, std::string> MrProbe::Attach(const MrProbeOptions& options,
                                                                     std::filesystem::path procfs) {
  RouteLibbpfLogs();
  std::unique_ptr<MrProbe> probe(new MrProbe());
  probe->procfs_ = std::move(procfs);
  probe->leak_age_ns_ = options.leak_age_ns;
  probe->skel_ = mr_bpf__open();
  if (probe->skel_ == nullptr)
    return std::unexpected("cannot open the BPF object: " + Errno(errno));
  bpf_map__set_max_entries(probe->skel_->maps.regions, options.max_regions);
  bpf_map__set_max_entries(probe->skel_->maps.procs, options.max_processes);
  if (const int err = mr_bpf__load(probe->skel_); err != 0) {
    return std::unexpected(
        "cannot load the BPF programs (root, BTF at "
        "/sys/kernel/btf/vmlinux and a kernel with uprobes are needed): " +
        Errno(err));
  }

  const std::vector<std::string> targets = UprobeTargets(options.libraries, options.binaries);
  if (targets.empty()) return std::unexpected("no libibverbs to attach to");
  Programs& programs = probe->skel_->progs;
  std::vector<UprobeEntryPoint> table;
  for (const EntryPoint& entry : kEntryPoints) {
    table.push_back({entry.name, programs.*entry.on_entry,
                     entry.on_return ? programs.*entry.on_return : nullptr});
  }
  for (const std::string& target : targets) {
    // Every version: the per-thread depth counts a registration once through the wrappers.
    const auto attached =
        AttachUprobes(target, table, /*default_versions_only=*/false, probe->links_);
    if (!attached) return std::unexpected(attached.error());
    log::Info("mr probes attached",
              {{"target", target},
               {"entry_points", std::to_string(attached->entry_points)},
               {"forwarders_skipped", std::to_string(attached->forwarders_skipped)}});
  }

  bpf_link* exit_link = bpf_program__attach(probe->skel_->progs.handle_exit);
  if (exit_link == nullptr) {
    return std::unexpected("cannot attach sched_process_exit: " + Errno(errno));
  }
  probe->links_.push_back(exit_link);
  probe->exits_ = ring_buffer__new(bpf_map__fd(probe->skel_->maps.exits), &MrProbe::OnExit,
                                   probe.get(), nullptr);
  if (probe->exits_ == nullptr) return std::unexpected("cannot open the exit ring buffer");
  return probe;
}

MrProbe::~MrProbe() {
  if (exits_ != nullptr) ring_buffer__free(exits_);
  for (bpf_link* link : links_) bpf_link__destroy(link);
  if (skel_ != nullptr) mr_bpf__destroy(skel_);
}

int MrProbe::OnExit(void* context, void* data, size_t size) {
  if (size < sizeof(mr_exit_event)) return 0;
  mr_exit_event event;
  std::memcpy(&event, data, sizeof event);
  static_cast<MrProbe*>(context)->pending_exits_.push_back(
      {event.tgid, event.start_ns,
       std::string(event.comm, strnlen(event.comm, sizeof event.comm))});
  return 0;
}

void MrProbe::DropProcesses(const std::vector<Exited>& exited) {
  const int procs_fd = bpf_map__fd(skel_->maps.procs);
  const int regions_fd = bpf_map__fd(skel_->maps.regions);
  // (tgid, start) -> comm, for the processes that still held regions.
  std::map<std::pair<uint32_t, uint64_t>, std::string> holders;
  for (const auto& [tgid, start_ns, exit_comm] : exited) {
    mr_proc proc{};
    if (bpf_map_lookup_elem(procs_fd, &tgid, &proc) != 0 || proc.start_ns != start_ns) {
      // The pid was reused before we got here and the probe already reset the entry for the
      // new process: still release the old process's regions, under the comm it exited with.
      holders.try_emplace({tgid, start_ns}, exit_comm.empty() ? "unknown" : exit_comm);
      continue;
    }
    bpf_map_delete_elem(procs_fd, &tgid);
    // Histograms by comm stay monotonic: an exited process's counts move to the retired set.
    std::string comm = CommOf(proc);
    if (retired_histograms_.contains(comm) || retired_histograms_.size() < kMaxReleasedComms) {
      retired_histograms_[comm].Add(HistogramsOf(proc));
      MrProcess& retired = retired_counters_[comm];
      retired.comm = comm;
      retired.AddCounters(ProcessOf(tgid, proc));
    }
    if (proc.outstanding_regions > 0) holders[{tgid, start_ns}] = comm;
  }
  if (holders.empty()) return;

  std::vector<mr_region_key> doomed;
  std::map<std::string, MrReleasedAtExit> released;
  mr_region_key key{};
  mr_region_key next{};
  const void* previous = nullptr;
  while (bpf_map_get_next_key(regions_fd, previous, &next) == 0) {
    key = next;
    previous = &key;
    mr_region region{};
    if (bpf_map_lookup_elem(regions_fd, &key, &region) != 0) continue;
    const auto holder = holders.find({key.tgid, region.proc_start_ns});
    if (holder == holders.end()) continue;
    doomed.push_back(key);
    released[holder->second].regions += 1;
    released[holder->second].bytes += region.length;
  }
  for (const mr_region_key& k : doomed) bpf_map_delete_elem(regions_fd, &k);
  for (const auto& [holder_comm, counts] : released) {
    std::string comm = holder_comm;
    if (!released_.contains(comm) && released_.size() >= kMaxReleasedComms) comm = "other";
    released_[comm].regions += counts.regions;
    released_[comm].bytes += counts.bytes;
  }
}

void MrProbe::CountLeakSuspects(std::vector<MrProcess>& processes,
                                const std::map<uint32_t, uint64_t>& start_by_pid) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // bpf_ktime_get_ns() is CLOCK_MONOTONIC
  const uint64_t now_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000ULL + static_cast<uint64_t>(now.tv_nsec);
  if (now_ns < leak_age_ns_) return;
  const uint64_t threshold = now_ns - leak_age_ns_;
  std::map<uint32_t, MrProcess*> by_pid;
  for (MrProcess& proc : processes) by_pid[proc.pid] = &proc;

  ForEachRegion([&](const mr_region_key& key, const mr_region& region) {
    if (region.registered_ns > threshold) return;
    const auto proc = by_pid.find(key.tgid);
    const auto start = start_by_pid.find(key.tgid);
    if (proc == by_pid.end() || start == start_by_pid.end() ||
        start->second != region.proc_start_ns) {
      return;
    }
    proc->second->leak_suspect_regions += 1;
    proc->second->leak_suspect_bytes += region.length;
  });
}

template <typename Visitor>
void MrProbe::ForEachRegion(Visitor visit) {
  // Batched reads: a few syscalls for 100,000 regions instead of two per region.
  constexpr uint32_t kBatch = 4096;
  std::vector<mr_region_key> keys(kBatch);
  std::vector<mr_region> values(kBatch);
  const int fd = bpf_map__fd(skel_->maps.regions);
  alignas(8) unsigned char token[8] = {};
  bool first = true;
  for (;;) {
    uint32_t count = kBatch;
    const int err = bpf_map_lookup_batch(fd, first ? nullptr : token, token, keys.data(),
                                         values.data(), &count, nullptr);
    first = false;
    if (err != 0 && errno != ENOENT) {
      log::Debug("regions batch read failed", {{"err", Errno(errno)}});
      return;
    }
    for (uint32_t i = 0; i < count; ++i) visit(keys[i], values[i]);
    if (err != 0) return;  // ENOENT: that was the last batch
  }
}

std::vector<MrProcessStacks> MrProbe::OutstandingStacks(size_t top, std::optional<uint32_t> pid) {
  std::lock_guard lock(mutex_);
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t now_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000ULL + static_cast<uint64_t>(now.tv_nsec);
  // Live processes and their start times.
  std::map<uint32_t, MrProcessStacks> processes;
  std::map<uint32_t, uint64_t> start_by_pid;
  const int procs_fd = bpf_map__fd(skel_->maps.procs);
  uint32_t key = 0;
  uint32_t next = 0;
  const void* previous = nullptr;
  while (bpf_map_get_next_key(procs_fd, previous, &next) == 0) {
    key = next;
    previous = &key;
    mr_proc proc{};
    if ((pid && key != *pid) || bpf_map_lookup_elem(procs_fd, &key, &proc) != 0) continue;
    processes[key] = {.pid = key, .comm = CommOf(proc)};
    start_by_pid[key] = proc.start_ns;
  }
  std::map<std::pair<uint32_t, int32_t>, MrStack> by_site;
  ForEachRegion([&](const mr_region_key& region_key, const mr_region& region) {
    const auto start = start_by_pid.find(region_key.tgid);
    if (start == start_by_pid.end() || start->second != region.proc_start_ns) return;
    MrStack& site = by_site[{region_key.tgid, region.stack_id}];
    site.stack_id = region.stack_id;
    site.regions += 1;
    site.bytes += region.length;
    if (now_ns > region.registered_ns) {
      site.oldest_age_ns = std::max<uint64_t>(site.oldest_age_ns, now_ns - region.registered_ns);
    }
    MrProcessStacks& proc = processes[region_key.tgid];
    proc.outstanding_regions += 1;
    proc.outstanding_bytes += region.length;
  });
  for (auto& [site_key, site] : by_site) processes[site_key.first].stacks.push_back(site);

  const int stacks_fd = bpf_map__fd(skel_->maps.stacks);
  std::vector<MrProcessStacks> out;
  for (auto& [tgid, proc] : processes) {
    if (proc.outstanding_regions == 0) continue;
    std::sort(proc.stacks.begin(), proc.stacks.end(),
              [](const MrStack& a, const MrStack& b) { return a.bytes > b.bytes; });
    if (proc.stacks.size() > top) proc.stacks.resize(top);
    for (MrStack& site : proc.stacks) {
      uint64_t ips[MR_MAX_STACK_DEPTH] = {};
      if (site.stack_id < 0 || bpf_map_lookup_elem(stacks_fd, &site.stack_id, ips) != 0) continue;
      for (const uint64_t ip : ips) {
        if (ip == 0) break;
        site.addresses.push_back(ip);
      }
    }
    out.push_back(std::move(proc));
  }
  std::sort(out.begin(), out.end(), [](const MrProcessStacks& a, const MrProcessStacks& b) {
    return a.outstanding_bytes > b.outstanding_bytes;
  });
  return out;
}

MrSnapshot MrProbe::Snapshot() {
  std::lock_guard lock(mutex_);
  pending_exits_.clear();
  ring_buffer__consume(exits_);

  const int procs_fd = bpf_map__fd(skel_->maps.procs);
  MrSnapshot snapshot;
  std::map<std::string, MrHistograms> live_histograms;
  std::map<uint32_t, uint64_t> start_by_pid;
  uint32_t key = 0;
  uint32_t next = 0;
  const void* previous = nullptr;
  while (bpf_map_get_next_key(procs_fd, previous, &next) == 0) {
    key = next;
    previous = &key;
    mr_proc proc{};
    if (bpf_map_lookup_elem(procs_fd, &key, &proc) != 0) continue;
    // Safety net for a lost exit event: a process that no longer exists is dropped.
    std::error_code ec;
    // This very process exited (its event is pending): drop it below, do not report it.
    const bool exit_seen =
        std::any_of(pending_exits_.begin(), pending_exits_.end(),
                    [&](const Exited& e) { return e.tgid == key && e.start_ns == proc.start_ns; });
    if (exit_seen) continue;
    if (!std::filesystem::exists(procfs_ / std::to_string(key), ec)) {
      pending_exits_.push_back({key, proc.start_ns, ""});
      continue;
    }
    snapshot.processes.push_back(ProcessOf(key, proc));
    live_histograms[CommOf(proc)].Add(HistogramsOf(proc));
    start_by_pid[key] = proc.start_ns;
  }
  DropProcesses(pending_exits_);
  if (leak_age_ns_ > 0 && !snapshot.processes.empty()) {
    CountLeakSuspects(snapshot.processes, start_by_pid);
  }
  std::sort(snapshot.processes.begin(), snapshot.processes.end(),
            [](const MrProcess& a, const MrProcess& b) { return a.pid < b.pid; });

  mr_globals globals{};
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.globals), &zero, &globals) == 0) {
    snapshot.lost_calls = globals.lost_calls;
    snapshot.lost_processes = globals.lost_procs;
    snapshot.lost_exits = globals.lost_exits;
  }
  snapshot.released = released_;
  snapshot.histograms = retired_histograms_;
  snapshot.retired_counters = retired_counters_;
  for (const auto& [comm, histograms] : live_histograms) snapshot.histograms[comm].Add(histograms);
  return snapshot;
}

}  // namespace rdmascope
