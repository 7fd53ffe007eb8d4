// The host test's driver (tests/host/dwarf_unwind.py): unwinds a capture file written by a
// test program (capture.h) against that live process with sys::DwarfUnwinder, and prints
//   method dwarf|frame-pointer|none
//   truncated 0|1
//   stop REASON
//   frame FUNCTION<TAB>OFFSET<TAB>MODULE<TAB>inlined|-     (innermost first)
//
//   unwind_cli PID CAPTURE_FILE [--also PID CAPTURE_FILE] [--stats] [--frame-pointers]
//              [--no-inline] [--max-frames N] [--bench N [--sandbox WORKER]]
// --also: then a second process's capture with the same unwinder (and ELF cache), printed
// as the same lines with "also-" before each key ("also-method dwarf", "also-frame ...").
// --stats: the ELF cache's figures at the end, "elf entries N unused N bytes N hits N
// misses N declined N".
// --frame-pointers: the rbp walk alone (what a frame-pointer unwinder sees).
// --no-inline: symbolised without inline frames (the Symbolizer's default).
// --bench N: CPU time per unwind, cold (a new unwinder: maps, ELF files and CFI read) and
// warm (N unwinds on one unwinder), printed as "bench cold_us X warm_us Y frames F"; with
// --also, the first unwind of the second process too, after the first process's on the same
// unwinder (its files shared) and on an unwinder of its own (nothing shared), appended as
// "second_shared_us S second_unshared_us U"; then the same in wall time ("bench_wall ...").
// --sandbox WORKER: the bench through the sandboxed worker (sys/unwind_client.h; WORKER: the
// rdmascope binary), each unwinder's worker started before its timing; compare bench_wall.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sys/dwarf_unwinder.h"
#include "sys/unwind_client.h"

namespace {

using rdmascope::sys::CapturedStack;
using rdmascope::sys::DwarfUnwinder;
using rdmascope::sys::StackUnwinder;
using rdmascope::sys::UnwindLimits;
using rdmascope::sys::UnwoundStack;

// A capture file's registers and stack, for `pid`.
struct Capture {
  std::vector<uint8_t> file;
  CapturedStack captured;
};

// The image `pid` runs now: its start time from /proc (no probes here to know its exec
// generation, and none is needed: the process is stopped while it is unwound).
rdmascope::sys::ImageKey ImageOf(uint32_t pid) {
  rdmascope::sys::LocalProcessAccess access;
  return rdmascope::sys::ImageOfStartTicks(pid, access.StartTicks(pid).value_or(0));
}

std::optional<Capture> ReadCapture(const char* pid, const char* path) {
  std::ifstream in(path, std::ios::binary);
  Capture capture{.file = std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                                               std::istreambuf_iterator<char>()),
                  .captured = {.image = ImageOf(static_cast<uint32_t>(std::stoul(pid)))}};
  const size_t header = sizeof capture.captured.regs;
  if (capture.file.size() < header) {
    std::fprintf(stderr, "%s: %zu bytes, shorter than the registers\n", path, capture.file.size());
    return std::nullopt;
  }
  std::memcpy(capture.captured.regs.data(), capture.file.data(), header);
  capture.captured.stack = std::span<const uint8_t>(capture.file).subspan(header);
  return capture;
}

double ThreadCpuMicros() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

