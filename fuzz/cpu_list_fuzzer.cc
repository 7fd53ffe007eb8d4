// CPU lists as sysfs prints them (bitmap_print_list_to_buf: "0-3,8,10-11"): online CPUs,
// NUMA nodes' cpulist, PMU cpumasks, local_cpulist of NICs (sys/pmu_sysfs ParseCpuList).
#include <cstdlib>

#include "sys/pmu_sysfs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto cpus = rdmascope::sys::ParseCpuList(text);
  // A list of CPU numbers: none negative. Its size stays bounded by the text (a "0-4000000000"
  // must not allocate billions of entries).
  for (const int cpu : cpus) {
    if (cpu < 0) std::abort();
  }
  return 0;
}
