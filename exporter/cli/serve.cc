#include "cli/serve.h"

#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "cli/capture.h"
#include "cli/capture_exporter.h"
#include "collectors/build.h"
#include "collectors/capability_broker_metrics.h"
#include "collectors/mr.h"
#include "collectors/registry.h"
#include "collectors/workload.h"
#include "core/capabilities.h"
#include "core/capture.h"
#include "core/collector_runner.h"
#include "core/sd_notify.h"
#include "core/sysfs.h"
#include "core/version.h"
#include "doctor/local_snapshot.h"
#include "doctor/service.h"
#include "http/listen_address.h"
#include "http/server.h"
#include "sys/capability_broker.h"

namespace rdmascope {
namespace {

// Says at start-up what this host has and lacks, so that an empty section of /metrics is
// never a mystery.
void LogHostInventory(const ServeConfig& config) {
  const auto rdma_devices = sysfs::ListDirectory(config.sysfs / "class" / "infiniband");
  if (rdma_devices.empty()) {
    log::Info("no RDMA devices found; RDMA port metrics will be absent",
              {{"path", (config.sysfs / "class" / "infiniband").string()}});
  } else {
    std::string names;
    for (const auto& name : rdma_devices) names += (names.empty() ? "" : ",") + name;
    log::Info("RDMA devices found", {{"devices", names}});
  }
  const auto netdevs = sysfs::ListDirectory(config.sysfs / "class" / "net");
  log::Info("network interfaces found", {{"count", std::to_string(netdevs.size())}});
}

}  // namespace

// The perf collector holds one descriptor per event per CPU: a 256-CPU host needs more than
// the usual soft limit of 1024. Raise the soft limit to the hard one (as Go programs such as
// node_exporter do at start-up).
static void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    log::Debug("open file limit raised",
               {{"from", std::to_string(before)}, {"to", std::to_string(limit.rlim_cur)}});
  }
}

// What serving keeps, the broker's share included (--capabilities.keep, or what the enabled
// collectors need).
caps::CapabilitySet KeptWhileServing(const ServeConfig& config) {
  return config.capabilities_keep.value_or(caps::ServingNeeds(config.collector_enabled));
}

// The broker's share of what serving keeps: CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH.
caps::CapabilitySet BrokerShare(const ServeConfig& config) {
  // A replay reads no process of the host (the capture answers): nothing for a broker to do.
  if (!config.capability_broker || !config.replay.empty()) return {};
  caps::CapabilitySet share;
  for (const caps::Capability cap : KeptWhileServing(config)) {
    if (sys::BrokerCapabilities().contains(cap)) share.insert(cap);
  }
  return share;
}

// Started before the collectors (they are handed it) and before the drop (it takes its two
// capabilities from what `serve` was started with). Null when there is nothing for it to hold;
// `failed` when it should run and does not: then nobody holds those capabilities, and the
// collectors read what this process may (docs/security.md, "The capability broker").
std::shared_ptr<sys::CapabilityBroker> StartCapabilityBroker(ServeConfig& config, bool& failed) {
  failed = false;
  const caps::CapabilitySet share = BrokerShare(config);  // empty under --replay
  if (share.empty()) return nullptr;
  auto broker = sys::CapabilityBroker::Start("/proc/self/exe", share);
  if (!broker) {
    failed = true;
    log::Error(
        "capability broker cannot start: other users' processes are not read (their "
        "maps, namespaces, uverbs descriptors and ELF files)",
        {{"err", broker.error()}});
    return nullptr;
  }
  std::string refused;
  for (const auto& [layer, entered] : (*broker)->confinement()) {
    if (!entered) refused += (refused.empty() ? "" : ",") + layer;
  }
  log::Info("capability broker started", {{"pid", std::to_string((*broker)->pid())},
                                          {"holds", (*broker)->held()},
                                          {"refused", refused.empty() ? "none" : refused}});
  if ((*broker)->held() != caps::Names(share)) {
    log::Warn(
        "capability broker lacks capabilities serve was not started with: other users' "
        "processes it needs them for are not read",
        {{"wanted", caps::Names(share)}, {"holds", (*broker)->held()}});
  }
  config.mr.privileged = *broker;
  config.occupancy.privileged = *broker;
  return *broker;
}

