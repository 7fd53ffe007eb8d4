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

#include "bpf/mr_probe.h"
#include "cli/doctor_prometheus.h"
#include "cli/http_get.h"
#include "cli/local_exporter.h"
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

// A default as --help shows it: 67108864, not CLI11's 6.71089e+07 (the shortest text that reads
// back as the same double).
std::string ShortestNumber(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
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

}  // namespace

bool DoctorColourWanted() {
  const char* no_colour = std::getenv("NO_COLOR");  // https://no-color.org: set and not empty
  return isatty(STDOUT_FILENO) == 1 && (no_colour == nullptr || *no_colour == '\0');
}

namespace {

// The client side of a server's TLS and authentication (`--PREFIX.ca-file`...), named as
// Prometheus' scrape config and node_exporter's flags name them.
void AddClientAccessFlags(CLI::App& doctor, const std::string& prefix, const std::string& server,
                          doctor::ClientAccess& access) {
  struct ClientFlag {
    const char* name;
    std::string doctor::ClientAccess::*member;
    bool existing_file;
    std::string help;
  };
  const ClientFlag flags[] = {
      {"ca-file", &doctor::ClientAccess::ca_file, true,
       "CA certificate(s) " + server +
           "'s TLS certificate must chain to (https://; default: the system's)"},
      {"cert-file", &doctor::ClientAccess::cert_file, true,
       "Client certificate for " + server + " when it verifies clients (mutual TLS)"},
      {"key-file", &doctor::ClientAccess::key_file, true,
       "Private key of --" + prefix + ".cert-file"},
      {"username", &doctor::ClientAccess::username, false,
       "User name for " + server + "'s basic auth (with --" + prefix + ".password-file)"},
      {"password-file", &doctor::ClientAccess::password_file, true,
       "File holding the basic auth password (surrounding whitespace ignored); never a password "
       "on the command line"},
      {"bearer-token-file", &doctor::ClientAccess::bearer_token_file, true,
       "File holding a bearer token sent to " + server +
           " (Authorization: Bearer; surrounding whitespace ignored)"},
  };
  for (const ClientFlag& flag : flags) {
    CLI::Option* option =
        doctor.add_option("--" + prefix + "." + flag.name, access.*flag.member, flag.help);
    if (flag.existing_file) option->check(CLI::ExistingFile);
    option->group("Doctor");
  }
  doctor
      .add_flag("--" + prefix + ".insecure-skip-verify", access.insecure_skip_verify,
                "Accept any TLS certificate of " + server + " (no CA, no name check)")
      ->group("Doctor");
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
                  "leaks, pinned-memory growth, counter rates over its recent collections) is "
                  "shown; "
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
  AddClientAccessFlags(doctor, "exporter", "the exporter", options.exporter_access);
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
            options.prometheus_time = *ParseEvaluationTime(text);
          },
          "Diagnose the fleet as it was then: RFC 3339 or Unix seconds (default: now); the "
          "window and the history end there")
      ->check([](const std::string& text) {
        return ParseEvaluationTime(text)
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
  AddClientAccessFlags(doctor, "prometheus", "the Prometheus", options.prometheus_access);
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
  for (const auto& [prefix, access] : {std::pair{"--exporter", &options.exporter_access},
                                       std::pair{"--prometheus", &options.prometheus_access}}) {
    const std::string flag(prefix);
    if (access->cert_file.empty() != access->key_file.empty()) {
      throw CLI::ValidationError(flag + ".cert-file/" + flag + ".key-file", "give both or neither");
    }
    if (access->username.empty() != access->password_file.empty()) {
      throw CLI::ValidationError(flag + ".username/" + flag + ".password-file",
                                 "give both or neither");
    }
    if (!access->username.empty() && !access->bearer_token_file.empty()) {
      throw CLI::ValidationError(flag + ".username/" + flag + ".bearer-token-file",
                                 "give one or the other");
    }
  }
  // Each threshold's own range is checked by its flag's validator (the table in doctor/query.cc).
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
                             double interval_seconds, double lookback_seconds)
    : runner_(std::move(runner)),
      probe_errors_(std::move(probe_errors)),
      interval_seconds_(interval_seconds),
      history_(60, interval_seconds, 2048, lookback_seconds) {
  // The first snapshot is taken before /doctor is served: counter rates always have a start.
  history_.Offer(Collect(*runner_, probe_errors_));
  thread_ = std::thread([this] { Tick(); });
  live_thread_ = std::thread([this] { ObserveLiveWindows(); });
}

DoctorService::~DoctorService() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  live_wake_.notify_all();
  live_ended_.notify_all();
  thread_.join();
  live_thread_.join();
}

