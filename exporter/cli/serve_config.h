// Everything `rdmascope serve` is configured with, filled from flags.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bpf/mr_probe.h"
#include "collectors/ethtool.h"
#include "collectors/host_tuning.h"
#include "collectors/occupancy.h"
#include "collectors/perf.h"
#include "collectors/rdma.h"
#include "collectors/resources.h"
#include "collectors/verbs.h"
#include "collectors/workload.h"
#include "core/capabilities.h"
#include "core/log.h"
#include "doctor/options.h"
#include "web/web_config.h"

namespace rdmascope {

// The documented default port; see docs/configuration.md.
inline constexpr int kDefaultPort = 9879;

struct WebOptions {
  std::string listen_address = ":" + std::to_string(kDefaultPort);
  std::string telemetry_path = "/metrics";
  int threads = 4;                // libmicrohttpd's thread pool (each thread an epoll loop)
  int idle_timeout_seconds = 60;  // a connection silent this long is closed (keep-alive or not)
  int max_connections = 1024;     // open connections at most; more wait in the listen queue
  // Scrapes running at once at most (--web.max-requests, node_exporter's default); past it 503.
  // 0: no limit. The thread pool bounds them to `threads` as well (docs/architecture.md).
  int max_requests = 40;
  // --web.config.file (exporter-toolkit's format): TLS, basic auth, headers. Loaded and
  // validated by FinishServeConfig; null without the flag (plain HTTP, no auth).
  std::string config_file;
  std::shared_ptr<const web::WebConfig> security;
  bool config_check = false;  // --web.config.check: validate the file and exit
};

struct ServeConfig {
  WebOptions web;
  std::filesystem::path sysfs = "/sys";
  std::filesystem::path procfs = "/proc";
  log::Level log_level = log::Level::kInfo;
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
  PerfOptions perf;
  VerbsOptions verbs;  // its libraries and binaries are the mr ones (--probe.library)
  WorkloadOptions workload;
  KubeletOptions workload_kubelet;  // --collector.workload.kubelet-* (the workload collector's)
  // --doctor.lookback: what /doctor judges counter rates over (docs/doctor.md, "History mode").
  double doctor_lookback_seconds = doctor::kDefaultLookbackSeconds;
  // --capabilities.keep: what `serve` keeps once the collectors are built. Unset: what the
  // enabled collectors need while serving (caps::ServingNeeds).
  std::optional<caps::CapabilitySet> capabilities_keep;
  // --[no-]capabilities.broker: CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH of the kept set go to
  // the capability broker (sys/capability_broker.h) rather than stay in the serving process.
  bool capability_broker = true;
};

}  // namespace rdmascope
