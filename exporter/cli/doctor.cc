#include "cli/doctor.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include "bpf/mr_probe.h"
#include "cli/http_get.h"
#include "cli/serve.h"
#include "core/collector_runner.h"
#include "core/version.h"
#include "doctor/checks.h"
#include "doctor/query.h"
#include "doctor/report.h"

namespace rdmascope {
namespace {

using doctor::CollectorOutcome;
using doctor::Snapshot;

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One run of every collector, with each one's outcome.
Snapshot Collect(const CollectorRunner& runner,
                 const std::map<std::string, std::string>& probe_errors) {
  const double seconds = MonotonicSeconds();
  const auto families = runner.Collect();
  std::map<std::string, CollectorOutcome> outcomes;
  for (const CollectorState& state : runner.States()) {
    CollectorOutcome& outcome = outcomes[state.name];
    outcome.failed = state.health == CollectorHealth::kFailed;
    outcome.no_data = state.health == CollectorHealth::kNoData;
    outcome.detail = state.detail;
    if (const auto it = probe_errors.find(state.name); it != probe_errors.end()) {
      outcome.probe_error = it->second;
    }
  }
  return Snapshot(families, seconds, std::move(outcomes));
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string NowRfc3339() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

bool ColourWanted() {
  const char* no_colour = std::getenv("NO_COLOR");  // https://no-color.org: set and not empty
  return isatty(STDOUT_FILENO) == 1 && (no_colour == nullptr || *no_colour == '\0');
}

void AddThreshold(CLI::App& doctor, const std::string& flag, double& value,
                  const std::string& help) {
  doctor.add_option(flag, value, help)->capture_default_str()->group("Doctor thresholds");
}

}  // namespace

void AddDoctorFlags(CLI::App& doctor, doctor::DoctorOptions& options) {
  doctor
      .add_option_function<std::string>(
          "--window",
          [&options](const std::string& text) {
            options.window_ns = *ParseDurationNs(text);
            options.window_set = true;
          },
          "Time between the two collections that turn counters into rates (Prometheus duration: "
          "10s, 1m; 0s collects once and skips the counter checks). Default 10s")
      ->check([](const std::string& text) {
        return ParseDurationNs(text) ? std::string()
                                     : "not a duration like 10s, 1m or 500ms: " + text;
      })
      ->group("Doctor");
  doctor
      .add_option("--exporter", options.exporter,
                  "URL of a running `rdmascope serve` whose /doctor report (with history: MR "
                  "leaks, pinned-memory growth, counter rates since it started) is shown; "
                  "default: " +
                      std::string(kDefaultExporterUrl) +
                      " if it answers; none: always collect here (history checks skipped)")
      ->default_str("auto")
      ->group("Doctor");
  doctor
      .add_option_function<std::string>(
          "--exporter.timeout",
          [&options](const std::string& text) {
            options.exporter_timeout_ns = *ParseDurationNs(text);
          },
          "Longest wait for the exporter's /doctor answer before collecting here instead "
          "(Prometheus duration)")
      ->check([](const std::string& text) {
        const auto ns = ParseDurationNs(text);
        return ns && *ns > 0 ? std::string() : "not a positive duration like 5s: " + text;
      })
      ->default_str("5s")
      ->group("Doctor");
  doctor
      .add_option_function<std::string>(
          "--format",
          [&options](const std::string& format) {
            options.format = format == "json" ? doctor::Format::kJson : doctor::Format::kText;
          },
          "Output: text (for a person) or json (schema_version 1, docs/doctor.md)")
      ->check(CLI::IsMember({"text", "json"}))
      ->default_str("text")
      ->group("Doctor");
  doctor
      .add_flag("--show-skipped", options.show_skipped,
                "Text output: print every skipped check with its reason (default: one line "
                "naming them; --log.level=debug does the same)")
      ->group("Doctor");
  doctor
      .add_option_function<std::string>(
          "--fail-on",
          [&options](const std::string& level) { options.fail_on_crit_only = level == "crit"; },
          "Lowest severity that makes the exit code non-zero: warn (1 on warn, 2 on crit) or "
          "crit (warn exits 0)")
      ->check(CLI::IsMember({"warn", "crit"}))
      ->default_str("warn")
      ->group("Doctor");
  doctor
      .add_option("--doctor.roce-priority", options.roce_priority,
                  "Priority (0-7) RoCE traffic runs on: PFC must be on for it")
      ->capture_default_str()
      ->check(CLI::Range(0, 7))
      ->group("Doctor thresholds");
  AddThreshold(doctor, "--doctor.min-netdev-mtu", options.min_netdev_mtu,
               "Smallest netdev MTU of a RoCE interface (4096-byte RDMA payloads need about 4200)");
  AddThreshold(doctor, "--doctor.cq-ratio-warn", options.cq_ratio_warn,
               "CQ capacity below this multiple of the WRs feeding it warns");
  AddThreshold(doctor, "--doctor.cq-ratio-crit", options.cq_ratio_crit,
               "CQ capacity below this multiple of the WRs feeding it is critical");
  AddThreshold(doctor, "--doctor.retransmissions-per-second", options.retransmissions_per_second,
               "Retransmission events per second per port above which doctor warns");
  AddThreshold(doctor, "--doctor.remote-numa-ratio", options.remote_numa_ratio,
               "Share of a process's RDMA threads on another NUMA node than its NIC's above "
               "which doctor warns");
  AddThreshold(doctor, "--doctor.memlock-warn-ratio", options.memlock_warn_ratio,
               "Pinned memory as a share of RLIMIT_MEMLOCK from which doctor warns (critical "
               "at the limit)");
  AddThreshold(doctor, "--doctor.pinned-growth-bytes", options.pinned_growth_bytes,
               "Growth of a process's pinned memory (VmPin) over the exporter's kept history "
               "(at most an hour) above which doctor warns");
  AddThreshold(doctor, "--doctor.hugepage-unaligned-ratio", options.hugepage_unaligned_ratio,
               "Share of registered bytes not 2 MiB-aligned above which doctor reports (info)");
  doctor
      .add_option_function<std::string>(
          "--doctor.rtt",
          [&options](const std::string& text) {
            options.rtt_seconds = *doctor::ParseRttSeconds(text);
          },
          "Round trip including queueing that a QP's send queue must cover (80us, 150us, 1ms): "
          "queues.qp_depth wants max_send_wr >= port rate x rtt / message size")
      ->check([](const std::string& text) {
        return doctor::ParseRttSeconds(text) ? std::string()
                                             : "not a positive duration like 80us or 1ms: " + text;
      })
      ->default_str("80us")
      ->group("Doctor thresholds");
  AddThreshold(doctor, "--doctor.message-size", options.message_size_bytes,
               "Bytes per send WR for queues.qp_depth when the preload library measured none");
  AddThreshold(doctor, "--doctor.qp-depth-excess", options.qp_depth_excess,
               "queues.qp_depth reports (info) an RC send queue deeper than this many times the "
               "recommended depth");
  AddThreshold(doctor, "--doctor.qps-per-core", options.qps_per_core,
               "Connected QPs per online CPU below which queues.qps_per_core reports (info)");
  AddThreshold(doctor, "--doctor.nodes", options.nodes,
               "Nodes the application exchanges messages with (queues.srq_sizing; 0: unknown)");
  AddThreshold(doctor, "--doctor.flows", options.flows,
               "Average concurrent flows per node (queues.srq_sizing: limit and depth >= nodes "
               "x flows x 1.2; 0: unknown)");
  AddThreshold(doctor, "--doctor.registrations-per-second", options.registrations_per_second,
               "Registrations per second (nearly all deregistered again) above which "
               "memory.registration_churn warns");
  doctor
      .add_option_function<std::vector<std::string>>(
          "--doctor.iba-threshold",
          [&options](const std::vector<std::string>& items) {
            for (const std::string& item : items) {
              const auto equals = item.find('=');
              options.iba_thresholds[item.substr(0, equals)] = std::stod(item.substr(equals + 1));
            }
          },
          "NAME=N: threshold of an IBA port error counter, infiniband-diags' names and "
          "defaults (SymbolErrorCounter=10, LinkDownedCounter=10, PortXmitDiscards=100, "
          "PortXmitWait=1000...; docs/doctor.md); repeatable")
      ->check([](const std::string& item) -> std::string {
        const auto equals = item.find('=');
        if (equals == std::string::npos) return "expected NAME=N: " + item;
        if (!doctor::DefaultIbaThresholds().contains(item.substr(0, equals))) {
          return "unknown IBA counter " + item.substr(0, equals);
        }
        try {
          size_t used = 0;
          const double value = std::stod(item.substr(equals + 1), &used);
          if (used != item.size() - equals - 1 || value < 0) throw std::invalid_argument(item);
        } catch (const std::exception&) {
          return "not a non-negative number: " + item.substr(equals + 1);
        }
        return "";
      })
      ->group("Doctor thresholds");
}

void FinishDoctorOptions(const doctor::DoctorOptions& options) {
  if (!(options.message_size_bytes > 0)) {
    throw CLI::ValidationError("--doctor.message-size", "must be above 0");
  }
  if (options.nodes < 0 || options.flows < 0) {
    throw CLI::ValidationError("--doctor.nodes/--doctor.flows", "must not be negative");
  }
  if (!(options.cq_ratio_crit > 0 && options.cq_ratio_crit <= options.cq_ratio_warn)) {
    throw CLI::ValidationError("--doctor.cq-ratio-crit",
                               "must be above 0 and at most --doctor.cq-ratio-warn");
  }
}

std::map<std::string, std::string> ProbeErrors(const std::vector<NamedCollector>& collectors) {
  std::map<std::string, std::string> errors;
  for (const NamedCollector& entry : collectors) {
    if (std::string error = entry.collector->ProbeError(); !error.empty()) {
      errors[entry.name] = std::move(error);
    }
  }
  return errors;
}

DoctorService::DoctorService(std::shared_ptr<const CollectorRunner> runner,
                             std::map<std::string, std::string> probe_errors,
                             double interval_seconds)
    : runner_(std::move(runner)),
      probe_errors_(std::move(probe_errors)),
      interval_seconds_(interval_seconds),
      history_(60, interval_seconds) {
  // The first snapshot is taken before /doctor is served: "since start" always has a start.
  history_.Offer(Collect(*runner_, probe_errors_));
  thread_ = std::thread([this] { Tick(); });
}

DoctorService::~DoctorService() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void DoctorService::Tick() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (wake_.wait_for(lock, std::chrono::duration<double>(interval_seconds_),
                       [this] { return stop_; })) {
      return;
    }
    lock.unlock();
    try {
      history_.Offer(Collect(*runner_, probe_errors_));
    } catch (const std::exception& e) {  // the runner catches collectors; this is a last guard
      log::Warn("doctor history: collection failed", {{"err", e.what()}});
    }
    lock.lock();
  }
}