void DoctorService::ObserveLiveWindows() {
  std::unique_lock lock(mutex_);
  for (;;) {
    live_wake_.wait(lock, [this] { return stop_ || live_asked_; });
    if (stop_) return;
    const uint64_t window_ns = live_window_ns_;
    lock.unlock();
    std::shared_ptr<LiveWindow> window;
    try {
      Snapshot before = Collect(*runner_, probe_errors_);
      lock.lock();
      // Interrupted by the service stopping: a shutdown waits for no window.
      const bool stopping =
          live_wake_.wait_for(lock, std::chrono::nanoseconds(window_ns), [this] { return stop_; });
      lock.unlock();
      if (!stopping) {
        Snapshot after = Collect(*runner_, probe_errors_);
        history_.Offer(after);
        window = std::make_shared<LiveWindow>(
            LiveWindow{std::move(before), std::move(after), MonotonicSeconds()});
      }
    } catch (const std::exception& e) {  // the runner catches collectors; a last guard
      log::Warn("doctor live window: collection failed", {{"err", e.what()}});
    }
    lock.lock();
    live_ = std::move(window);  // null after a failure: the waiting requests get an error
    live_asked_ = false;
    ++live_generation_;
    live_ended_.notify_all();
  }
}

std::shared_ptr<const DoctorService::LiveWindow> DoctorService::SharedLiveWindow(
    uint64_t window_ns) {
  std::unique_lock lock(mutex_);
  if (live_ && !live_asked_ &&
      MonotonicSeconds() - live_->ended_seconds < kLiveWindowReuseSeconds) {
    return live_;
  }
  if (!live_asked_) {  // else the one running is shared, whatever window it observes
    live_asked_ = true;
    live_window_ns_ = window_ns;
    live_wake_.notify_one();
  }
  const uint64_t generation = live_generation_;
  live_ended_.wait(lock, [&] { return stop_ || live_generation_ != generation; });
  if (stop_ || !live_) return nullptr;
  return live_;
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
  routes["/doctor"] = [this](std::string_view query) { return Report(query, false); };
  // The same report for people: what /doctor answers a browser (http/handler.cc).
  routes["/doctor.html"] = [this](std::string_view query) { return Report(query, true); };
}

std::string DoctorService::Report(std::string_view query, bool html) {
  // ?window=D: counters observed live over D (at most a minute: the request waits for it);
  // absent: rates over the kept counters of the last lookback (since start when younger).
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
      if (!window_ns || *window_ns > static_cast<uint64_t>(kMaxLiveWindowSeconds * 1e9)) {
        throw BadRequest("window must be a duration of at most 10s, like 5s: " +
                         std::string(value));
      }
      continue;
    }
    const auto applied = doctor::ApplyThreshold(name, value, options);
    if (!applied) throw BadRequest(applied.error());
    if (!*applied) throw BadRequest("unknown parameter " + std::string(name));
  }
  const auto view = history_.View();
  std::shared_ptr<const LiveWindow> live;
  std::optional<Snapshot> collected;
  if (window_ns && *window_ns > 0) {
    live = SharedLiveWindow(*window_ns);
    if (!live) throw std::runtime_error("the live window was not observed (see the log)");
  } else {
    collected = Collect(*runner_, probe_errors_);
    history_.Offer(*collected);
  }
  Snapshot now = live ? live->after : *collected;
  const Snapshot* live_before = live ? &live->before : nullptr;
  const Snapshot* before = live_before ? live_before
                           : window_ns ? nullptr
                                       : view->CounterBase(now.seconds());
  const char* kind = live_before              ? doctor::kWindowLive
                     : before == nullptr      ? doctor::kWindowNone
                     : view->IsStart(*before) ? doctor::kWindowSinceStart
                                              : doctor::kWindowLookback;
  now.set_history(view);
  std::vector<doctor::Finding> findings = doctor::RunChecks(now, before, options);
  doctor::SortFindings(findings);
  const doctor::ReportContext context{
      .host = HostName(),
      .generated = NowRfc3339(),
      .window_seconds = before == nullptr ? 0 : now.seconds() - before->seconds(),
      .window_kind = kind};
  return html ? doctor::RenderHtml(findings, context) : doctor::RenderJson(findings, context);
}

