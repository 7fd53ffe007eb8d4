#include "bpf/mr_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "bpf/mr_image_key.h"
#include "bpf/process_liveness.h"
#include "bpf/uprobe_attach.h"
#include "core/capture.h"
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
// Attached in this order (AttachUprobes keeps it; every return probe before any entry): the
// ends of regions first, so that a region recorded while we attach (a registration cache
// churning) always has its end seen, never left outstanding for ever.
// clang-format off
constexpr EntryPoint kEntryPoints[] = {
    {"ibv_dereg_mr",      &Programs::dereg_mr_entry,      &Programs::dereg_mr_return},
    {"ibv_unimport_mr",   &Programs::unimport_mr_entry,   nullptr},
    {"ibv_rereg_mr",      &Programs::rereg_mr_entry,      &Programs::rereg_mr_return},
    {"ibv_reg_mr",        &Programs::reg_mr_entry,        &Programs::reg_mr_return},
    {"ibv_reg_mr_iova",   &Programs::reg_mr_iova_entry,   &Programs::reg_mr_return},
    {"ibv_reg_mr_iova2",  &Programs::reg_mr_iova_entry,   &Programs::reg_mr_return},
    {"ibv_reg_dmabuf_mr", &Programs::reg_dmabuf_mr_entry, &Programs::reg_mr_return},
    {"ibv_reg_mr_ex",     &Programs::import_mr_entry,     &Programs::reg_mr_return},
    {"ibv_import_mr",     &Programs::import_mr_entry,     &Programs::reg_mr_return},
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
  aligned_huge += other.aligned_huge;
  aligned_page += other.aligned_page;
  unaligned += other.unaligned;
  reregistrations += other.reregistrations;
  reregistered_bytes += other.reregistered_bytes;
  for (size_t bit = 0; bit < access_registrations.size(); ++bit) {
    access_registrations[bit] += other.access_registrations[bit];
  }
}

void MrProcess::AddAll(const MrProcess& other) {
  AddCounters(other);
  outstanding_regions += other.outstanding_regions;
  outstanding_bytes += other.outstanding_bytes;
  outstanding_implicit_odp += other.outstanding_implicit_odp;
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

static_assert(std::tuple_size_v<decltype(MrProcess::access_registrations)> == MR_ACCESS_BITS);

MrProcess ProcessOf(uint32_t pid, const mr_proc& proc) {
  MrProcess out{
      .pid = pid,
      .comm = std::string(proc.comm, strnlen(proc.comm, sizeof proc.comm)),
      .registrations = proc.registrations,
      .deregistrations = proc.deregistrations,
      .failures = proc.failures,
      .lost_regions = proc.lost_regions,
      .outstanding_regions = proc.outstanding_regions,
      .outstanding_bytes = proc.outstanding_bytes,
      .outstanding_implicit_odp = proc.outstanding_implicit_odp,
      .access_seen = proc.access_seen,
      .not_huge_aligned_bytes = proc.not_huge_aligned_bytes,
      .length_not_page_multiple = proc.length_not_page_multiple,
      .aligned_huge = proc.aligned_huge,
      .aligned_page = proc.aligned_page,
      .unaligned = proc.unaligned,
      .reregistrations = proc.reregistrations,
      .reregistered_bytes = proc.reregistered_bytes,
  };
  std::copy(std::begin(proc.access_registrations), std::end(proc.access_registrations),
            out.access_registrations.begin());
  return out;
}
}  // namespace