void DoctorService::AddRoute(DebugRoutes& routes) {
  routes["/doctor"] = [this](std::string_view query) { return Report(query); };
}

std::string DoctorService::Report(std::string_view query) {
  // ?window=D: counters observed live over D (at most a minute: the request waits for it);
  // absent: rates since the first collection after start.
  // Other parameters: thresholds, named as the --doctor.* flags without the prefix.
  std::optional<uint64_t> window_ns;
  doctor::DoctorOptions options;
  for (size_t at = 0; at < query.size();) {
    const size_t end = std::min(query.find('&', at), query.size());
    const std::string_view item = query.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    const std::string_view name = item.substr(0, equals);
    const std::string_view value =
        equals == std::string_view::npos ? std::string_view() : item.substr(equals + 1);
    if (name == "window") {
      window_ns = ParseDurationNs(value);
      if (!window_ns || *window_ns > 60'000'000'000ULL) {
        throw BadRequest("window must be a duration of at most 60s, like 10s: " +
                         std::string(value));
      }
      continue;
    }
    const auto applied = doctor::ApplyThreshold(name, value, options);
    if (!applied) throw BadRequest(applied.error());
    if (!*applied) throw BadRequest("unknown parameter " + std::string(name));
  }
  const auto view = history_.View();
  std::optional<Snapshot> live_before;
  if (window_ns && *window_ns > 0) {
    live_before = Collect(*runner_, probe_errors_);
    std::this_thread::sleep_for(std::chrono::nanoseconds(*window_ns));
  }
  Snapshot now = Collect(*runner_, probe_errors_);
  history_.Offer(now);
  const Snapshot* before = live_before   ? &*live_before
                           : window_ns   ? nullptr
                           : view->first ? view->first.get()
                                         : nullptr;
  now.set_history(view);
  std::vector<doctor::Finding> findings = doctor::RunChecks(now, before, options);
  doctor::SortFindings(findings);
  return doctor::RenderJson(
      findings, {.host = HostName(),
                 .generated = NowRfc3339(),
                 .window_seconds = before == nullptr ? 0 : now.seconds() - before->seconds()});
}

