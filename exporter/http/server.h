// The HTTP side: libmicrohttpd serving HttpHandler (http/handler.h).
//
// Event-driven: --web.threads threads each run an epoll loop over their share of the
// connections, so an idle keep-alive connection costs a file descriptor and a little memory,
// never a thread (CivetWeb, used before, parked one of its few workers on each idle
// keep-alive connection, and four idle clients stopped every other scrape). A request is
// handled on the thread that owns its connection: a long scrape delays only the requests that
// arrive on that thread's connections meanwhile, by at most its own duration, while the other
// threads keep accepting and serving.
#pragma once

#include <memory>

#include "cli/serve_config.h"
#include "core/collector_runner.h"
#include "http/handler.h"
#include "http/listen_address.h"

struct MHD_Daemon;

namespace rdmascope {

class HttpServer {
 public:
  // Throws std::runtime_error with a one-line reason if the address cannot be bound.
  HttpServer(const WebOptions& options, std::shared_ptr<CollectorRunner> runner,
             DebugRoutes routes = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  std::unique_ptr<HttpHandler> handler_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace rdmascope
