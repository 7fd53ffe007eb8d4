// What the collectors are built from: the host's file systems, which collectors run, and each
// one's options. `serve`, `check`, `doctor` and `profile` fill it from the same flags
// (cli/serve_flags.h), so that every command reads the host through one code path.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "bpf/mr_probe.h"
#include "collectors/ethtool.h"
#include "collectors/host_tuning.h"
#include "collectors/link.h"
#include "collectors/occupancy.h"
#include "collectors/perf.h"
#include "collectors/rdma.h"
#include "collectors/resources.h"
#include "collectors/verbs.h"
#include "collectors/workload.h"

namespace rdmascope {

struct CollectorsConfig {
  std::filesystem::path sysfs = "/sys";
  std::filesystem::path procfs = "/proc";
  // Resolved by FinishServeConfig from the defaults and the two maps below.
  std::map<std::string, bool> collector_enabled;
  std::map<std::string, bool> collector_explicit;  // --collector.NAME / --no-collector.NAME
  bool disable_default_collectors = false;
  bool probe_strict = false;  // an eBPF probe set that cannot attach is fatal
  EthtoolOptions ethtool;
  RdmaOptions rdma;
  ResourcesOptions resources;
  MrProbeOptions mr;
  OccupancyOptions occupancy;
  HostTuningOptions host;
  LinkOptions link;
  PerfOptions perf;
  VerbsOptions verbs;  // its libraries and binaries are the mr ones (--probe.library)
  WorkloadOptions workload;
  KubeletOptions workload_kubelet;  // --collector.workload.kubelet-* (the workload collector's)
};

}  // namespace rdmascope