namespace {

// The report of a running exporter, or nullopt (with the reason logged) to collect here.
std::optional<doctor::ParsedReport> FromExporter(const doctor::DoctorOptions& options) {
  if (options.exporter == "none") return std::nullopt;
  const bool automatic = options.exporter == "auto";
  const std::string url = automatic ? kDefaultExporterUrl : options.exporter;
  const std::string fallback =
      "collecting here instead; history checks are skipped (start rdmascope serve, or pass "
      "--exporter URL)";
  const auto parsed = ParseHttpUrl(url);
  if (!parsed) {
    log::Warn("doctor: bad exporter URL, " + fallback, {{"err", parsed.error()}});
    return std::nullopt;
  }
  // The thresholds given here travel with the request: the exporter's report uses them.
  std::string query = doctor::ThresholdQuery(options);
  if (options.window_set) {
    query = "window=" + std::to_string(options.window_ns / 1'000'000) + "ms" +
            (query.empty() ? "" : "&" + query);
  }
  const std::string target = "/doctor" + (query.empty() ? "" : "?" + query);
  const auto answer =
      HttpGet(*parsed, target, std::chrono::milliseconds(options.exporter_timeout_ns / 1'000'000));
  std::string error;
  if (!answer) {
    error = answer.error();
  } else if (answer->status != 200) {
    std::string body = answer->body.substr(0, 200);
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    error = "HTTP " + std::to_string(answer->status) + (body.empty() ? "" : ": " + body);
    if (answer->status == 401) {
      error +=
          " (the exporter asks for basic auth, --web.config.file; doctor's client sends "
          "none: fetch " +
          url + "/doctor with curl -u USER)";
    }
  } else if (auto report = doctor::ParseJson(answer->body); !report) {
    error = "bad /doctor answer: " + report.error();
  } else {
    log::Info("doctor: report of the running exporter", {{"url", url}});
    return std::move(*report);
  }
  // Nobody listening on the default address is the ordinary case of a host without serve.
  if (automatic && error.find("refused") != std::string::npos) {
    log::Info("doctor: no exporter running at " + url + ", " + fallback);
  } else {
    log::Warn("doctor: exporter " + url + " unusable, " + fallback, {{"err", error}});
  }
  return std::nullopt;
}

std::string Render(const std::vector<doctor::Finding>& findings,
                   const doctor::ReportContext& context, const doctor::DoctorOptions& options,
                   const ServeConfig& config) {
  return options.format == doctor::Format::kJson
             ? doctor::RenderJson(findings, context)
             : doctor::RenderText(findings, context, ColourWanted(),
                                  options.show_skipped || config.log_level == log::Level::kDebug);
}

}  // namespace

