// The thresholds and switches of `rdmascope doctor`. Defaults are the figures the alert rules
// (rules/rdmascope.rules.yml) and the practitioners use, so doctor and the alerts agree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rdmascope::doctor {

enum class Format { kText, kJson, kHtml };

// serve's --doctor.lookback: what /doctor judges counter rates over. 15 minutes is the span the
// alert rules on the same counters decide over: RdmaCrcErrors, RdmaSymbolErrors and
// RdmaRetransmissions take rate[5m] for 10m (an alert firing now rests on the last 15 minutes),
// RdmaLinkFlapping 15m. So a person answering one of those alerts still finds the burst in
// doctor's report, and one older than any alert would consider is no longer reported.
inline constexpr double kDefaultLookbackSeconds = 15 * 60;

// infiniband-diags' suggested error thresholds, the figures its error_thresholds file ships
// (rdma-core infiniband-diags/etc/error_thresholds, read by ibqueryerrors/ibcheckerrors): a
// counter whose value since it was last cleared exceeds its threshold is reported.
std::map<std::string, double> DefaultIbaThresholds();

// How to reach a server behind TLS and authentication (the exporter's --web.config.file, a
// Prometheus' web config or its proxy): the CA its certificate chains to, a client certificate
// and key (mTLS), basic auth or a bearer token read from a file (never on the command line,
// where `ps` shows it).
struct ClientAccess {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool insecure_skip_verify = false;
  std::string username;
  std::string password_file;
  std::string bearer_token_file;
};

struct DoctorOptions {
  uint64_t window_ns = 10'000'000'000ULL;  // between the two collections; 0: one, no rates
  bool window_set = false;                 // --window given: passed on to /doctor as ?window=
  std::string exporter = "auto";           // URL, "auto" (the local serve if it answers), "none"
  uint64_t exporter_timeout_ns = 5'000'000'000ULL;  // the whole GET of /doctor
  ClientAccess exporter_access;  // an exporter behind --web.config.file (doctor/http_get.h)
  // --prometheus: the fleet's checks from a Prometheus (or Thanos, Mimir) instead of this host.
  std::string prometheus;                              // its URL; empty: this host
  std::string prometheus_selector;                     // matchers added to every query: cluster="a"
  std::string prometheus_job;                          // job="..." added to them
  std::string prometheus_cluster_label = "cluster";    // rules/generate.py --cluster-label
  uint64_t prometheus_timeout_ns = 30'000'000'000ULL;  // each query
  ClientAccess prometheus_access;
  double prometheus_time = 0;      // --prometheus.time: evaluation time (Unix seconds); 0: now
  int prometheus_concurrency = 4;  // queries in flight at once
  // --replay: captures (docs/capture.md) judged instead of this host; several: a fleet report.
  std::vector<std::string> replay;
  bool show_ok = false;  // a fleet report lists ok findings instead of counting them
  Format format = Format::kText;
  bool show_skipped = false;       // text: a block per skipped check instead of one summary line
  bool fail_on_crit_only = false;  // --fail-on=crit: warn exits 0
  int roce_priority = 3;           // RdmaPfcNotOnRocePriority's priority="3"
  // roce.dscp_trust: the DSCP RoCE is sent with when rdma_cm has no default ToS: 26, NVIDIA's
  // lossless RoCE configuration (ToS 106), as RdmaRoceDscpNotOnPfcPriority's dscp="26".
  int roce_dscp = 26;
  double min_netdev_mtu = 4200;            // RdmaNetdevMtuTooSmallForRoce
  double cq_ratio_warn = 1.5;              // RdmaCqUndersized: capacity < 1.5 x feeding WRs
  double cq_ratio_crit = 1.0;              // capacity below the feeding WRs: overflow is possible
  double retransmissions_per_second = 10;  // RdmaRetransmissions
  double remote_numa_ratio = 0.5;          // RdmaProcessOffNicNumaNode
  double memlock_warn_ratio = 0.8;         // pinned / RLIMIT_MEMLOCK
  double hugepage_unaligned_ratio = 0.5;   // RdmaMrNotOnHugePages
  double pinned_growth_bytes = 64 << 20;   // RdmaPinnedMemoryGrowing: delta over the hour
  std::map<std::string, double> iba_thresholds = DefaultIbaThresholds();
  // queues.qp_depth: send WRs needed = port rate x rtt / message size (docs/doctor.md). 80 us
  // is a fabric round trip plus queueing: with 4 KiB messages at 100 Gb/s it gives 245 WRs,
  // 256 rounded up to a power of two, the practitioners' figure.
  double rtt_seconds = 80e-6;
  double message_size_bytes = 4096;  // when the preload library measured none
  // queues.qp_depth, the other way: an RC send queue deeper than this many times the
  // recommended depth holds work-queue memory (and queueing delay) the link can never use.
  double qp_depth_excess = 16;
  double qps_per_core = 2;  // queues.qps_per_core: about 2 per core (object stores)
  // queues.srq_sizing: srq_limit = nodes x concurrent flows per node x 1.2; 0: not given
  double nodes = 0;
  double flows = 0;
  double srq_margin = 1.2;
  // memory.registration_churn: RdmaMrRegistrationChurn (> 100/s, deregistering > 90% of it)
  double registrations_per_second = 100;
  double churn_deregistration_ratio = 0.9;
};

}  // namespace rdmascope::doctor
