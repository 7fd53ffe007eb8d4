#include "cli/capture_exporter.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "cli/capture_redact.h"
#include "cli/client_access_flags.h"
#include "core/capture.h"
#include "core/default_port.h"
#include "core/duration.h"
#include "core/log.h"
#include "doctor/http_get.h"
#include "doctor/query.h"
#include "sys/local_exporter.h"

namespace rdmascope {
namespace {

// One line of an HTTP error body for the index.
std::string Status(const HttpAnswer& answer) {
  std::string body = answer.body.substr(0, 120);
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
  return "HTTP " + std::to_string(answer.status) + (body.empty() ? "" : ": " + body);
}

void MissAll(capture::Writer& writer, const std::string& reason) {
  for (const CapturedRoute& route : kCapturedExporterRoutes) {
    writer.Missed("exporter " + std::string(route.route), reason);
  }
}

}  // namespace

void AddCaptureExporterFlags(CLI::App& app, CaptureExporterOptions& options) {
  app.add_option("--exporter", options.exporter,
                 "The running exporter whose /debug/mr/stacks and /debug/workloads each sample "
                 "records: a URL, auto (root's rdmascope serve on 127.0.0.1:9879, as doctor "
                 "finds it) or none")
      ->default_str("auto")
      ->group("Capture");
  app.add_option_function<std::string>(
         "--exporter.timeout",
         [&options](const std::string& text) {
           options.timeout = std::chrono::milliseconds(*ParseDurationNs(text) / 1'000'000);
         },
         "Longest wait for each of the exporter's answers")
      ->check([](const std::string& text) {
        return ParseDurationNs(text) ? std::string() : "not a duration like 5s: " + text;
      })
      ->default_str("5s")
      ->group("Capture");
  AddClientAccessFlags(app, "exporter", "the exporter", options.access, "Capture");
}

void RecordExporterAnswers(const CaptureExporterOptions& options, capture::Writer& writer,
                           const redact::Redactor* redactor) {
  if (options.exporter == "none") {
    MissAll(writer, "--exporter none");
    return;
  }
  const bool automatic = options.exporter == "auto";
  const std::string url = automatic ? doctor::kDefaultExporterUrl : options.exporter;
  const auto parsed = ParseHttpUrl(url);
  if (!parsed) {
    MissAll(writer, "--exporter " + url + ": " + parsed.error());
    return;
  }
  // As doctor: the implicit address is asked only when root's rdmascope listens there, so no
  // other local user's program writes into the capture (sys/local_exporter.h).
  if (automatic) {
    if (const auto trusted = VerifyLocalExporter(kDefaultPort); !trusted) {
      MissAll(writer, "no rdmascope serve of root's at " + url + ": " + trusted.error());
      return;
    }
  }
  HttpClientOptions client;
  try {
    client = ClientOptions(options.access, "exporter");
  } catch (const std::exception& error) {  // a password or token file unreadable since parsing
    MissAll(writer, error.what());
    return;
  }
  for (const CapturedRoute& route : kCapturedExporterRoutes) {
    const std::string source = "exporter " + std::string(route.route);
    const auto answer =
        HttpGet(*parsed, std::string(route.route), options.timeout, client, kMaxExporterAnswer);
    if (!answer) {
      writer.Missed(source, url + ": " + answer.error().message);
    } else if (answer->status != 200) {
      writer.Missed(source, url + ": " + Status(*answer));  // 404: its collector is off there
    } else if (!nlohmann::json::accept(answer->body)) {
      writer.Missed(source, url + ": the answer is not JSON");
    } else if (redactor == nullptr) {
      writer.File(route.file, answer->body);
    } else if (auto redacted = RedactExporterAnswer(*redactor, route.route, answer->body)) {
      writer.File(route.file, *redacted);
    } else {
      writer.Missed(source, url + ": not kept under --redact: " + redacted.error());
    }
  }
}

void AddCapturedExporterRoutes(DebugRoutes& routes) {
  for (const CapturedRoute& captured : kCapturedExporterRoutes) {
    if (routes.contains(std::string(captured.route))) continue;  // a collector's own answer
    // A capture no exporter answered for gets no route (a 404, no link on the landing page).
    const capture::Session* replay = capture::Active();
    if (replay == nullptr || !replay->replaying()) return;
    bool recorded = false;
    for (size_t n = 1; n <= replay->reader()->sample_count() && !recorded; ++n) {
      recorded = replay->reader()->Exists(n, captured.file);
    }
    if (!recorded) continue;
    routes[std::string(captured.route)] = [file = captured.file](std::string_view) {
      const capture::Session* session = capture::Active();
      if (session == nullptr || !session->replaying()) throw std::runtime_error("not replaying");
      const auto body = session->reader()->ReadFile(session->sample(), file, kMaxExporterAnswer);
      if (!body) {
        throw std::runtime_error("the capture's sample " + std::to_string(session->sample()) +
                                 " has no " + std::string(file) + " (" +
                                 capture::ErrnoName(body.error()) +
                                 "): no exporter answered when it was taken (index.json "
                                 "\"not_recorded\")");
      }
      // Served as application/json: what is not JSON is not passed on.
      if (!nlohmann::json::accept(*body)) {
        throw std::runtime_error("the capture's " + std::string(file) + " is not JSON");
      }
      return *body;
    };
    log::Info("debug route answered from the capture",
              {{"route", std::string(captured.route)}, {"file", std::string(captured.file)}});
  }
}

}  // namespace rdmascope
