// The client's side of /doctor: `doctor` asking a running exporter for its report (query.h).
#include <chrono>
#include <string>

#include "core/default_port.h"
#include "core/log.h"
#include "doctor/http_get.h"
#include "doctor/query.h"
#include "sys/local_exporter.h"

namespace rdmascope::doctor {

std::optional<ParsedReport> AskExporter(const DoctorOptions& options) {
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
  std::string query = ThresholdQuery(options);
  if (options.window_set) {
    query = "window=" + std::to_string(options.window_ns / 1'000'000) + "ms" +
            (query.empty() ? "" : "&" + query);
  }
  const std::string target = "/doctor" + (query.empty() ? "" : "?" + query);
  // Credentials go to the URL the user named only; the implicit exporter gets none, and
  // nothing at all unless it is root's rdmascope (sys/local_exporter.h).
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
  } else if (auto report = ParseJson(answer->body); !report) {
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

}  // namespace rdmascope::doctor
