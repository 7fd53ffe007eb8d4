#include "collectors/mr_restrack.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "core/log.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace {

using sys::RdmaDeviceResources;
using sys::RdmaResourceEntry;
using sys::RdmaResourceKind;

// ib_uverbs_reg_mr keeps the length asked for: U64_MAX for an implicit ODP registration
// (probes/mr.h MR_REGION_IMPLICIT_ODP), counted as a region but never in byte sums.
constexpr uint64_t kImplicitOdpLength = UINT64_MAX;

constexpr RdmaResourceKind kMrsAndOwners[] = {RdmaResourceKind::kMr, RdmaResourceKind::kPd,
                                              RdmaResourceKind::kCtx};

bool Unlisted(const RdmaDeviceResources& device) {
  return std::ranges::find(device.unlisted, RdmaResourceKind::kMr) != device.unlisted.end();
}

}  // namespace

std::expected<std::vector<sys::RdmaDeviceResources>, int> NetlinkMrSource::Read() const {
  auto netlink = sys::RdmaNetlink::Open();
  if (!netlink) return std::unexpected(netlink.error());
  return netlink->DumpAll(0, kMrsAndOwners);
}

namespace {

bool IsUserMr(const RdmaResourceEntry& entry) {
  return entry.kind == RdmaResourceKind::kMr && entry.pid && entry.id && entry.mr_length;
}

}  // namespace

void RestrackMrSeed::Add(const RdmaDeviceResources& device, const RdmaResourceEntry& entry,
                         bool window) {
  regions_[{device.index, *entry.id}] = {
      .pid = *entry.pid, .length = *entry.mr_length, .window = window, .lkey = entry.mr_lkey};
}

RestrackMrSeed::RestrackMrSeed(const std::vector<RdmaDeviceResources>& before_attach) {
  for (const RdmaDeviceResources& device : before_attach) {
    for (const RdmaResourceEntry& entry : device.entries) {
      if (IsUserMr(entry)) Add(device, entry, /*window=*/false);
    }
  }
}

RestrackMrSeed::RestrackMrSeed(const std::vector<RdmaDeviceResources>& before_attach,
                               const std::vector<RdmaDeviceResources>& after_attach) {
  std::map<RestrackMrKey, uint32_t> before;  // -> owner
  for (const RdmaDeviceResources& device : before_attach) {
    for (const RdmaResourceEntry& entry : device.entries) {
      if (IsUserMr(entry)) before[{device.index, *entry.id}] = *entry.pid;
    }
  }
  for (const RdmaDeviceResources& device : after_attach) {
    for (const RdmaResourceEntry& entry : device.entries) {
      if (!IsUserMr(entry)) continue;
      const auto was = before.find({device.index, *entry.id});
      Add(device, entry, was == before.end() || was->second != *entry.pid);
    }
  }
}

size_t RestrackMrSeed::DropTracked(const MrTrackedKeys& tracked) {
  return std::erase_if(regions_, [&](const auto& item) {
    const auto& [key, region] = item;
    if (!region.window) return false;
    if (tracked.kernel_path) return tracked.restrack_ids.contains({key.device_index, key.mrn});
    return !region.lkey || tracked.lkeys.contains({region.pid, *region.lkey});
  });
}

void RestrackMrSeed::SettleWindow() {
  for (auto& [key, region] : regions_) region.window = false;
}

size_t RestrackMrSeed::window_size() const {
  return static_cast<size_t>(
      std::ranges::count_if(regions_, [](const auto& item) { return item.second.window; }));
}

RestrackMrSeed::Follow RestrackMrSeed::FollowDump(const std::vector<RdmaDeviceResources>& later) {
  Follow follow;
  std::map<uint32_t, const RdmaDeviceResources*> devices;
  for (const RdmaDeviceResources& device : later) devices[device.index] = &device;
  // A device that could not list its MRs says nothing about them: keep the whole seed.
  for (const auto& [key, region] : regions_) {
    const auto device = devices.find(key.device_index);
    if (device != devices.end() && Unlisted(*device->second)) {
      follow.unknown = true;
      return follow;
    }
  }
  std::map<RestrackMrKey, const RdmaResourceEntry*> listed;
  for (const RdmaDeviceResources& device : later) {
    for (const RdmaResourceEntry& entry : device.entries) {
      if (entry.kind == RdmaResourceKind::kMr && entry.id)
        listed[{device.index, *entry.id}] = &entry;
    }
  }
  for (auto it = regions_.begin(); it != regions_.end();) {
    const auto now = listed.find(it->first);
    const bool same_owner =
        now != listed.end() && now->second->pid && *now->second->pid == it->second.pid;
    if (!same_owner) {
      it = regions_.erase(it);
      ++follow.dropped;
      continue;
    }
    if (now->second->mr_length) it->second.length = *now->second->mr_length;
    ++it;
  }
  return follow;
}