std::expected<std::unique_ptr<MrProbe>, std::string> MrProbe::Attach(const MrProbeOptions& options,
                                                                     std::filesystem::path procfs) {
  RouteLibbpfLogs();
  std::unique_ptr<MrProbe> probe(new MrProbe());
  probe->procfs_ = std::move(procfs);
  probe->leak_age_ns_ = options.leak_age_ns;
  probe->ns_per_tick_ = sys::NsPerClockTick();
  probe->skel_ = mr_bpf__open();
  if (probe->skel_ == nullptr)
    return std::unexpected("cannot open the BPF object: " + Errno(errno));
  bpf_map__set_max_entries(probe->skel_->maps.regions, options.max_regions);
  bpf_map__set_max_entries(probe->skel_->maps.procs, options.max_processes);
  bpf_map__set_max_entries(probe->skel_->maps.code_ranges, options.max_processes);
  bpf_map__set_max_entries(probe->skel_->maps.stack_samples, options.stack_ring_bytes);
  probe->skel_->rodata->stack_copy_bytes =
      std::min<uint32_t>(options.stack_bytes, MR_STACK_COPY_MAX);
  if (const int err = mr_bpf__load(probe->skel_); err != 0) {
    return std::unexpected(
        "cannot load the BPF programs (root, BTF at "
        "/sys/kernel/btf/vmlinux and a kernel with uprobes are needed): " +
        Errno(err));
  }

  // The ends of processes and images before any registration can be recorded: a process
  // exiting while we attach must never leave its regions behind.
  bpf_link* exit_link = bpf_program__attach(probe->skel_->progs.handle_exit);
  if (exit_link == nullptr) {
    return std::unexpected("cannot attach sched_process_exit: " + Errno(errno));
  }
  probe->links_.push_back(exit_link);
  bpf_link* exec_link = bpf_program__attach(probe->skel_->progs.handle_exec);
  if (exec_link == nullptr) {
    return std::unexpected("cannot attach sched_process_exec: " + Errno(errno));
  }
  probe->links_.push_back(exec_link);

  // fentry/fexit on uverbs and ib_core when the kernel allows it: every program whatever its
  // libibverbs, and no trap. Else (or with --collector.mr.tracking=uprobes) uprobes on the
  // libraries.
  if (const auto kernel = probe->AttachKernelPath(options); !kernel) {
    return std::unexpected(kernel.error());
  }
  const std::vector<std::string> targets = probe->kernel_
                                               ? std::vector<std::string>{}
                                               : UprobeTargets(options.libraries, options.binaries);
  if (targets.empty() && !probe->kernel_) return std::unexpected("no libibverbs to attach to");
  Programs& programs = probe->skel_->progs;
  std::vector<UprobeEntryPoint> table;
  for (const EntryPoint& entry : kEntryPoints) {
    table.push_back({entry.name, programs.*entry.on_entry,
                     entry.on_return ? programs.*entry.on_return : nullptr});
  }
  for (const std::string& target : targets) {
    // Every version: the per-thread call record counts a registration once through the
    // wrappers (only the outermost frame is recorded).
    const auto attached =
        AttachUprobes(target, table, /*default_versions_only=*/false, probe->links_);
    if (!attached) return std::unexpected(attached.error());
    log::Info("mr probes attached",
              {{"target", target},
               {"entry_points", std::to_string(attached->entry_points)},
               {"forwarders_skipped", std::to_string(attached->forwarders_skipped)}});
  }

  probe->exits_ = ring_buffer__new(bpf_map__fd(probe->skel_->maps.exits), &MrProbe::OnExit,
                                   probe.get(), nullptr);
  if (probe->exits_ == nullptr) return std::unexpected("cannot open the exit ring buffer");
  probe->stack_ring_ = ring_buffer__new(bpf_map__fd(probe->skel_->maps.stack_samples),
                                        &MrProbe::OnStackSample, probe.get(), nullptr);
  if (probe->stack_ring_ == nullptr) return std::unexpected("cannot open the stack ring buffer");
  // An image still runs while its entry in the procs map is not marked by its exec (a sample
  // implies the entry: the probes create it before they send one). No entry: its end was
  // handled (exit or exec), so it runs no more.
  const int procs_fd = bpf_map__fd(probe->skel_->maps.procs);
  sys::ImageCurrent current = [procs_fd](const sys::ImageKey& image) {
    const mr_proc_key key = ProcKeyOf(image);
    mr_proc proc{};
    return bpf_map_lookup_elem(procs_fd, &key, &proc) == 0 && proc.exec_ended == 0;
  };
  probe->sites_ =
      std::make_unique<MrStackSites>(MrStackSitesOptions{.max_bytes = options.stack_memory_bytes,
                                                         .sandboxed_worker = options.unwind_sandbox,
                                                         .privileged = options.privileged,
                                                         .image_current = std::move(current)},
                                     probe->procfs_, bpf_map__fd(probe->skel_->maps.code_ranges),
                                     bpf_map__fd(probe->skel_->maps.sites_seen));
  return probe;
}

