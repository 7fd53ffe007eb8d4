// The HTTP side: libmicrohttpd serving HttpHandler (http/handler.h).
//
// Event-driven: --web.threads threads each run an epoll loop over their share of the
// connections, so an idle keep-alive connection costs a file descriptor and a little memory,
// never a thread (CivetWeb, used before, parked one of its few workers on each idle
// keep-alive connection, and four idle clients stopped every other scrape). A request is
// handled on the thread that owns its connection: a long scrape delays only the requests that
// arrive on that thread's connections meanwhile, by at most its own duration, while the other
// threads keep accepting and serving. The costly routes (HttpHandler::IsCostly: /doctor,
// /debug/*) never run there: their connection is suspended while the slow lane answers them, so
// no client of theirs can hold a thread that scrapes and health probes need.
#pragma once

#include <memory>
#include <mutex>
#include <set>

#include "core/collector_runner.h"
#include "http/handler.h"
#include "http/listen_address.h"
#include "http/rate_limiter.h"
#include "http/slow_lane.h"
#include "http/web_options.h"
#include "web/basic_auth.h"

struct MHD_Daemon;

namespace rdmascope {

struct DeferredRequest;  // server.cc: a costly request while the slow lane answers it

// A socket bound to and listening on `listen_address` (--web.listen-address syntax), or
// std::runtime_error with a one-line reason.
int ListenOn(const std::string& listen_address);

class HttpServer {
 public:
  // Throws std::runtime_error with a one-line reason if the address cannot be bound or TLS
  // cannot start. With options.security, every response carries its headers and every
  // request passes its client certificate policy and basic auth before any route runs.
  HttpServer(const WebOptions& options, std::shared_ptr<CollectorRunner> runner,
             DebugRoutes routes = {});
  // Serves on `listen_fd`, a socket ListenOn returned; the server owns it from here on (closed
  // even if this throws). `serve` binds first, before the probes load: a taken port then fails
  // start-up at once instead of after the BPF load and the probes' teardown (seconds: each
  // uprobe's release waits for a grace period under the kernel's event_mutex).
  HttpServer(const WebOptions& options, int listen_fd, std::shared_ptr<CollectorRunner> runner,
             DebugRoutes routes = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

  // Applies a new web config (re-read on SIGHUP or change): a libmicrohttpd daemon built with
  // it starts on the same listening socket, then the old one stops accepting and is stopped
  // (its open connections are closed; clients reconnect). If the new daemon cannot start,
  // throws std::runtime_error and the old one keeps serving.
  void Reload(std::shared_ptr<const web::WebConfig> security);

  // What Answer (server.cc) reaches through libmicrohttpd's closure pointer: one per daemon,
  // never changed while its daemon runs.
  struct Context {
    const HttpHandler* handler = nullptr;
    std::shared_ptr<const web::WebConfig> security;  // null: plain HTTP, no auth
    std::unique_ptr<web::BasicAuth> auth;            // null: no basic_auth_users
    // null: no rate_limit. Shared with the next context when a reload keeps rate_limit as it
    // was, so that a reload (a rotated certificate, say) does not refill the bucket.
    std::shared_ptr<RateLimiter> limiter;
    std::string priorities;  // GnuTLS's, for libmicrohttpd
    std::string trust_pem;   // the client CAs handed to libmicrohttpd
    // The costly requests of this daemon whose connection is suspended (a DeferredRequest
    // each): each must be resumed before its daemon stops (libmicrohttpd's rule).
    SlowLane* lane = nullptr;
    std::mutex deferred_mutex;
    bool stopping = false;  // set by Stop, under deferred_mutex: nothing is suspended after
    std::set<std::shared_ptr<DeferredRequest>> deferred;
  };

 private:
  // `previous`: the context being replaced, whose limiter is kept if rate_limit is unchanged.
  std::unique_ptr<Context> MakeContext(std::shared_ptr<const web::WebConfig> security,
                                       const Context* previous = nullptr) const;
  // A daemon serving `context` on a duplicate of the listening socket, or an exception.
  MHD_Daemon* Start(Context& context) const;
  // Stops `daemon`, serving `context`: its suspended connections resumed first (with a 503).
  static void Stop(MHD_Daemon* daemon, Context& context);

  WebOptions options_;
  std::unique_ptr<HttpHandler> handler_;
  // After the handler: destroyed before it, as its jobs call it.
  std::unique_ptr<SlowLane> lane_;
  std::unique_ptr<Context> context_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;  // bound by us; each daemon owns a duplicate
  int port_ = 0;
};

}  // namespace rdmascope