// Once the collectors are built (probes attached, perf events open), keeps only the
// capabilities serving needs (docs/security.md, "Capabilities"), less what the capability
// broker holds. Capabilities are per thread
// and a thread starts with its creator's: this runs before the /doctor thread and the HTTP
// server's threads exist (caps::DropTo refuses otherwise). Failing to drop is fatal: serving
// with more privilege than documented is worse than not serving.
void DropPrivileges(const ServeConfig& config) {
  caps::CapabilitySet keep = KeptWhileServing(config);
  for (const caps::Capability cap : BrokerShare(config)) keep.erase(cap);
  const auto report = caps::DropTo(keep);
  if (!report) throw std::runtime_error("cannot drop capabilities: " + report.error());
  if (!report->not_permitted.empty()) {
    log::Warn("capabilities to keep were not held at start-up; what needs them is missing",
              {{"missing", caps::Names(report->not_permitted)}});
  }
  log::Info("capabilities dropped",
            {{"kept", caps::Names(report->kept)},
             {"bounding_set", report->bounding_set_cleared ? "kept only" : "unchanged"},
             {"no_new_privs", "1"}});
}

// The web config's effect, said once at start-up (exporter-toolkit logs "TLS is enabled").
void LogWebSecurity(const WebOptions& web) {
  if (!web.security) {
    log::Info("TLS is disabled, no authentication: see --web.config.file");
    return;
  }
  const web::WebConfig& security = *web.security;
  log::Info(security.tls.enabled ? "TLS is enabled" : "TLS is disabled",
            {{"basic_auth_users", std::to_string(security.basic_auth_users.size())},
             {"headers", std::to_string(security.headers.size())},
             {"config_file", web.config_file}});
  if (security.rate_limit.limits()) {
    // exporter-toolkit's "Rate Limiter is enabled." line.
    char interval[32];
    std::snprintf(interval, sizeof interval, "%g",
                  static_cast<double>(security.rate_limit.interval_ns) / 1e9);
    log::Info("rate limiter is enabled", {{"burst", std::to_string(security.rate_limit.burst)},
                                          {"interval_seconds", interval}});
  }
  for (const std::string& note : security.notes) log::Info(note);
}

// How often --web.config.file and the files it names are compared with what is loaded.
constexpr int kWebConfigPollSeconds = 5;

// Waits for SIGINT or SIGTERM and returns it. Meanwhile, with --web.config.file, re-reads the
// file on SIGHUP and when it or a certificate, key or CA file it names changes (exporter-
// toolkit re-reads it on every connection): a valid new file replaces the old one; a bad one
// is logged, once per change, and the old one keeps serving.
int WaitForShutdown(const sigset_t& signals, const WebOptions& options, HttpServer& server) {
  std::shared_ptr<const web::WebConfig> current = options.security;
  std::string fingerprint =
      current ? web::Fingerprint(options.config_file, *current) : std::string();
  for (;;) {
    timespec tick{kWebConfigPollSeconds, 0};
    const int signal =
        current ? sigtimedwait(&signals, nullptr, &tick) : sigwaitinfo(&signals, nullptr);
    if (signal == SIGINT || signal == SIGTERM) return signal;
    if (!current) continue;  // no file to re-read; SIGHUP is ignored
    const bool hangup = signal == SIGHUP;
    if (!hangup && (signal >= 0 || errno != EAGAIN ||
                    web::Fingerprint(options.config_file, *current) == fingerprint)) {
      continue;
    }
    // systemd (Type=notify) holds `systemctl reload` until READY=1, whatever the outcome.
    sd::NotifyOrWarn(sd::ReloadingState());
    auto loaded = web::LoadWebConfig(options.config_file);
    fingerprint = web::Fingerprint(options.config_file, loaded ? *loaded : *current);
    if (!loaded) {
      log::Error("web config not reloaded, the previous one stays in force",
                 {{"err", loaded.error()}});
      sd::NotifyOrWarn("READY=1");
      continue;
    }
    auto next = std::make_shared<const web::WebConfig>(std::move(*loaded));
    try {
      server.Reload(next);
    } catch (const std::exception& e) {
      log::Error("web config not reloaded, the previous one stays in force", {{"err", e.what()}});
      sd::NotifyOrWarn("READY=1");
      continue;
    }
    current = std::move(next);
    sd::NotifyOrWarn("READY=1");
    WebOptions reloaded = options;
    reloaded.security = current;
    log::Info("web config reloaded", {{"trigger", hangup ? "SIGHUP" : "file change"}});
    LogWebSecurity(reloaded);
  }
}