MrProbe::~MrProbe() {
  stop_poller_ = true;
  if (stack_poller_.joinable()) stack_poller_.join();
  if (exits_ != nullptr) ring_buffer__free(exits_);
  if (stack_ring_ != nullptr) ring_buffer__free(stack_ring_);
  for (bpf_link* link : links_) bpf_link__destroy(link);
  if (skel_ != nullptr) mr_bpf__destroy(skel_);
}

int MrProbe::OnExit(void* context, void* data, size_t size) {
  if (size < sizeof(mr_exit_event)) return 0;
  mr_exit_event event;
  std::memcpy(&event, data, sizeof event);
  static_cast<MrProbe*>(context)->pending_exits_.push_back(
      {.image = ImageKeyOf(event),
       .comm = std::string(event.comm, strnlen(event.comm, sizeof event.comm))});
  return 0;
}

// Started at the first collection, not at attach: serve drops its capabilities before any
// thread starts (docs/security.md), and a thread keeps the set it was created with. It takes
// samples in within ~0.2 s and unwinds them while their process runs, so an image's code
// ranges reach the probes after its first registrations, not a scrape interval later: a
// program registering thousands of regions at start-up then costs one copy per site.
void MrProbe::StartStackPoller() {
  std::call_once(poller_started_, [this] {
    stack_poller_ = std::thread([this] {
      // Under `capture`, what this thread reads (PID/maps, the mapped files) is no answer a
      // replay needs (the snapshot is recorded whole, collectors/probe_capture.h), and would
      // name every file the registering processes map.
      const capture::UnrecordedScope unrecorded;
      // The ring's epoll descriptor and the sites' wake-up (a request waiting for its stacks).
      const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
      for (const int fd : {ring_buffer__epoll_fd(stack_ring_), sites_->wake_fd()}) {
        epoll_event event{.events = EPOLLIN, .data = {.fd = fd}};
        if (epoll_fd >= 0 && fd >= 0) epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event);
      }
      while (!stop_poller_.load()) {
        // Waits without the ring's lock, so that a request can take samples in meanwhile.
        epoll_event event{};
        if (epoll_wait(epoll_fd, &event, 1, sites_->HasWork() ? 0 : 200) < 0 && errno != EINTR) {
          log::Warn("mr stacks: the ring buffer wait failed: samples are taken in no more",
                    {{"err", Errno(errno)}});
          break;
        }
        ConsumeStackSamples();
        sites_->Process();
      }
      if (epoll_fd >= 0) close(epoll_fd);
    });
  });
}

void MrProbe::ConsumeStackSamples() {
  std::lock_guard lock(stack_ring_mutex_);
  ring_buffer__consume(stack_ring_);
}

int MrProbe::OnStackSample(void* context, void* data, size_t size) {
  static_cast<MrProbe*>(context)->sites_->Add(data, size);
  return 0;
}

void MrProbe::DropProcesses(const std::vector<Exited>& exited) {
  const int procs_fd = bpf_map__fd(skel_->maps.procs);
  std::vector<sys::ImageKey> ended;
  for (const Exited& end : exited) ended.push_back(end.image);
  sites_->DropImages(ended);
  // The images that still held regions -> their comm, and whether an exec ended them.
  std::map<sys::ImageKey, std::pair<std::string, bool>> holders;
  for (const auto& [image, exit_comm, at_exec] : exited) {
    const mr_proc_key key = ProcKeyOf(image);
    mr_proc proc{};
    // Not found: already dropped (threads exiting together can both report the end).
    if (bpf_map_lookup_elem(procs_fd, &key, &proc) != 0) continue;
    if (bpf_map_delete_elem(procs_fd, &key) != 0) continue;
    // Histograms by comm stay monotonic: an exited process's counts move to the retired set.
    std::string comm = CommOf(proc);
    if (retired_histograms_.contains(comm) || retired_histograms_.size() < kMaxReleasedComms) {
      retired_histograms_[comm].Add(HistogramsOf(proc));
      MrProcess& retired = retired_counters_[comm];
      retired.comm = comm;
      retired.AddCounters(ProcessOf(image.tgid, proc));
    }
    if (proc.outstanding_regions > 0) holders[image] = {comm, at_exec};
  }
  if (holders.empty()) return;

  std::vector<std::pair<mr_region_key, mr_region>> doomed;
  ForEachRegion([&](const mr_region_key& key, const mr_region& region) {
    if (holders.contains(ImageKeyOf(key, region))) {
      doomed.emplace_back(key, region);
    }
    return true;
  });
  const int regions_fd = bpf_map__fd(skel_->maps.regions);
  for (const auto& [key, region] : doomed) {
    // Counted only by the delete that succeeds: a region the walk returned twice (map reads
    // restart when entries move under them) is released once.
    if (bpf_map_delete_elem(regions_fd, &key) != 0) continue;
    const auto& [holder_comm, at_exec] = holders.at(ImageKeyOf(key, region));
    auto& released = at_exec ? released_at_exec_ : released_;
    std::string comm = holder_comm;
    if (!released.contains(comm) && released.size() >= kMaxReleasedComms) comm = "other";
    released[comm].regions += 1;
    released[comm].bytes += region.length;  // 0 for implicit ODP
  }
}

