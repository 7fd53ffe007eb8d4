// Garbage collection of the MR probes' stack-trace map (`stacks` in probes/mr_common.bpf.h).
// The kernel never frees a stack-trace entry by itself, and every new process image adds the
// stacks of its registrations (its addresses differ: ASLR); once a bucket holds another stack,
// bpf_get_stackid() without BPF_F_REUSE_STACKID refuses a new one with -EEXIST
// (kernel/bpf/stackmap.c __bpf_get_stackid) and that registration has no call site. User space
// therefore deletes the ids no region references any more (BPF_F_REUSE_STACKID is not used: it
// would silently give old regions another call site).
//
// This is the decision, without the maps: which ids to delete, and when to walk the maps.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <unordered_set>
#include <vector>

namespace rdmascope {

class StackGc {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    // Two walks are at least this far apart: bounds the cost (each walk reads the whole
    // regions map) and gives a registration in progress time to write its region.
    std::chrono::milliseconds min_gap{5000};
    // A walk even when no process ended: stacks of regions deregistered by live processes.
    std::chrono::milliseconds idle_period{300000};
    // And at least this many times the last walk's duration apart: the walks take at most
    // about 1/duty_factor of a core whatever the map holds (a full regions map of 262,144
    // entries reads in about 0.35 s: then a walk every 17 s at most).
    uint32_t duty_factor = 50;
  };

  StackGc() : StackGc(Options{}) {}
  explicit StackGc(Options options) : options_(options) {}

  // At each collection: whether to walk the maps now. `ended`: processes or images were
  // dropped (with their regions) at this collection. Remembered until the next walk.
  bool Due(Clock::time_point now, bool ended);

  // After a complete walk at `now`: `present` are the ids in the stacks map, `referenced`
  // the ids some region (recorded, or in flight in a call) refers to. Returns the ids to
  // delete: unreferenced at this walk and at the previous one. A registration takes its stack
  // id a few microseconds before its region is written (and in the kernel path the id waits
  // in the call record for the whole registration, which the caller counts as referenced):
  // an id seen unreferenced once may be about to be used, so it is deleted only if it is
  // still unreferenced one walk (at least min_gap) later.
  // `walk_time`: how long the walk took (spaces the next one, see duty_factor).
  std::vector<uint32_t> Decide(Clock::time_point now, const std::vector<uint32_t>& present,
                               const std::unordered_set<uint32_t>& referenced,
                               std::chrono::nanoseconds walk_time = {});

  // A walk that could not read every map: no decision, and the ids seen unreferenced so far
  // must be confirmed again by two complete walks.
  void Abandon(Clock::time_point now, std::chrono::nanoseconds walk_time = {});

  // Ids seen unreferenced at the last walk, awaiting their confirming walk.
  const std::set<uint32_t>& candidates() const { return candidates_; }

 private:
  void Walked(Clock::time_point now, std::chrono::nanoseconds walk_time);
  Options options_;
  std::set<uint32_t> candidates_;
  bool ended_ = false;  // processes ended since the last walk
  std::optional<Clock::time_point> last_walk_;
  std::chrono::nanoseconds gap_{};  // before the next walk
};

}  // namespace rdmascope