int RunServe(const ServeConfig& config) {
  if (config.web.config_check) {
    // FinishServeConfig has loaded and validated the file; an invalid one never gets here.
    std::printf("%s SUCCESS\n", config.web.config_file.c_str());
    return 0;
  }
  // Two arenas are plenty for a few HTTP threads and keep RSS small on many-core hosts.
  mallopt(M_ARENA_MAX, 2);
  log::SetLevel(config.log_level);
  log::Info("starting rdmascope", {{"version", kVersion}, {"revision", kRevision}});
  RaiseOpenFileLimit();
  // No core dump of the exporter (it holds tenants' stack copies and parsed files) and no
  // ptrace of it by the user it runs as: a non-dumpable process's /proc/PID files belong to
  // root and ptrace_may_access refuses without CAP_SYS_PTRACE (kernel/ptrace.c
  // __ptrace_may_access, get_dumpable). Capability changes do not reset it; an execve would.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    throw std::runtime_error(std::string("prctl(PR_SET_DUMPABLE, 0): ") + std::strerror(errno));
  }

  // Block the signals before any thread starts so that only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // re-read --web.config.file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Bound before the collectors load their probes: a taken port or a bad address fails here
  // at once (HttpServer's constructor explains why that matters), and owned by the server.
  const int listen_fd = ListenOn(config.web.listen_address);
  ServeConfig serving = config;
  // Before any thread (the broker, the collectors'): the capture is the host from now on.
  if (!serving.replay.empty()) StartReplay(serving);
  bool broker_failed = false;
  const std::shared_ptr<sys::CapabilityBroker> broker =
      StartCapabilityBroker(serving, broker_failed);
  std::vector<NamedCollector> collectors = BuildCollectors(serving);
  std::map<std::string, std::string> probe_errors = doctor::ProbeErrors(collectors);  // for /doctor
  LogHostInventory(config);
  // Loading the BPF probes parses the kernel's BTF (megabytes, freed right after): hand the
  // freed memory back so the exporter's steady RSS is what it uses.
  malloc_trim(0);
  DropPrivileges(config);

  auto runner = std::make_shared<CollectorRunner>(std::move(collectors),
                                                  BuildInfo{kVersion, kRevision}, config.procfs);
  if (broker || broker_failed) {
    runner->AddSelfMetrics(
        [broker](MetricSet& out) { AddCapabilityBrokerMetrics(broker.get(), out); });
  }
  LogWebSecurity(config.web);
  DebugRoutes routes = runner->CollectDebugRoutes();
  // The capture's answers of the exporter that ran where it was taken (mr is off here).
  if (!serving.replay.empty()) AddCapturedExporterRoutes(routes);
  // Declared before the server, so destroyed after it: no /doctor request outlives it.
  doctor::Service doctor(runner, std::move(probe_errors), 60, config.doctor_lookback_seconds);
  doctor.AddRoute(routes);
  HttpServer server(config.web, listen_fd, runner, std::move(routes));
  log::Info("listening", {{"address", config.web.listen_address},
                          {"port", std::to_string(server.port())},
                          {"telemetry_path", config.web.telemetry_path}});
  // Bound, probes loaded, capabilities dropped, the server's threads answering: with
  // Type=notify, `systemctl start` returns now and not before.
  sd::NotifyOrWarn("READY=1\nSTATUS=listening on " + config.web.listen_address);

  const int received = WaitForShutdown(signals, config.web, server);
  sd::NotifyOrWarn("STOPPING=1");
  log::Info("shutting down", {{"signal", strsignal(received)}});
  return 0;
}

int RunCheck(ServeConfig config) {
  log::SetLevel(config.log_level);
  RaiseOpenFileLimit();
  if (!config.replay.empty()) StartReplay(config);
  // One pass: the link collector reads its modules in it rather than on a background thread
  // whose first reading the pass would not wait for ("first reading under way").
  config.link.refresh_interval = std::chrono::nanoseconds(0);
  config.link.static_refresh_interval = std::chrono::nanoseconds(0);
  std::vector<std::string> probe_errors;
  std::vector<NamedCollector> collectors;
  for (NamedCollector& entry : BuildCollectors(config)) {
    if (const std::string error = entry.collector->ProbeError(); !error.empty()) {
      probe_errors.push_back(entry.name + ": " + error);
    }
    collectors.push_back(std::move(entry));
  }
  CollectorRunner runner(std::move(collectors), BuildInfo{kVersion, kRevision}, config.procfs);
  if (capture::Session* session = capture::Active()) session->NextSample();
  runner.Collect();
  bool failed = false;
  std::printf("%-10s %-8s %7s  %s\n", "COLLECTOR", "STATE", "SERIES", "DETAIL");
  for (const CollectorState& state : runner.States()) {
    failed |= state.health == CollectorHealth::kFailed;
    std::printf("%-10s %-8s %7zu  %s\n", state.name.c_str(), HealthName(state.health), state.series,
                state.detail.c_str());
  }
  for (const std::string& error : probe_errors)
    std::printf("probe not attached: %s\n", error.c_str());
  return failed ? 1 : 0;
}

}  // namespace rdmascope