int RunDoctor(const ServeConfig& config, const doctor::DoctorOptions& options) {
  log::SetLevel(config.log_level);
  try {
    if (auto remote = FromExporter(options)) {
      doctor::SortFindings(remote->findings);
      const std::string report = Render(remote->findings, remote->context, options, config);
      std::fwrite(report.data(), 1, report.size(), stdout);
      std::fflush(stdout);
      return doctor::ExitCode(remote->findings, options);
    }
    std::vector<NamedCollector> collectors = BuildCollectors(config);
    const std::map<std::string, std::string> probe_errors = ProbeErrors(collectors);
    CollectorRunner runner(std::move(collectors), BuildInfo{kVersion, kRevision}, config.procfs);
    std::optional<Snapshot> before;
    if (options.window_ns > 0) {
      before = Collect(runner, probe_errors);
      log::Info("doctor: observing counters",
                {{"window_seconds", std::to_string(static_cast<double>(options.window_ns) / 1e9)}});
      std::this_thread::sleep_for(std::chrono::nanoseconds(options.window_ns));
    }
    const Snapshot now = Collect(runner, probe_errors);
    std::vector<doctor::Finding> findings =
        doctor::RunChecks(now, before ? &*before : nullptr, options);
    doctor::SortFindings(findings);
    const doctor::ReportContext context{
        .host = HostName(),
        .generated = NowRfc3339(),
        .window_seconds = static_cast<double>(options.window_ns) / 1e9};
    const std::string report = Render(findings, context, options, config);
    std::fwrite(report.data(), 1, report.size(), stdout);
    std::fflush(stdout);
    return doctor::ExitCode(findings, options);
  } catch (const std::exception& e) {
    log::Error("doctor could not run", {{"err", e.what()}});
    return doctor::kExitCannotRun;
  }
}

}  // namespace rdmascope