void MrProbe::CountLeakSuspects(std::vector<MrProcess>& processes,
                                const std::map<sys::ImageKey, size_t>& index) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // bpf_ktime_get_ns() is CLOCK_MONOTONIC
  const uint64_t now_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000ULL + static_cast<uint64_t>(now.tv_nsec);
  if (now_ns < leak_age_ns_) return;
  const uint64_t threshold = now_ns - leak_age_ns_;
  std::set<mr_region_key, bool (*)(const mr_region_key&, const mr_region_key&)> seen(
      [](const mr_region_key& a, const mr_region_key& b) {
        return std::tie(a.tgid, a.exec_id, a.mr) < std::tie(b.tgid, b.exec_id, b.mr);
      });
  ForEachRegion([&](const mr_region_key& key, const mr_region& region) {
    if (region.registered_ns > threshold) return true;
    const auto proc = index.find(ImageKeyOf(key, region));
    if (proc == index.end() || !seen.insert(key).second) return true;
    processes[proc->second].leak_suspect_regions += 1;
    processes[proc->second].leak_suspect_bytes += region.length;
    return true;
  });
}

bool MrProbe::ForEachRegion(
    const std::function<bool(const mr_region_key&, const mr_region&)>& visit) {
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
      return false;
    }
    for (uint32_t i = 0; i < count; ++i) {
      if (!visit(keys[i], values[i])) return true;
    }
    if (err != 0) return true;  // ENOENT: that was the last batch
  }
}

std::optional<MrTrackedKeys> MrProbe::TrackedKeys() {
  MrTrackedKeys keys{.kernel_path = kernel_ != nullptr};
  const bool complete = ForEachRegion([&](const mr_region_key& key, const mr_region& region) {
    keys.lkeys.insert({key.tgid, region.lkey});
    if (region.flags & MR_REGION_RESTRACK_ID) {
      keys.restrack_ids.insert({region.device_index, region.restrack_id});
    }
    return true;
  });
  if (!complete) return std::nullopt;
  return keys;
}

