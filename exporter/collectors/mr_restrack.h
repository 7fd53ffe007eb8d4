// Memory regions registered before the MR probes attached: the probes never saw them, so
// only the kernel's resource tracking (restrack, `rdma res show mr`) knows them. They are
// seeded from restrack dumps taken around the attach, added to the outstanding gauges of
// their process, and followed by key in later dumps until they are gone (deregistered,
// released at exit or exec, device removed). docs/architecture.md, "Regions registered
// before the exporter started".
//
// Two dumps make the start exact while programs register: one before the probes attach,
// one after. A region both list was registered before any probe could count it. A region
// only the second lists was registered while they attached (the "window"): the probes may
// have counted it too, so it is kept only if they do not track it (by its MRN on the
// kernel path, by owner and lkey on uprobes), checked at each scrape until
// kWindowGrace after the seed (a registration whose MR restrack listed has returned by then).
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bpf/mr_probe.h"
#include "collectors/resources.h"
#include "sys/rdma_netlink.h"
#include "sys/rdma_owners.h"

namespace rdmascope {

// The MR dump (RDMA_NLDEV_CMD_RES_MR_GET per device) with the PDs and contexts an MR's owner
// is found through when its registering thread has exited (sys/rdma_owners.h), through the
// resources collector's netlink code.
class NetlinkMrSource : public ResourceSource {
 public:
  std::expected<std::vector<sys::RdmaDeviceResources>, int> Read() const override;
};

// A region as restrack names it. The MRN is the restrack id of the MR: allocated per device
// by a cyclic 32-bit allocator (restrack.c rdma_restrack_add, xa_alloc_cyclic), so a freed
// MRN is not handed out again before the counter wraps. It is dumped to every caller
// (nldev.c fill_res_mr_entry), unlike LKEY/RKEY which need CAP_NET_ADMIN: the serving
// process may have dropped it (docs/security.md), so keys would vanish from later dumps.
struct RestrackMrKey {
  uint32_t device_index = 0;
  uint32_t mrn = 0;
  auto operator<=>(const RestrackMrKey&) const = default;
};

// What the seeded regions of one process add to its outstanding figures.
struct SeededProcess {
  uint32_t pid = 0;  // the process (thread group), whichever thread registered
  int64_t regions = 0;
  int64_t bytes = 0;         // implicit ODP regions excluded, as the probes count them
  int64_t implicit_odp = 0;  // of regions
};

class RestrackMrSeed {
 public:
  // The entries' pids are processes: the dumps went through sys::ResolveOwners (restrack
  // names the registering thread, or nobody once that thread has exited).
  RestrackMrSeed() = default;
  // The user MRs with an owner pid of a dump taken before the probes attached. Kernel MRs
  // (no pid, a kernel name) are not the probes' business; an MR without either belongs to
  // an exiting process.
  explicit RestrackMrSeed(const std::vector<sys::RdmaDeviceResources>& before_attach);
  // The user MRs of `after_attach`; those `before_attach` does not list under the same owner
  // are the window's (see the top of this file).
  RestrackMrSeed(const std::vector<sys::RdmaDeviceResources>& before_attach,
                 const std::vector<sys::RdmaDeviceResources>& after_attach);

  struct Follow {
    size_t dropped = 0;    // seeded regions gone since the previous dump
    bool unknown = false;  // a device still present could not list its MRs: nothing dropped
  };
  // Keeps the seeded regions `later` still lists under the same owner (their length as it
  // lists it: ibv_rereg_mr may change it in place). A region is gone when its device lists
  // MRs without it, lists it without a pid (its owner is exiting) or under another pid, or
  // is not listed at all (unregistered: ib_unregister_device releases every user object).
  Follow FollowDump(const std::vector<sys::RdmaDeviceResources>& later);

  // Drops the window's regions the probes track (they count them already), and those that
  // cannot be told apart: on uprobes, a window region without its lkey (a dump without
  // CAP_NET_ADMIN). Returns how many were dropped.
  size_t DropTracked(const MrTrackedKeys& tracked);
  // The window's regions the probes did not track are the seed's for good.
  void SettleWindow();

  bool empty() const { return regions_.empty(); }
  size_t size() const { return regions_.size(); }
  size_t window_size() const;
  std::vector<SeededProcess> ByProcess() const;  // by pid

 private:
  struct Region {
    uint32_t pid = 0;  // the process
    uint64_t length = 0;
    bool window = false;
    std::optional<uint32_t> lkey;
  };
  void Add(const sys::RdmaDeviceResources& device, const sys::RdmaResourceEntry& entry,
           bool window);
  std::map<RestrackMrKey, Region> regions_;
};

// Adds the seeded figures to the snapshot's processes: outstanding regions, bytes and
// implicit ODP regions; leak suspects too when `seeded_are_leak_suspects` (the seed is older
// than the leak age, so its regions were registered longer ago than that). A process the
// probes have no entry for (it registered nothing since they attached) is added with zero
// counters: registrations and deregistrations count from the exporter's start. Its comm is
// comm_of(pid); a process whose comm cannot be read any more is left out. Keeps the
// snapshot's order by pid.
void AddSeeded(const std::vector<SeededProcess>& seeded, bool seeded_are_leak_suspects,
               const std::function<std::string(uint32_t)>& comm_of, MrSnapshot& snapshot);

// The seed of one MR collector: dumps taken before and after the probes attach, followed at
// each scrape while it holds regions (then no dump is made any more). Thread-safe: scrapes
// may run concurrently.
class MrSeedTracker {
 public:
  // How long the window's regions are checked against the probes (see the top of the file).
  static constexpr std::chrono::seconds kWindowGrace{10};

  // `source` may be null: no seeding (no RDMA netlink, another pid namespace...).
  // `tgid_of` resolves the dumps' thread ids to processes (sys::ResolveOwners).
  MrSeedTracker(std::unique_ptr<ResourceSource> source, uint64_t leak_age_ns,
                sys::ThreadGroupLookup tgid_of = {});
  // Just before the probes attach, then just after.
  void BeforeAttach();
  void AfterAttach(std::chrono::steady_clock::time_point now);
  // At a scrape: follows the seed with a new dump and adds what is left to `snapshot`.
  // `tracked` is asked (a walk of the probes' regions) while the window is checked; nullopt
  // (the walk failed) or a failed or partial dump while regions are seeded: throws, their
  // owners' outstanding figures cannot be vouched for this scrape (the collector fails it,
  // logged). Returns the number of seeded regions added.
  size_t Apply(std::chrono::steady_clock::time_point now,
               const std::function<std::string(uint32_t)>& comm_of,
               const std::function<std::optional<MrTrackedKeys>()>& tracked, MrSnapshot& snapshot);

 private:
  std::unique_ptr<ResourceSource> source_;
  uint64_t leak_age_ns_;
  sys::ThreadGroupLookup tgid_of_;
  // A dump from the source, its owners resolved to processes.
  std::expected<std::vector<sys::RdmaDeviceResources>, int> Read() const;
  std::mutex mutex_;
  std::optional<std::vector<sys::RdmaDeviceResources>> before_attach_;
  RestrackMrSeed seed_;
  std::chrono::steady_clock::time_point seeded_at_;
  bool window_open_ = false;
};

}  // namespace rdmascope
