// Test helper: counts events of one process with sys::ProcessPerfCounters (the profiler's
// per-process mode) for SECONDS and prints "name value" (or "name unsupported: reason").
// usage: perf_process_counts PID SECONDS EVENT...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "sys/perf_events.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s PID SECONDS EVENT...\n", argv[0]);
    return 2;
  }
  std::vector<rdmascope::sys::PerfEventSpec> specs;
  for (int i = 3; i < argc; ++i) {
    auto spec = rdmascope::sys::ResolvePerfEvent("/sys", argv[i]);
    if (!spec) {
      std::fprintf(stderr, "%s: %s\n", argv[i], spec.error().c_str());
      return 2;
    }
    specs.push_back(*spec);
  }
  auto counters = rdmascope::sys::ProcessPerfCounters::Open(std::atoi(argv[1]), specs, "/proc");
  if (!counters) {
    std::fprintf(stderr, "%s\n", counters.error().c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[2])));
  for (const auto& event : counters->Read()) {
    if (event.value) {
      std::printf("%s %.0f\n", event.name.c_str(), *event.value);
    } else {
      std::printf("%s unsupported: %s\n", event.name.c_str(), event.reason.c_str());
    }
  }
  return 0;
}