MrStacksReport MrProbe::OutstandingStacks(size_t top, std::optional<uint32_t> pid,
                                          const MrStacksLimits& limits) {
  // No lock: this only reads the maps, and Snapshot() (which deletes from them) must never
  // wait for a debug request. Entries deleted meanwhile are simply missing from the answer.
  // Every region in the map had its stack sample submitted before it was written: the ring
  // is drained (a copy of bytes) and the stack thread's unwinding and symbolizing of its
  // samples waited for, within the request's budget, so the answer does not depend on the
  // poller's timing. Nothing is parsed here: this runs on an HTTP thread. The wait has a
  // budget of its own: the walk below gets a whole one after it.
  StartStackPoller();
  ConsumeStackSamples();
  sites_->WaitProcessed(std::chrono::steady_clock::now() + limits.stack_thread_wait);
  const auto deadline = std::chrono::steady_clock::now() + limits.budget;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t now_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000ULL + static_cast<uint64_t>(now.tv_nsec);
  MrStacksReport report;
  // Live images, by (tgid, exec generation, start).
  std::map<sys::ImageKey, MrProcessStacks> processes;
  const int procs_fd = bpf_map__fd(skel_->maps.procs);
  mr_proc_key key{};
  mr_proc_key next{};
  const void* previous = nullptr;
  while (bpf_map_get_next_key(procs_fd, previous, &next) == 0) {
    key = next;
    previous = &key;
    mr_proc proc{};
    if ((pid && key.tgid != *pid) || bpf_map_lookup_elem(procs_fd, &key, &proc) != 0) continue;
    if (proc.exec_ended) continue;  // an exec released its regions: not outstanding
    processes[ImageKeyOf(key)] = {.image = ImageKeyOf(key), .comm = CommOf(proc)};
  }
  // By DWARF site when the registration's stack was captured, else by frame-pointer stack.
  std::map<std::tuple<sys::ImageKey, uint64_t, int32_t>, MrStack> by_site;
  ForEachRegion([&](const mr_region_key& region_key, const mr_region& region) {
    if (report.regions_walked >= limits.max_regions) {
      report.truncated = true;
      report.truncated_reason = "stopped after " + std::to_string(limits.max_regions) + " regions";
      return false;
    }
    if ((++report.regions_walked & 1023) == 0 && std::chrono::steady_clock::now() > deadline) {
      report.truncated = true;
      report.truncated_reason = "stopped after " + std::to_string(limits.budget.count()) + " ms";
      return false;
    }
    const sys::ImageKey owner = ImageKeyOf(region_key, region);
    const auto proc = processes.find(owner);
    if (proc == processes.end()) return true;
    MrStack& site = by_site[{owner, region.site, region.site != 0 ? int32_t{-1} : region.stack_id}];
    site.stack_id = region.stack_id;
    site.site = region.site;
    site.regions += 1;
    site.bytes += region.length;
    if (now_ns > region.registered_ns) {
      site.oldest_age_ns = std::max<uint64_t>(site.oldest_age_ns, now_ns - region.registered_ns);
    }
    proc->second.outstanding_regions += 1;
    proc->second.outstanding_bytes += region.length;
    return true;
  });
  for (auto& [site_key, site] : by_site) {
    processes[std::get<0>(site_key)].stacks.push_back(site);
  }

  const int stacks_fd = bpf_map__fd(skel_->maps.stacks);
  for (auto& [proc_key, proc] : processes) {
    if (proc.outstanding_regions == 0) continue;
    for (MrStack& site : proc.stacks) {
      if (site.site != 0) {
        const auto unwound = sites_->Find(proc_key, site.site);
        if (unwound && !unwound->pcs.empty()) {
          site.addresses = unwound->pcs;
          site.origin = OriginOf(unwound->method);
          site.unwind_stop = unwound->stop_reason;
          site.frames = unwound->symbols.frames;
          site.symbols_missing = unwound->symbols.missing;
          continue;
        }
        // Not unwound (dropped at a bound, or still waiting): the frame-pointer stack.
        site.unwind_stop = unwound ? unwound->stop_reason : "stack not unwound yet or dropped";
      }
      uint64_t ips[MR_MAX_STACK_DEPTH] = {};
      if (site.stack_id < 0 || bpf_map_lookup_elem(stacks_fd, &site.stack_id, ips) != 0) continue;
      for (const uint64_t ip : ips) {
        if (ip == 0) break;
        site.addresses.push_back(ip);
      }
      if (!site.addresses.empty()) site.origin = MrStackOrigin::kProbeFramePointers;
    }
    // Sites sent before the image's code ranges were known are one sample each: the same
    // call path then unwinds to the same stack, shown once.
    std::map<std::pair<std::vector<uint64_t>, std::string>, MrStack> merged;
    for (MrStack& site : proc.stacks) {
      if (site.addresses.empty()) {
        merged[{{}, "#" + std::to_string(site.stack_id) + "/" + std::to_string(site.site)}] =
            std::move(site);
        continue;
      }
      auto [it, inserted] =
          merged.try_emplace({site.addresses, StackOriginName(site.origin)}, site);
      if (inserted) continue;
      it->second.regions += site.regions;
      it->second.bytes += site.bytes;
      it->second.oldest_age_ns = std::max(it->second.oldest_age_ns, site.oldest_age_ns);
    }
    proc.stacks.clear();
    for (auto& [identity, site] : merged) proc.stacks.push_back(std::move(site));
    std::sort(proc.stacks.begin(), proc.stacks.end(),
              [](const MrStack& a, const MrStack& b) { return a.bytes > b.bytes; });
    if (proc.stacks.size() > top) proc.stacks.resize(top);
    report.processes.push_back(std::move(proc));
  }
  std::sort(report.processes.begin(), report.processes.end(),
            [](const MrProcessStacks& a, const MrProcessStacks& b) {
              return a.outstanding_bytes > b.outstanding_bytes;
            });
  AddFramePointerSymbols(report, std::chrono::steady_clock::now() + limits.stack_thread_wait);
  return report;
}