namespace {

// A secret kept in a file: surrounding whitespace (the file's newline) is not part of it, as in
// Prometheus' password_file and bearer_token_file. Throws when it cannot be read: doctor was
// told how to log in and cannot, which is the user's to fix (exit 3).
std::string ReadSecret(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw std::runtime_error("cannot read " + flag + " " + path);
  const std::string secret = text.str();
  const size_t first = secret.find_first_not_of(" \t\r\n");
  const size_t last = secret.find_last_not_of(" \t\r\n");
  return first == std::string::npos ? "" : secret.substr(first, last - first + 1);
}

}  // namespace

HttpClientOptions ClientOptions(const doctor::ClientAccess& access, const std::string& prefix) {
  HttpClientOptions client{.ca_file = access.ca_file,
                           .cert_file = access.cert_file,
                           .key_file = access.key_file,
                           .insecure_skip_verify = access.insecure_skip_verify,
                           .username = access.username};
  if (!access.password_file.empty()) {
    client.password = ReadSecret(access.password_file, "--" + prefix + ".password-file");
  }
  if (!access.bearer_token_file.empty()) {
    client.bearer_token =
        ReadSecret(access.bearer_token_file, "--" + prefix + ".bearer-token-file");
  }
  return client;
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
  // Credentials go to the URL the user named only; the implicit exporter gets none, and
  // nothing at all unless it is root's rdmascope (cli/local_exporter.h).
  HttpClientOptions client;
  if (automatic) {
    if (const auto trusted = VerifyLocalExporter(kDefaultPort); !trusted) {
      if (trusted.error().starts_with("nothing listens")) {
        log::Info("doctor: no exporter running at " + url + ", " + fallback);
      } else {
        log::Warn("doctor: not asking " + url + ": not root's rdmascope serve, " + fallback,
                  {{"why", trusted.error()}});
      }
      return std::nullopt;
    }
  } else {
    client = ClientOptions(options.exporter_access, "exporter");
  }
  const auto answer = HttpGet(
      *parsed, target, std::chrono::milliseconds(options.exporter_timeout_ns / 1'000'000), client);
  std::string error;
  bool unreachable = false;
  if (!answer) {
    error = answer.error().message;
    unreachable = answer.error().unreachable;
  } else if (answer->status != 200) {
    std::string body = answer->body.substr(0, 200);
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    error = "HTTP " + std::to_string(answer->status) + (body.empty() ? "" : ": " + body);
    if (answer->status == 401) {
      error += options.exporter_access.username.empty()
                   ? " (the exporter asks for basic auth, --web.config.file: pass "
                     "--exporter.username and --exporter.password-file)"
                   : " (the exporter refused user " + options.exporter_access.username +
                         " or the password of " + options.exporter_access.password_file + ")";
    } else if (answer->status == 403) {
      // serve's --web.config.file answers 403 to a client without an accepted certificate.
      error += options.exporter_access.cert_file.empty()
                   ? " (the exporter requires a client certificate, --web.config.file: pass "
                     "--exporter.cert-file and --exporter.key-file)"
                   : " (the exporter refused the client certificate " +
                         options.exporter_access.cert_file + ")";
    }
  } else if (auto report = doctor::ParseJson(answer->body); !report) {
    error = "bad /doctor answer: " + report.error();
  } else {
    log::Info("doctor: report of the running exporter", {{"url", url}});
    return std::move(*report);
  }
  // Nobody listening on the default address is the ordinary case of a host without serve.
  if (automatic && unreachable) {
    log::Info("doctor: no exporter running at " + url + ", " + fallback);
  } else {
    log::Warn("doctor: exporter " + url + " unusable, " + fallback, {{"err", error}});
  }
  return std::nullopt;
}

}  // namespace

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
  if (!options.prometheus.empty()) return RunPrometheusDoctor(options);
  try {
    if (auto remote = FromExporter(options)) {
      doctor::SortFindings(remote->findings);
      // The exporter's fixes are its host's, and its bytes: to read, not to paste here as is.
      remote->context.fixes_display_only = true;
      return PrintDoctorReport(remote->findings, remote->context, options,
                               config.log_level == log::Level::kDebug);
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
        .window_seconds = static_cast<double>(options.window_ns) / 1e9,
        .window_kind = before ? doctor::kWindowLive : doctor::kWindowNone};
    return PrintDoctorReport(findings, context, options, config.log_level == log::Level::kDebug);
  } catch (const std::exception& e) {
    log::Error("doctor could not run", {{"err", e.what()}});
    return doctor::kExitCannotRun;
  }
}

}  // namespace rdmascope
