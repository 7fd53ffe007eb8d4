// The identity of a process image: what a call site, an unwinder session or a symbol lookup
// belongs to. A pid alone is not one (a pid is reused by the next process), nor a pid and its
// start time: an exec keeps both (and the pidfd) but replaces every mapping, so the stacks of
// the old image must never be unwound or named with the new image's modules, nor the reverse.
// The kernel tells images apart by task->self_exec_id (begin_new_exec() increments it on every
// exec), which the MR probes read (probes/mr.h, struct mr_proc_key; bpf/mr_image_key.h converts
// it); user space cannot read it from /proc, so whoever reads a process's maps for an image
// asks the probes whether that image is still the one running (ImageCurrent).
#pragma once

#include <unistd.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace rdmascope::sys {

struct ImageKey {
  uint32_t tgid = 0;
  uint32_t exec_id = 0;   // the exec generation (self_exec_id, truncated to 32 bits)
  uint64_t start_ns = 0;  // the thread-group leader's start_boottime, in ns

  auto operator<=>(const ImageKey&) const = default;
  bool operator==(const ImageKey&) const = default;

  // "pid 4242 exec 2": for logs and test messages (no address of the process).
  std::string Describe() const {
    return "pid " + std::to_string(tgid) + " exec " + std::to_string(exec_id);
  }
};

struct ImageKeyHash {
  size_t operator()(const ImageKey& key) const noexcept {
    uint64_t mixed = (static_cast<uint64_t>(key.tgid) << 32 | key.exec_id) * 0x9E3779B97F4A7C15ULL;
    mixed ^= key.start_ns + 0x9E3779B97F4A7C15ULL + (mixed << 6) + (mixed >> 2);
    return static_cast<size_t>(mixed);
  }
};

// 1e9 / USER_HZ: the unit of /proc/PID/stat's starttime.
inline uint64_t NsPerClockTick() {
  static const uint64_t ns = [] {
    const long ticks = sysconf(_SC_CLK_TCK);
    return ticks > 0 ? 1000000000ULL / static_cast<uint64_t>(ticks) : 10000000ULL;
  }();
  return ns;
}

// The start time /proc/PID/stat prints for the image's process: nsec_to_clock_t of the same
// start_boottime, the same truncating division.
inline uint64_t StartTicksOf(const ImageKey& image) { return image.start_ns / NsPerClockTick(); }

// The image of a process known only by /proc (its stat's start time; its exec generation is
// not visible there): tools and tests that unwind a process they started, with no probes.
inline ImageKey ImageOfStartTicks(uint32_t pid, uint64_t start_ticks, uint32_t exec_id = 0) {
  return {.tgid = pid, .exec_id = exec_id, .start_ns = start_ticks * NsPerClockTick()};
}

// Whether `image` is still the image its process runs (no exec since): the MR probes' answer
// (their process map marks an image ended at its exec). Given to whoever reads maps for an
// image (sys/process_access.h); unset where there are no probes (tools, fixture trees), where
// only the start time is checked.
using ImageCurrent = std::function<bool(const ImageKey&)>;

}  // namespace rdmascope::sys
