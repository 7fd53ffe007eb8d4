// The HTTP side: prometheus-cpp's pull Exposer (CivetWeb) serving the CollectorRunner at the
// telemetry path, plus a landing page at "/" that lists collectors and their last status.
#pragma once

#include <expected>
#include <memory>
#include <string>
#include <string_view>

#include "cli/serve_config.h"
#include "core/collector_runner.h"

namespace prometheus {
class Exposer;
}

namespace rdmascope {

// ":9879" -> "9879", "127.0.0.1:9879" and "[::1]:9879" unchanged; error text otherwise.
std::expected<std::string, std::string> ToCivetListeningPort(std::string_view listen_address);

std::string RenderLandingPage(const CollectorRunner& runner, std::string_view telemetry_path);

class HttpServer {
 public:
  // Throws std::runtime_error with a one-line reason if the address cannot be bound.
  HttpServer(const WebOptions& options, std::shared_ptr<CollectorRunner> runner,
             DebugRoutes routes = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;

 private:
  std::shared_ptr<CollectorRunner> runner_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace rdmascope