double WallMicros() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The unwinders compared: in this process, or in the sandboxed worker (`--sandbox WORKER`:
// the rdmascope binary, started before any timing).
using Factory = std::function<std::unique_ptr<StackUnwinder>()>;

// Microseconds of one unwind: this thread's CPU time and the wall time (the worker's CPU is
// not this thread's: with --sandbox only the wall time tells).
struct Timed {
  double cpu = 0;
  double wall = 0;
  Timed& operator+=(const Timed& other) {
    cpu += other.cpu;
    wall += other.wall;
    return *this;
  }
};

Timed TimedUnwind(StackUnwinder& unwinder, const CapturedStack& captured) {
  const double cpu = ThreadCpuMicros();
  const double wall = WallMicros();
  unwinder.Unwind(captured, {});
  return {.cpu = ThreadCpuMicros() - cpu, .wall = WallMicros() - wall};
}

int Bench(const Factory& make, const CapturedStack& captured, const CapturedStack* also,
          long runs) {
  constexpr int kColdRuns = 20;
  Timed cold;
  Timed shared;
  Timed unshared;
  for (int i = 0; i < kColdRuns; ++i) {
    auto fresh = make();
    cold += TimedUnwind(*fresh, captured);
    if (also == nullptr) continue;
    shared += TimedUnwind(*fresh, *also);
    // The first process unwound first here too, so that both figures follow the same work.
    auto first = make();
    first->Unwind(captured, {});
    auto own = make();
    unshared += TimedUnwind(*own, *also);
  }
  auto warm = make();
  warm->Unwind(captured, {});
  const double start_cpu = ThreadCpuMicros();
  const double start_wall = WallMicros();
  size_t frames = 0;
  for (long i = 0; i < runs; ++i) frames += warm->Unwind(captured, {}).pcs.size();
  const double warm_cpu = (ThreadCpuMicros() - start_cpu) / static_cast<double>(runs);
  const double warm_wall = (WallMicros() - start_wall) / static_cast<double>(runs);
  std::printf("bench cold_us %.1f warm_us %.2f frames %zu", cold.cpu / kColdRuns, warm_cpu,
              frames / static_cast<size_t>(runs));
  if (also != nullptr) {
    std::printf(" second_shared_us %.1f second_unshared_us %.1f", shared.cpu / kColdRuns,
                unshared.cpu / kColdRuns);
  }
  std::printf("\nbench_wall cold_us %.1f warm_us %.2f", cold.wall / kColdRuns, warm_wall);
  if (also != nullptr) {
    std::printf(" second_shared_us %.1f second_unshared_us %.1f", shared.wall / kColdRuns,
                unshared.wall / kColdRuns);
  }
  std::printf("\n");
  return 0;
}

void Print(DwarfUnwinder& unwinder, const CapturedStack& captured, const UnwindLimits& limits,
           bool frame_pointers, bool inline_frames, const char* prefix) {
  const UnwoundStack unwound = frame_pointers ? unwinder.UnwindFramePointers(captured, limits)
                                              : unwinder.Unwind(captured, limits);
  std::printf("%smethod %s\n%struncated %d\n%sstop %s\n", prefix,
              rdmascope::sys::MethodName(unwound.method), prefix, unwound.truncated ? 1 : 0, prefix,
              unwound.stop_reason.c_str());
  for (const rdmascope::sys::Frame& frame :
       unwinder.Symbolize(captured.image, unwound, inline_frames)) {
    std::printf("%sframe %s\t0x%llx\t%s\t%s\n", prefix,
                frame.function.empty() ? "??" : frame.function.c_str(),
                static_cast<unsigned long long>(frame.offset), frame.module.c_str(),
                frame.inlined ? "inlined" : "-");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: %s PID CAPTURE_FILE [--also PID CAPTURE_FILE] [--stats] "
        "[--frame-pointers] [--no-inline] [--max-frames N] [--bench N [--sandbox WORKER]]\n",
        argv[0]);
    return 2;
  }
  bool frame_pointers = false;
  bool inline_frames = true;
  bool stats = false;
  long bench = 0;
  const char* sandbox = nullptr;
  const char* also_pid = nullptr;
  const char* also_path = nullptr;
  UnwindLimits limits;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--frame-pointers") == 0) {
      frame_pointers = true;
    } else if (std::strcmp(argv[i], "--no-inline") == 0) {
      inline_frames = false;
    } else if (std::strcmp(argv[i], "--stats") == 0) {
      stats = true;
    } else if (std::strcmp(argv[i], "--also") == 0 && i + 2 < argc) {
      also_pid = argv[++i];
      also_path = argv[++i];
    } else if (std::strcmp(argv[i], "--max-frames") == 0 && i + 1 < argc) {
      limits.max_frames = std::stoul(argv[++i]);
    } else if (std::strcmp(argv[i], "--bench") == 0 && i + 1 < argc) {
      bench = std::stol(argv[++i]);
    } else if (std::strcmp(argv[i], "--sandbox") == 0 && i + 1 < argc) {
      sandbox = argv[++i];
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  const std::optional<Capture> capture = ReadCapture(argv[1], argv[2]);
  std::optional<Capture> also;
  if (also_pid != nullptr) also = ReadCapture(also_pid, also_path);
  if (!capture || (also_pid != nullptr && !also)) return 2;
  if (bench > 0) {
    Factory make = [] { return std::make_unique<DwarfUnwinder>(); };
    if (sandbox != nullptr) {
      make = [sandbox] {
        rdmascope::sys::UnwindClientOptions options;
        options.program = sandbox;
        auto client = std::make_unique<rdmascope::sys::UnwindClient>(
            std::make_shared<rdmascope::sys::LocalProcessAccess>(), options);
        client->Start();  // not timed: the exporter starts its worker once
        return std::unique_ptr<StackUnwinder>(std::move(client));
      };
    }
    return Bench(make, capture->captured, also ? &also->captured : nullptr, bench);
  }

  DwarfUnwinder unwinder;
  Print(unwinder, capture->captured, limits, frame_pointers, inline_frames, "");
  if (also) Print(unwinder, also->captured, limits, frame_pointers, inline_frames, "also-");
  if (stats) {
    const rdmascope::sys::ElfCacheStats elf = unwinder.elf_stats();
    std::printf(
        "elf entries %llu unused %llu bytes %llu hits %llu misses %llu declined %llu\n",
        static_cast<unsigned long long>(elf.entries), static_cast<unsigned long long>(elf.unused),
        static_cast<unsigned long long>(elf.bytes), static_cast<unsigned long long>(elf.hits),
        static_cast<unsigned long long>(elf.misses), static_cast<unsigned long long>(elf.declined));
  }
  return 0;
}
