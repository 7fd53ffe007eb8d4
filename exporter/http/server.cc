#include "http/server.h"

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/exposer.h>

#include <atomic>
#include <charconv>
#include <ctime>
#include <stdexcept>

#include "core/log.h"

namespace rdmascope {
namespace {

// CivetWeb's begin_request callback has no user pointer of ours (prometheus-cpp owns the
// server's), so the landing page reaches the running server through this one pointer.
struct LandingContext {
  const CollectorRunner* runner;
  std::string telemetry_path;
  DebugRoutes routes;
};
std::atomic<const LandingContext*> g_landing{nullptr};

std::string HtmlEscape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

int BeginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr) return 0;
  const LandingContext* context = g_landing.load();
  if (context == nullptr) return 0;
  const std::string_view uri = info->local_uri;
  const std::string_view method = info->request_method ? info->request_method : "";
  if (const auto route = context->routes.find(std::string(uri)); route != context->routes.end()) {
    if (method != "GET") {
      mg_printf(conn,
                "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Length: 0\r\n"
                "Connection: close\r\n\r\n");
      return 405;
    }
    std::string body;
    try {
      body = route->second(info->query_string ? info->query_string : "");
    } catch (const std::exception& e) {
      const std::string message = std::string("error: ") + e.what() + "\n";
      mg_printf(conn,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
                "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                message.size());
      mg_write(conn, message.data(), message.size());
      return 500;
    }
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              "Content-Length: %zu\r\nConnection: close\r\n\r\n",
              body.size());
    mg_write(conn, body.data(), body.size());
    return 200;
  }
  if (uri != "/") return 0;
  if (method != "GET" && method != "HEAD") {
    mg_printf(conn,
              "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\n"
              "Connection: close\r\n\r\n");
    return 405;
  }
  const std::string body = RenderLandingPage(*context->runner, context->telemetry_path);
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            "Content-Length: %zu\r\nConnection: close\r\n\r\n",
            body.size());
  if (method == "GET") mg_write(conn, body.data(), body.size());
  return 200;
}

}  // namespace

std::expected<std::string, std::string> ToCivetListeningPort(std::string_view address) {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return std::unexpected("listen address must be [host]:port, got \"" + std::string(address) +
                           "\"");
  }
  const std::string_view host = address.substr(0, colon);
  const std::string_view port_text = address.substr(colon + 1);
  int port = -1;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return std::unexpected("invalid port in listen address \"" + std::string(address) + "\"");
  }
  if (host.empty()) return std::string(port_text);
  if (host.find(',') != std::string_view::npos || host.find(' ') != std::string_view::npos) {
    return std::unexpected("invalid host in listen address \"" + std::string(address) + "\"");
  }
  if (host.front() == '[' ? host.back() != ']' : host.find(':') != std::string_view::npos) {
    return std::unexpected("IPv6 hosts must be bracketed, e.g. [::1]:9879");
  }
  return std::string(address);
}

std::string RenderLandingPage(const CollectorRunner& runner, std::string_view telemetry_path) {
  std::string html =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>rdmascope</title>"
      "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
      ".failed{color:#b00}.no-data{color:#777}</style></head><body>\n"
      "<h1>rdmascope</h1>\n<p>RDMA observability exporter, version " +
      HtmlEscape(runner.build().version) + " (" + HtmlEscape(runner.build().revision) +
      ").</p>\n<p><a href=\"" + HtmlEscape(telemetry_path) +
      "\">Metrics</a></p>\n"
      "<h2>Collectors</h2>\n<table><tr><th>collector</th><th>last status</th><th>detail</th>"
      "<th>series</th><th>duration</th></tr>\n";
  for (const CollectorState& state : runner.States()) {
    const std::string css = state.health == CollectorHealth::kFailed   ? "failed"
                            : state.health == CollectorHealth::kNoData ? "no-data"
                                                                       : "ok";
    char duration[32];
    std::snprintf(duration, sizeof duration, "%.3f ms", state.duration_seconds * 1e3);
    html += "<tr class=\"" + css + "\"><td>" + HtmlEscape(state.name) + "</td><td>" +
            HealthName(state.health) + "</td><td>" + HtmlEscape(state.detail) + "</td><td>" +
            std::to_string(state.series) + "</td><td>" +
            (state.health == CollectorHealth::kNeverRun ? "" : duration) + "</td></tr>\n";
  }
  html +=
      "</table>\n<p>Status is that of the last scrape. Disabled collectors are not listed; "
      "see <code>rdmascope serve --help</code>.</p>\n</body></html>\n";
  return html;
}

HttpServer::HttpServer(const WebOptions& options, std::shared_ptr<CollectorRunner> runner,
                       DebugRoutes routes)
    : runner_(std::move(runner)) {
  const auto port = ToCivetListeningPort(options.listen_address);
  if (!port) throw std::runtime_error(port.error());
  static LandingContext context;
  context = {runner_.get(), options.telemetry_path, std::move(routes)};
  g_landing.store(&context);

  static CivetCallbacks callbacks;
  callbacks.begin_request = &BeginRequest;
  // Bounded request time defends the few worker threads against slow or stalled clients.
  std::vector<std::string> civet_options{
      "listening_ports",       *port,   "num_threads",       std::to_string(options.threads),
      "request_timeout_ms",    "10000", "enable_keep_alive", "yes",
      "keep_alive_timeout_ms", "60000",
  };
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(civet_options, &callbacks);
  } catch (const std::exception& e) {
    g_landing.store(nullptr);
    throw std::runtime_error("cannot listen on " + options.listen_address + ": " + e.what());
  }
  exposer_->RegisterCollectable(runner_, options.telemetry_path);
}

HttpServer::~HttpServer() {
  exposer_.reset();
  g_landing.store(nullptr);
}

int HttpServer::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace rdmascope
