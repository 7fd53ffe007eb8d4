#include "cli/serve.h"

#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "collectors/registry.h"
#include "core/collector_runner.h"
#include "core/sysfs.h"
#include "core/version.h"
#include "http/server.h"

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

// The enabled collectors, constructed (probes attached, counters opened). With
// --probe.strict, a probe set that could not attach is fatal.
std::vector<NamedCollector> BuildCollectors(const ServeConfig& config) {
  std::vector<NamedCollector> collectors;
  for (const CollectorEntry& entry : AllCollectors()) {
    const std::string name(entry.name);
    const bool enabled = config.collector_enabled.at(name);
    log::Info("collector", {{"name", name}, {"enabled", enabled ? "true" : "false"}});
    if (!enabled) continue;
    auto collector = entry.create(config);
    if (const std::string error = collector->ProbeError(); config.probe_strict && !error.empty()) {
      throw std::runtime_error("--probe.strict: the " + name + " probes did not attach: " + error);
    }
    collectors.push_back({name, std::move(collector)});
  }
  return collectors;
}

int RunServe(const ServeConfig& config) {
  // Two arenas are plenty for a few HTTP threads and keep RSS small on many-core hosts.
  mallopt(M_ARENA_MAX, 2);
  log::SetLevel(config.log_level);
  log::Info("starting rdmascope", {{"version", kVersion}, {"revision", kRevision}});
  RaiseOpenFileLimit();

  // Block the signals before any thread starts so that only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::vector<NamedCollector> collectors = BuildCollectors(config);
  LogHostInventory(config);
  // Loading the BPF probes parses the kernel's BTF (megabytes, freed right after): hand the
  // freed memory back so the exporter's steady RSS is what it uses.
  malloc_trim(0);

  auto runner = std::make_shared<CollectorRunner>(std::move(collectors),
                                                  BuildInfo{kVersion, kRevision}, config.procfs);
  HttpServer server(config.web, runner, runner->CollectDebugRoutes());
  log::Info("listening", {{"address", config.web.listen_address},
                          {"port", std::to_string(server.port())},
                          {"telemetry_path", config.web.telemetry_path}});

  int received = 0;
  while (sigwait(&signals, &received) != 0) {
  }
  log::Info("shutting down", {{"signal", strsignal(received)}});
  return 0;
}

int RunCheck(const ServeConfig& config) {
  log::SetLevel(config.log_level);
  RaiseOpenFileLimit();
  std::vector<std::string> probe_errors;
  std::vector<NamedCollector> collectors;
  for (NamedCollector& entry : BuildCollectors(config)) {
    if (const std::string error = entry.collector->ProbeError(); !error.empty()) {
      probe_errors.push_back(entry.name + ": " + error);
    }
    collectors.push_back(std::move(entry));
  }
  CollectorRunner runner(std::move(collectors), BuildInfo{kVersion, kRevision}, config.procfs);
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
