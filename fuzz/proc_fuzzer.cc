// /proc files (the same bytes through each parser): /proc/<pid>/status VmPin, /proc/<pid>/limits
// "Max locked memory", /proc/meminfo MemTotal (collectors/pinned_memory), /proc/<pid>/stat
// (core/process_metrics: comm with spaces and parentheses, fields by number), /proc/<pid>/cgroup
// (sys/cgroup_workload: the workload a process runs for).
#include <cmath>
#include <cstdlib>

#include "collectors/pinned_memory.h"
#include "core/process_metrics.h"
#include "fuzz_input.h"
#include "sys/cgroup_workload.h"

using namespace rdmascope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input input(data, size);
  const size_t field = input.Byte();
  const std::string_view text = input.RestText();
  ParseVmPinBytes(text);
  ParseLockedMemoryLimit(text);
  ParseMemTotalBytes(text);
  ParseStartTicks(text);
  ParseStatField(text, field);
  // Every value is cut from the text (a container ID after its "runtime://" prefix; a pod
  // UID may have had its "_" turned into "-").
  const sys::Workload workload = sys::WorkloadOfProcCgroup(text);
  std::string_view container = workload.container_id;
  if (const size_t scheme = container.find("://"); scheme != std::string_view::npos) {
    container.remove_prefix(scheme + 3);
  }
  for (const std::string_view value :
       {container, std::string_view(workload.slurm_job_id),
        std::string_view(workload.slurm_step_id), std::string_view(workload.systemd_unit)}) {
    if (text.find(value) == std::string_view::npos) std::abort();
  }
  if (!workload.slurm_step_id.empty() && workload.slurm_job_id.empty()) std::abort();
  if (const auto stat = ParseProcessStat(text, 1.7e9, 100, 4096)) {
    if (!std::isfinite(stat->cpu_seconds) || stat->cpu_seconds < 0 ||
        !std::isfinite(stat->start_time_seconds)) {
      std::abort();
    }
  }
  return 0;
}
