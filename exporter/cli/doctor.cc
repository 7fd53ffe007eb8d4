#include "cli/doctor.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "cli/client_access_flags.h"
#include "cli/doctor_replay.h"
#include "collectors/build.h"
#include "core/collector_runner.h"
#include "core/duration.h"
#include "core/log.h"
#include "core/version.h"
#include "doctor/fleet_report.h"
#include "doctor/local_snapshot.h"
#include "doctor/query.h"
#include "doctor/report.h"

namespace rdmascope {
namespace {

// A default as --help shows it: 67108864, not CLI11's 6.71089e+07 (the shortest text that reads
// back as the same double).
std::string ShortestNumber(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

}  // namespace

bool DoctorColourWanted() {
  const char* no_colour = std::getenv("NO_COLOR");  // https://no-color.org: set and not empty
  return isatty(STDOUT_FILENO) == 1 && (no_colour == nullptr || *no_colour == '\0');
}

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
                  "leaks, pinned-memory growth, counter rates over its recent collections) is "
                  "shown; "
                  "default: " +
                      std::string(doctor::kDefaultExporterUrl) +
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
  AddClientAccessFlags(doctor, "exporter", "the exporter", options.exporter_access, "Doctor");
  doctor
      .add_option("--prometheus", options.prometheus,
                  "URL of a Prometheus (or Thanos, Mimir: its query API) scraping rdmascope: run "
                  "the checks on every host (instance) it has, from its series instead of this "
                  "host (docs/doctor.md, \"Fleet\")")
      ->group("Doctor fleet");
  doctor
      .add_option("--prometheus.selector", options.prometheus_selector,
                  "Label matchers every query carries, e.g. '{cluster=\"a\"}' (braces optional)")
      ->group("Doctor fleet");
  doctor
      .add_option("--prometheus.job", options.prometheus_job,
                  "The job that scrapes rdmascope (job=\"...\" added to every query); needed when "
                  "several jobs scrape one instance")
      ->group("Doctor fleet");
  doctor
      .add_option("--prometheus.cluster-label", options.prometheus_cluster_label,
                  "The target label naming a cluster, as rules/generate.py --cluster-label: fleet "
                  "drift compares hosts of one NIC model within one cluster")
      ->default_str("cluster")
      ->group("Doctor fleet");
  doctor
      .add_option_function<std::string>(
          "--prometheus.timeout",
          [&options](const std::string& text) {
            options.prometheus_timeout_ns = *ParseDurationNs(text);
          },
          "Longest wait for each query (Prometheus duration)")
      ->check([](const std::string& text) {
        const auto ns = ParseDurationNs(text);
        return ns && *ns > 0 ? std::string() : "not a positive duration like 30s: " + text;
      })
      ->default_str("30s")
      ->group("Doctor fleet");
  doctor
      .add_option_function<std::string>(
          "--prometheus.time",
          [&options](const std::string& text) {
            options.prometheus_time = *doctor::ParseEvaluationTime(text);
          },
          "Diagnose the fleet as it was then: RFC 3339 or Unix seconds (default: now); the "
          "window and the history end there")
      ->check([](const std::string& text) {
        return doctor::ParseEvaluationTime(text)
                   ? std::string()
                   : "not a time like 2026-12-05T10:00:00Z or 1733392800: " + text;
      })
      ->group("Doctor fleet");
  doctor
      .add_option("--prometheus.concurrency", options.prometheus_concurrency,
                  "Queries in flight at once (each answer is read while the next is evaluated)")
      ->check(CLI::Range(1, 64))
      ->default_str("4")
      ->group("Doctor fleet");
  AddClientAccessFlags(doctor, "prometheus", "the Prometheus", options.prometheus_access, "Doctor");
  doctor
      .add_option("--replay", options.replay,
                  "A capture (rdmascope capture; docs/capture.md) to diagnose instead of this "
                  "host, its rates between its first and last sample; repeat it for several "
                  "hosts: each one's findings and fleet drift among them, as --prometheus")
      ->check(CLI::ExistingPath)
      ->group("Doctor fleet");
  doctor
      .add_option_function<std::string>(
          "--format",
          [&options](const std::string& format) {
            options.format = format == "json"   ? doctor::Format::kJson
                             : format == "html" ? doctor::Format::kHtml
                                                : doctor::Format::kText;
          },
          "Output: text (for a person), json (schema_version 1, docs/doctor.md) or html (a "
          "page, as /doctor.html)")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->default_str("text")
      ->group("Doctor");
  doctor
      .add_flag("--show-ok", options.show_ok,
                "Fleet report (--prometheus): list every ok finding (default: counted per check)")
      ->group("Doctor fleet");
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
  // One table of thresholds for the flags here and /doctor's query parameters (doctor/query.h).
  for (const doctor::IntegerThreshold& threshold : doctor::IntegerThresholds()) {
    doctor
        .add_option("--doctor." + std::string(threshold.name), options.*threshold.member,
                    std::string(threshold.help))
        ->capture_default_str()
        ->check(CLI::Range(0, threshold.max))
        ->group("Doctor thresholds");
  }
  for (const doctor::NumericThreshold& threshold : doctor::NumericThresholds()) {
    doctor
        .add_option("--doctor." + std::string(threshold.name), options.*threshold.member,
                    std::string(threshold.help))
        ->default_str(ShortestNumber(options.*threshold.member))
        ->check(threshold.positive ? CLI::Validator(CLI::PositiveNumber)
                                   : CLI::Validator(CLI::NonNegativeNumber))
        ->group("Doctor thresholds");
  }
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
  CheckClientAccess("--exporter", options.exporter_access);
  CheckClientAccess("--prometheus", options.prometheus_access);
  if (!options.replay.empty() && !options.prometheus.empty()) {
    throw CLI::ValidationError("--replay/--prometheus", "give one or the other");
  }
  // Each threshold's own range is checked by its flag's validator (the table in doctor/query.cc).
  if (!(options.cq_ratio_crit > 0 && options.cq_ratio_crit <= options.cq_ratio_warn)) {
    throw CLI::ValidationError("--doctor.cq-ratio-crit",
                               "must be above 0 and at most --doctor.cq-ratio-warn");
  }
}

int PrintDoctorReport(const std::vector<doctor::Finding>& findings,
                      const doctor::ReportContext& context, const doctor::DoctorOptions& options,
                      bool show_skipped) {
  const std::string report = options.format == doctor::Format::kJson
                                 ? doctor::RenderJson(findings, context)
                             : options.format == doctor::Format::kHtml
                                 ? doctor::RenderHtml(findings, context)
                                 : doctor::RenderText(findings, context, DoctorColourWanted(),
                                                      options.show_skipped || show_skipped);
  std::fwrite(report.data(), 1, report.size(), stdout);
  std::fflush(stdout);
  return doctor::ExitCode(findings, options);
}

int RunDoctor(const ServeConfig& config, const doctor::DoctorOptions& options) {
  log::SetLevel(config.log_level);
  const bool show_skipped = config.log_level == log::Level::kDebug;
  try {
    if (!options.prometheus.empty()) {
      const doctor::ParsedReport report = doctor::ReportFromPrometheus(options);
      return PrintDoctorReport(report.findings, report.context, options, false);
    }
    if (!options.replay.empty()) {
      const doctor::ParsedReport report = ReportFromCaptures(config, options);
      return PrintDoctorReport(report.findings, report.context, options, show_skipped);
    }
    if (auto remote = doctor::AskExporter(options)) {
      doctor::SortFindings(remote->findings);
      // The exporter's fixes are its host's, and its bytes: to read, not to paste here as is.
      remote->context.fixes_display_only = true;
      return PrintDoctorReport(remote->findings, remote->context, options, show_skipped);
    }
    std::vector<NamedCollector> collectors = BuildCollectors(config);
    const auto probe_errors = doctor::ProbeErrors(collectors);
    CollectorRunner runner(std::move(collectors), BuildInfo{kVersion, kRevision}, config.procfs);
    const doctor::ParsedReport report = doctor::ReportHere(runner, probe_errors, options);
    return PrintDoctorReport(report.findings, report.context, options, show_skipped);
  } catch (const std::exception& e) {
    log::Error(!options.replay.empty()      ? "doctor could not replay the capture"
               : options.prometheus.empty() ? "doctor could not run"
                                            : "doctor could not read the fleet",
               {{"err", e.what()}});
    return doctor::kExitCannotRun;
  }
}

}  // namespace rdmascope
