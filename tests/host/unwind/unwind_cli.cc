// The host test's driver (tests/host/dwarf_unwind.py): unwinds a capture file written by a
// test program (capture.h) against that live process with sys::DwarfUnwinder, and prints
//   method dwarf|frame-pointer|none
//   truncated 0|1
//   stop REASON
//   frame FUNCTION<TAB>OFFSET<TAB>MODULE<TAB>inlined|-     (innermost first)
//
//   unwind_cli PID CAPTURE_FILE [--frame-pointers] [--no-inline] [--max-frames N] [--bench N]
// --frame-pointers: the rbp walk alone (what a frame-pointer unwinder sees).
// --no-inline: symbolised without inline frames (the Symbolizer's default).
// --bench N: CPU time per unwind, cold (a new unwinder: maps, ELF files and CFI read) and
// warm (N unwinds on one unwinder), printed as "bench cold_us X warm_us Y".
#include <time.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sys/dwarf_unwinder.h"

namespace {

using rdmascope::sys::CapturedStack;
using rdmascope::sys::DwarfUnwinder;
using rdmascope::sys::UnwindLimits;
using rdmascope::sys::UnwoundStack;

double ThreadCpuMicros() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

int Bench(const CapturedStack& captured, long runs) {
  constexpr int kColdRuns = 20;
  double cold = 0;
  for (int i = 0; i < kColdRuns; ++i) {
    DwarfUnwinder fresh;
    const double start = ThreadCpuMicros();
    fresh.Unwind(captured);
    cold += ThreadCpuMicros() - start;
  }
  DwarfUnwinder warm;
  warm.Unwind(captured);
  const double start = ThreadCpuMicros();
  size_t frames = 0;
  for (long i = 0; i < runs; ++i) frames += warm.Unwind(captured).pcs.size();
  const double per_warm = (ThreadCpuMicros() - start) / static_cast<double>(runs);
  std::printf("bench cold_us %.1f warm_us %.2f frames %zu\n", cold / kColdRuns, per_warm,
              frames / static_cast<size_t>(runs));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s PID CAPTURE_FILE [--frame-pointers] [--no-inline] [--max-frames N] "
                 "[--bench N]\n",
                 argv[0]);
    return 2;
  }
  bool frame_pointers = false;
  bool inline_frames = true;
  long bench = 0;
  UnwindLimits limits;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--frame-pointers") == 0) {
      frame_pointers = true;
    } else if (std::strcmp(argv[i], "--no-inline") == 0) {
      inline_frames = false;
    } else if (std::strcmp(argv[i], "--max-frames") == 0 && i + 1 < argc) {
      limits.max_frames = std::stoul(argv[++i]);
    } else if (std::strcmp(argv[i], "--bench") == 0 && i + 1 < argc) {
      bench = std::stol(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  std::ifstream in(argv[2], std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  CapturedStack captured{.pid = static_cast<uint32_t>(std::stoul(argv[1]))};
  const size_t header = sizeof captured.regs;
  if (file.size() < header) {
    std::fprintf(stderr, "%s: %zu bytes, shorter than the registers\n", argv[2], file.size());
    return 2;
  }
  std::memcpy(captured.regs.data(), file.data(), header);
  captured.stack = std::span<const uint8_t>(file).subspan(header);
  if (bench > 0) return Bench(captured, bench);

  DwarfUnwinder unwinder;
  const UnwoundStack unwound = frame_pointers ? unwinder.UnwindFramePointers(captured, limits)
                                              : unwinder.Unwind(captured, limits);
  std::printf("method %s\ntruncated %d\nstop %s\n", rdmascope::sys::MethodName(unwound.method),
              unwound.truncated ? 1 : 0, unwound.stop_reason.c_str());
  for (const rdmascope::sys::Frame& frame :
       unwinder.Symbolize(captured.pid, unwound, inline_frames)) {
    std::printf("frame %s\t0x%llx\t%s\t%s\n",
                frame.function.empty() ? "??" : frame.function.c_str(),
                static_cast<unsigned long long>(frame.offset), frame.module.c_str(),
                frame.inlined ? "inlined" : "-");
  }
  return 0;
}