void MrProbe::AddFramePointerSymbols(MrStacksReport& report,
                                     std::chrono::steady_clock::time_point deadline) {
  // The frame-pointer stacks shown (the top ones only) are symbolized by the stack thread too:
  // asked for, waited for within the request's budget, then read.
  const auto fill = [&](bool final) {
    bool asked = false;
    for (MrProcessStacks& proc : report.processes) {
      for (MrStack& site : proc.stacks) {
        if (site.origin != MrStackOrigin::kProbeFramePointers || !site.frames.empty() ||
            site.addresses.empty()) {
          continue;
        }
        if (auto symbols = sites_->FramePointerSymbols(proc.image, site.stack_id, site.addresses)) {
          site.frames = std::move(symbols->frames);
          site.symbols_missing = std::move(symbols->missing);
        } else if (final) {
          site.symbols_missing = "not symbolized yet: the stack thread is busy";
        } else {
          asked = true;
        }
      }
    }
    return asked;
  };
  if (fill(false)) {
    sites_->WaitProcessed(deadline);
    fill(true);
  }
}

MrSnapshot MrProbe::Snapshot() {
  std::lock_guard lock(mutex_);
  if (kernel_) kernel_->EndStartUpWhenDue(std::chrono::steady_clock::now());
  pending_exits_.clear();
  ring_buffer__consume(exits_);
  // From the first collection on a thread takes the stack samples in as they come, and
  // unwinds and symbolizes them (StartStackPoller): never this scrape's thread.
  StartStackPoller();

  const int procs_fd = bpf_map__fd(skel_->maps.procs);
  MrSnapshot snapshot;
  std::map<std::string, MrHistograms> live_histograms;
  std::map<sys::ImageKey, size_t> index;  // image -> processes[i]
  mr_proc_key key{};
  mr_proc_key next{};
  const void* previous = nullptr;
  int walk_errno = 0;
  for (;;) {
    if (bpf_map_get_next_key(procs_fd, previous, &next) != 0) {
      if (errno != ENOENT) walk_errno = errno;  // ENOENT: the last key
      break;
    }
    key = next;
    previous = &key;
    mr_proc proc{};
    if (bpf_map_lookup_elem(procs_fd, &key, &proc) != 0) {
      // Deleted since get_next_key (ENOENT: an exit dropped it) or unreadable: no series.
      if (errno != ENOENT) walk_errno = errno;
      continue;
    }
    // The process exec'd: this image's regions were released by the kernel (the process,
    // under its new image, is another entry). Dropped below, not reported.
    if (proc.exec_ended) {
      pending_exits_.push_back({.image = ImageKeyOf(key), .comm = CommOf(proc), .at_exec = true});
      continue;
    }
    // This very process exited (its event is pending): drop it below, do not report it.
    const bool exit_seen = std::any_of(pending_exits_.begin(), pending_exits_.end(),
                                       [&](const Exited& e) { return e.image == ImageKeyOf(key); });
    if (exit_seen) {
      if (exit_observer_) exit_observer_(ProcessOf(key.tgid, proc));
      continue;
    }
    // Safety net for a lost exit event: a process positively gone (no such pid, or the pid
    // reused by another process) is dropped; one we cannot check now is kept.
    const Liveness liveness = ProcessLiveness(procfs_, key.tgid, key.start_ns, ns_per_tick_);
    if (liveness == Liveness::kGone) {
      pending_exits_.push_back({.image = ImageKeyOf(key)});
      if (exit_observer_) exit_observer_(ProcessOf(key.tgid, proc));
      continue;
    }
    if (!index.emplace(ImageKeyOf(key), snapshot.processes.size()).second) {
      continue;  // the walk restarted and returned this entry again
    }
    snapshot.processes.push_back(ProcessOf(key.tgid, proc));
    live_histograms[CommOf(proc)].Add(HistogramsOf(proc));
  }
  DropProcesses(pending_exits_);
  CollectUnusedStacks(!pending_exits_.empty());
  if (leak_age_ns_ > 0 && !snapshot.processes.empty()) {
    CountLeakSuspects(snapshot.processes, index);
  }
  std::sort(snapshot.processes.begin(), snapshot.processes.end(),
            [](const MrProcess& a, const MrProcess& b) { return a.pid < b.pid; });

  mr_globals globals{};
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.globals), &zero, &globals) == 0) {
    snapshot.lost_calls = globals.lost_calls;
    snapshot.lost_processes = globals.lost_procs;
    snapshot.lost_exits = globals.lost_exits;
    snapshot.stale_calls = globals.stale_calls;
    snapshot.stacks_dropped_ring = globals.lost_stack_samples;
    snapshot.stacks_copy_failed = globals.stack_copy_failed;
    snapshot.stack_samples = globals.stack_samples;
    snapshot.stack_samples_deduplicated = globals.stack_samples_deduplicated;
  } else {
    snapshot.globals_known = false;
    log::Warn("cannot read the MR probes' globals map: rdma_mr_lost_total left out",
              {{"err", std::strerror(errno)}});
  }
  if (walk_errno != 0) {
    // After the exits were handled (DropProcesses): the processes not walked are unknown,
    // not gone; this scrape of the collector fails rather than leave their series out.
    throw std::runtime_error(std::string("cannot walk the MR probes' process map: ") +
                             std::strerror(walk_errno));
  }
  const MrStackSitesStats stacks = sites_->stats();
  snapshot.stack_bytes = stacks.pending_bytes + stacks.unwound_bytes;
  snapshot.stack_sites = stacks.sites;
  snapshot.stacks_dropped_memory = stacks.dropped_memory;
  snapshot.stacks_dropped_gone = stacks.dropped_gone;
  snapshot.stacks_unwound = stacks.unwound;
  snapshot.stack_unwind_seconds = static_cast<double>(stacks.unwind_ns) / 1e9;
  snapshot.unwind_worker = stacks.sandboxed;
  snapshot.unwind_worker_restarts = stacks.worker.restarts;
  snapshot.unwind_worker_sandbox = stacks.worker.sandbox;
  snapshot.unwind_worker_starts = stacks.worker.starts;
  snapshot.released = released_;
  snapshot.released_at_exec = released_at_exec_;
  snapshot.histograms = retired_histograms_;
  snapshot.retired_counters = retired_counters_;
  for (const auto& [comm, histograms] : live_histograms) snapshot.histograms[comm].Add(histograms);
  return snapshot;
}

const char* StackOriginName(MrStackOrigin origin) {
  switch (origin) {
    case MrStackOrigin::kNone:
      return "";
    case MrStackOrigin::kUnwoundIpOnly:
      return "none";
    case MrStackOrigin::kUnwoundDwarf:
      return "dwarf";
    case MrStackOrigin::kUnwoundRbp:
      return "frame-pointer";
    case MrStackOrigin::kProbeFramePointers:
      return "frame_pointer";
  }
  return "";
}

MrStackOrigin OriginOf(sys::UnwindMethod method) {
  switch (method) {
    case sys::UnwindMethod::kNone:
      return MrStackOrigin::kUnwoundIpOnly;
    case sys::UnwindMethod::kDwarf:
      return MrStackOrigin::kUnwoundDwarf;
    case sys::UnwindMethod::kFramePointer:
      return MrStackOrigin::kUnwoundRbp;
  }
  return MrStackOrigin::kUnwoundIpOnly;
}

}  // namespace rdmascope
