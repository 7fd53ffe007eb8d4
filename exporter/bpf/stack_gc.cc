#include "bpf/stack_gc.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string>

#include "bpf/mr_image_key.h"
#include "bpf/mr_probe.h"
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

bool StackGc::Due(Clock::time_point now, bool ended) {
  ended_ = ended_ || ended;
  if (last_walk_ && now - *last_walk_ < gap_) return false;
  return !last_walk_ || ended_ || !candidates_.empty() || now - *last_walk_ >= options_.idle_period;
}

std::vector<uint32_t> StackGc::Decide(Clock::time_point now, const std::vector<uint32_t>& present,
                                      const std::unordered_set<uint32_t>& referenced,
                                      std::chrono::nanoseconds walk_time) {
  std::set<uint32_t> unreferenced;
  std::vector<uint32_t> doomed;
  for (const uint32_t id : present) {
    if (referenced.contains(id)) continue;
    if (candidates_.contains(id)) {
      doomed.push_back(id);
    } else {
      unreferenced.insert(id);
    }
  }
  std::sort(doomed.begin(), doomed.end());
  doomed.erase(std::unique(doomed.begin(), doomed.end()), doomed.end());
  candidates_ = std::move(unreferenced);
  Walked(now, walk_time);
  return doomed;
}

void StackGc::Abandon(Clock::time_point now, std::chrono::nanoseconds walk_time) {
  candidates_.clear();
  Walked(now, walk_time);
}

void StackGc::Walked(Clock::time_point now, std::chrono::nanoseconds walk_time) {
  ended_ = false;
  last_walk_ = now;
  gap_ = std::max<std::chrono::nanoseconds>(options_.min_gap, walk_time * options_.duty_factor);
}

// Deregistrations in flight (uprobe path): the region waits in the thread's call record
// between ibv_dereg_mr's entry and its return, and goes back to the map if it failed.
bool MrProbe::AddInFlightStackIds(std::unordered_set<uint32_t>& ids) {
  const int fd = bpf_map__fd(skel_->maps.calls);
  uint64_t key = 0;
  uint64_t next = 0;
  const void* previous = nullptr;
  for (;;) {
    if (bpf_map_get_next_key(fd, previous, &next) != 0) {
      if (errno == ENOENT) break;
      log::Warn("mr stacks cleanup skipped: cannot read the calls map",
                {{"err", ErrnoText(errno)}});
      return false;
    }
    key = next;
    previous = &key;
    mr_call call{};
    if (bpf_map_lookup_elem(fd, &key, &call) != 0) continue;  // the call ended meanwhile
    if (call.pending && call.region.stack_id >= 0) {
      ids.insert(static_cast<uint32_t>(call.region.stack_id));
    }
  }
  return !kernel_ || kernel_->AddInFlightStackIds(ids);
}

// Left open: a registration from a call site whose id was unreferenced at two walks, made
// between this walk's read of the regions and the delete, gets the id just deleted; its region
// shows no call site until that call site registers again (the same stack hashes to the same
// bucket, hence the same id, and refills it), or shows another call site if a different stack
// of the same bucket registers first. That needs a registration inside a window of a few
// syscalls and a bucket collision; without the cleanup every new stack of a full bucket lost
// its call site for good.
void MrProbe::CollectUnusedStacks(bool ended) {
  const auto now = StackGc::Clock::now();
  if (!stack_gc_.Due(now, ended)) return;
  // In-flight calls first, then the regions: a region moving from a call record back to the
  // map (a failed deregistration) between the two reads may be missed by this walk, never by
  // two walks in a row unless it moves at both.
  std::unordered_set<uint32_t> referenced;
  std::set<MrStackSites::SiteKey> sites;  // the DWARF sites regions refer to
  const auto refer = [&](const mr_region_key& key, const mr_region& region) {
    if (region.stack_id >= 0) referenced.insert(static_cast<uint32_t>(region.stack_id));
    if (region.site != 0) sites.insert({ImageKeyOf(key, region), region.site});
    return true;
  };
  const bool regions_read = AddInFlightStackIds(referenced) && ForEachRegion(refer);
  if (!regions_read) {  // ids may be missing: deleting now could take a live region's stack
    log::Warn("mr stacks cleanup skipped: the in-flight calls or the regions could not be read");
    stack_gc_.Abandon(now, StackGc::Clock::now() - now);
    return;
  }
  const int stacks_fd = bpf_map__fd(skel_->maps.stacks);
  std::vector<uint32_t> present;
  uint32_t id = 0;
  uint32_t next = 0;
  const void* previous = nullptr;
  for (;;) {
    if (bpf_map_get_next_key(stacks_fd, previous, &next) != 0) {
      if (errno == ENOENT) break;
      log::Warn("mr stacks cleanup skipped: cannot read the stacks map",
                {{"err", ErrnoText(errno)}});
      stack_gc_.Abandon(now, StackGc::Clock::now() - now);
      return;
    }
    id = next;
    previous = &id;
    present.push_back(id);
  }
  sites_->Collect(sites);
  size_t deleted = 0;
  const auto doomed_ids = stack_gc_.Decide(now, present, referenced, StackGc::Clock::now() - now);
  for (const uint32_t doomed : doomed_ids) {
    if (bpf_map_delete_elem(stacks_fd, &doomed) == 0) ++deleted;
  }
  log::Debug("mr stacks cleanup", {{"stacks", std::to_string(present.size())},
                                   {"referenced", std::to_string(referenced.size())},
                                   {"deleted", std::to_string(deleted)},
                                   {"candidates", std::to_string(stack_gc_.candidates().size())}});
}

}  // namespace rdmascope