std::vector<SeededProcess> RestrackMrSeed::ByProcess() const {
  std::map<uint32_t, SeededProcess> by_pid;
  for (const auto& [key, region] : regions_) {
    SeededProcess& proc = by_pid[region.pid];
    proc.pid = region.pid;
    ++proc.regions;
    if (region.length == kImplicitOdpLength) {
      ++proc.implicit_odp;
    } else {
      proc.bytes += static_cast<int64_t>(region.length);
    }
  }
  std::vector<SeededProcess> out;
  for (const auto& [pid, proc] : by_pid) out.push_back(proc);
  return out;
}

void AddSeeded(const std::vector<SeededProcess>& seeded, bool seeded_are_leak_suspects,
               const std::function<std::string(uint32_t)>& comm_of, MrSnapshot& snapshot) {
  for (const SeededProcess& add : seeded) {
    auto it = std::ranges::find(snapshot.processes, add.pid, &MrProcess::pid);
    if (it == snapshot.processes.end()) {
      std::string comm = comm_of(add.pid);
      if (comm.empty()) continue;  // gone since the dump: the next dump drops its regions
      snapshot.processes.push_back({.pid = add.pid, .comm = std::move(comm)});
      it = std::prev(snapshot.processes.end());
    }
    it->outstanding_regions += add.regions;
    it->outstanding_bytes += add.bytes;
    it->outstanding_implicit_odp += add.implicit_odp;
    if (seeded_are_leak_suspects) {
      it->leak_suspect_regions += static_cast<uint64_t>(add.regions);
      it->leak_suspect_bytes += static_cast<uint64_t>(add.bytes);
    }
  }
  std::ranges::stable_sort(snapshot.processes, {}, &MrProcess::pid);
}

MrSeedTracker::MrSeedTracker(std::unique_ptr<ResourceSource> source, uint64_t leak_age_ns,
                             sys::ThreadGroupLookup tgid_of)
    : source_(std::move(source)), leak_age_ns_(leak_age_ns), tgid_of_(std::move(tgid_of)) {}

std::expected<std::vector<sys::RdmaDeviceResources>, int> MrSeedTracker::Read() const {
  auto devices = source_->Read();
  if (devices) sys::ResolveOwners(*devices, tgid_of_);
  return devices;
}

void MrSeedTracker::BeforeAttach() {
  if (!source_) return;
  auto devices = Read();
  const std::lock_guard lock(mutex_);
  // Without it every region of the second dump is the window's: checked against the probes.
  if (devices) before_attach_ = std::move(*devices);
}

void MrSeedTracker::AfterAttach(std::chrono::steady_clock::time_point now) {
  if (!source_) return;
  const auto devices = Read();
  if (!devices) {
    // EPROTONOSUPPORT: a kernel without InfiniBand; then there is nothing to seed either.
    log::Info(
        "memory regions registered before the exporter started are not counted: no "
        "restrack MR dump",
        {{"err", std::strerror(devices.error())}});
    return;
  }
  const std::lock_guard lock(mutex_);
  seed_ =
      RestrackMrSeed(before_attach_.value_or(std::vector<sys::RdmaDeviceResources>{}), *devices);
  before_attach_.reset();
  seeded_at_ = now;
  window_open_ = seed_.window_size() > 0;
  const auto processes = seed_.ByProcess();
  log::Info("memory regions registered before the exporter started, from restrack",
            {{"regions", std::to_string(seed_.size())},
             {"processes", std::to_string(processes.size())},
             {"registered_while_attaching", std::to_string(seed_.window_size())}});
}

size_t MrSeedTracker::Apply(std::chrono::steady_clock::time_point now,
                            const std::function<std::string(uint32_t)>& comm_of,
                            const std::function<std::optional<MrTrackedKeys>()>& tracked,
                            MrSnapshot& snapshot) {
  const std::lock_guard lock(mutex_);
  if (seed_.empty()) return 0;
  const auto devices = Read();
  if (!devices) {
    throw std::runtime_error(std::string("restrack MR dump failed (") +
                             std::strerror(devices.error()) +
                             "): the regions registered before the exporter started cannot be "
                             "followed this scrape");
  }
  const RestrackMrSeed::Follow follow = seed_.FollowDump(*devices);
  if (follow.unknown) {
    throw std::runtime_error(
        "restrack could not list the MRs of a device: the regions registered before the "
        "exporter started cannot be followed this scrape");
  }
  if (window_open_) {
    // After the dump: a region it still lists and the probes track now is theirs.
    const std::optional<MrTrackedKeys> keys = tracked();
    if (!keys) {
      throw std::runtime_error(
          "cannot read the regions the MR probes track: the regions registered while they "
          "attached cannot be told apart this scrape");
    }
    seed_.DropTracked(*keys);
    if (now - seeded_at_ >= kWindowGrace) {
      seed_.SettleWindow();
      window_open_ = false;
    }
  }
  if (follow.dropped > 0 && seed_.empty()) {
    log::Info("every memory region registered before the exporter started is gone");
  }
  const bool leak_suspects =
      leak_age_ns_ > 0 && now - seeded_at_ >= std::chrono::nanoseconds(leak_age_ns_);
  AddSeeded(seed_.ByProcess(), leak_suspects, comm_of, snapshot);
  return seed_.size();
}

}  // namespace rdmascope
