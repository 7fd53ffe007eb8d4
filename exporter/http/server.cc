#include "http/server.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/log.h"
#include "web/client_cert.h"

namespace rdmascope {

// A costly request (HttpHandler::IsCostly) whose connection is suspended while the slow lane
// answers it. The request's strings are copied: nothing refers to libmicrohttpd's memory from
// the lane. Whoever resumes the connection first (the lane with its reply, or Stop with none)
// sets `resumed` under the mutex; the other then leaves the connection alone.
struct DeferredRequest {
  MHD_Connection* connection = nullptr;
  std::string method, path, query, accept_encoding, accept;
  std::mutex mutex;
  bool resumed = false;
  std::optional<HttpReply> reply;

  HttpRequest Request() const {
    return {.method = method,
            .path = path,
            .query = query,
            .accept_encoding = accept_encoding,
            .accept = accept};
  }
  // Resumes the connection with `answer` (nullopt: the server is stopping) unless it was.
  void Resume(std::optional<HttpReply> answer) {
    std::lock_guard lock(mutex);
    if (resumed) return;
    resumed = true;
    reply = std::move(answer);
    // Safe from any thread (microhttpd.h); libmicrohttpd then calls Answer again for it.
    MHD_resume_connection(connection);
  }
};

namespace {

// Threads of the slow lane: a costly request waits for one (HttpHandler::kMaxCostlyInFlight
// may wait in all), a scrape never does.
constexpr int kSlowLaneThreads = 2;

// What libmicrohttpd keeps in *request_context between calls of Answer for one request: the
// first call marks the headers seen; a deferred request's holds its DeferredRequest.
int headers_seen;
bool IsDeferred(void* request_context) {
  return request_context != nullptr && request_context != &headers_seen;
}

// libmicrohttpd's messages at run time are about clients (resets, malformed requests, the
// connection limit): a hostile client must not flood the log. At most kLogBurst messages per
// minute, then one line saying how many were dropped.
constexpr int kLogBurst = 20;

void LogFromMhd(void* /*cls*/, const char* format, va_list args) {
  static std::atomic<int64_t> window_start{0};
  static std::atomic<int> in_window{0};
  static std::atomic<int> dropped{0};
  const int64_t minute = std::chrono::duration_cast<std::chrono::minutes>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  int64_t seen = window_start.load();
  if (seen != minute && window_start.compare_exchange_strong(seen, minute)) {
    in_window = 0;
    if (const int lost = dropped.exchange(0); lost > 0) {
      log::Warn("http server messages dropped", {{"count", std::to_string(lost)}});
    }
  }
  if (in_window.fetch_add(1) >= kLogBurst) {
    dropped.fetch_add(1);
    return;
  }
  char message[512];
  std::vsnprintf(message, sizeof message, format, args);
  std::string_view text = message;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  log::Warn("http server", {{"detail", std::string(text)}});
}

MHD_Result AppendArgument(void* cls, MHD_ValueKind /*kind*/, const char* key, const char* value) {
  auto& query = *static_cast<std::string*>(cls);
  if (!query.empty()) query += '&';
  query += key;
  if (value != nullptr) {
    query += '=';
    query += value;
  }
  return MHD_YES;
}

HttpReply Refuse(unsigned status, std::string body) {
  HttpReply reply{status, {{"Content-Type", "text/plain; charset=utf-8"}}, std::move(body)};
  return reply;
}

// The web config's gate, before any route (exporter-toolkit's webHandler, and Go's TLS
// stack for the client certificate), in Go's order: client certificate (the handshake), rate
// limit, basic auth. Every path, the landing page and /debug/* included, but for basic auth on
// /-/healthy and /-/ready (probes carry no credentials; a required client certificate still
// applies, as Go's handshake would refuse them too; and the rate limit, which exporter-toolkit
// applies to every request its handler sees, Prometheus's own /-/healthy included).
// `configured_headers` is cleared for the 429: Go writes it before setting them.
std::optional<HttpReply> Guard(HttpServer::Context& context, MHD_Connection* connection,
                               std::string_view path, bool& configured_headers) {
  if (!context.security) return std::nullopt;
  const web::TlsServerConfig& tls = context.security->tls;
  if (tls.enabled) {
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    const std::string why =
        web::CheckClientCertificate(info != nullptr ? info->tls_session : nullptr, tls);
    if (!why.empty()) {
      // Go fails the handshake here; libmicrohttpd has completed it, so the client gets a
      // 403 and the connection is closed. Debug only: a client must not flood the log.
      log::Debug("client certificate refused", {{"reason", why}});
      HttpReply reply = Refuse(403, "forbidden: " + why + "\n");
      reply.headers.emplace_back("Connection", "close");
      return reply;
    }
  }
  if (context.limiter && !context.limiter->Allow()) {
    configured_headers = false;
    return context.handler->RejectRateLimited();
  }
  if (context.auth && !IsHealthPath(path)) {
    const char* authorization =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!context.auth->Check(authorization != nullptr ? authorization : "")) {
      HttpReply reply = Refuse(401, "Unauthorized\n");
      reply.headers.emplace_back("WWW-Authenticate", "Basic");
      return reply;
    }
  }
  return std::nullopt;
}

// Sends `reply`, with the web config's headers (http_server_config.headers: on every answer,
// refusals included, but the 429: Guard clears `configured_headers` for it).
MHD_Result Queue(HttpServer::Context& context, MHD_Connection* connection, HttpReply reply,
                 bool configured_headers) {
  try {
    if (context.security && configured_headers) {
      for (const auto& header : context.security->headers) reply.headers.push_back(header);
    }
  } catch (...) {  // allocation; no exception may cross into C
    return MHD_NO;
  }
  // The body is handed over without a copy; libmicrohttpd frees it with the response.
  auto* body = new (std::nothrow) std::string(std::move(reply.body));
  if (body == nullptr) return MHD_NO;
  MHD_Response* response = MHD_create_response_from_buffer_with_free_callback_cls(
      body->size(), body->data(), [](void* owned) { delete static_cast<std::string*>(owned); },
      body);
  if (response == nullptr) {
    delete body;
    return MHD_NO;
  }
  for (const auto& [name, value] : reply.headers) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  const MHD_Result queued = MHD_queue_response(connection, reply.status, response);
  MHD_destroy_response(response);
  return queued;
}

// Hands a costly request to the slow lane and suspends its connection: nullopt. Or the reply
// that refuses it at once: past its limits (HttpHandler::AdmitCostly), or the daemon stopping.
std::optional<HttpReply> Defer(HttpServer::Context& context, MHD_Connection* connection,
                               const HttpRequest& request, void** request_context) {
  HttpReply refusal;
  std::shared_ptr<void> slot = context.handler->AdmitCostly(refusal);
  if (!slot) return refusal;
  auto deferred = std::make_shared<DeferredRequest>();
  deferred->connection = connection;
  deferred->method = request.method;
  deferred->path = request.path;
  deferred->query = request.query;
  deferred->accept_encoding = request.accept_encoding;
  deferred->accept = request.accept;
  auto holder = std::make_unique<std::shared_ptr<DeferredRequest>>(deferred);
  {
    // Under the lock Stop takes: a connection is never suspended after Stop resumed them all.
    std::lock_guard lock(context.deferred_mutex);
    if (context.stopping) return Refuse(503, "server restarting, try again\n");
    context.deferred.insert(deferred);
    *request_context = holder.release();
    MHD_suspend_connection(connection);
  }
  const HttpHandler* handler = context.handler;
  try {
    // The slot is freed when the job is destroyed, after it ran (or dropped, when the lane
    // stops); the handler outlives the lane (HttpServer's members).
    context.lane->Submit([handler, deferred, slot = std::move(slot)] {
      std::optional<HttpReply> answer;
      try {
        answer = handler->Handle(deferred->Request());  // catches all but allocation
      } catch (...) {
      }
      deferred->Resume(std::move(answer));
    });
  } catch (...) {  // allocation: answered at once rather than left suspended
    deferred->Resume(std::nullopt);
  }
  return std::nullopt;
}

MHD_Result Answer(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                  void** request_context) {
  auto& context = *static_cast<HttpServer::Context*>(cls);
  // libmicrohttpd calls this once when the headers are in, again per piece of body, and a
  // last time when the request is complete. A response queued before the request is complete
  // makes it close the connection, so GET and HEAD are answered on the last call (their
  // connection stays open for keep-alive; a body, which no route reads, is discarded). Any
  // other method gets its 405 at once and the connection closes: no reading a body for it.
  const std::string_view method_name = method;
  const bool keep_alive_method = method_name == "GET" || method_name == "HEAD";
  if (IsDeferred(*request_context)) {
    // Resumed: the lane's reply, or none when the daemon is stopping.
    auto& deferred = **static_cast<std::shared_ptr<DeferredRequest>*>(*request_context);
    std::lock_guard lock(deferred.mutex);
    return Queue(context, connection,
                 deferred.reply ? std::move(*deferred.reply)
                                : Refuse(503, "not answered: the server is restarting\n"),
                 true);
  }
  if (keep_alive_method && *request_context == nullptr) {
    *request_context = &headers_seen;
    return MHD_YES;
  }
  if (keep_alive_method && *upload_data_size != 0) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  HttpReply reply;
  bool configured_headers = true;
  try {
    if (auto refused = Guard(context, connection, url, configured_headers)) {
      reply = std::move(*refused);
    } else {
      HttpRequest request{.method = method, .path = url};
      MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &AppendArgument, &request.query);
      if (const char* accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                           MHD_HTTP_HEADER_ACCEPT_ENCODING)) {
        request.accept_encoding = accept;
      }
      if (const char* accept =
              MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT)) {
        request.accept = accept;
      }
      if (context.lane != nullptr && context.handler->IsCostly(request)) {
        if (auto not_deferred = Defer(context, connection, request, request_context)) {
          reply = std::move(*not_deferred);
        } else {
          return MHD_YES;  // suspended: the lane resumes it with its answer
        }
      } else {
        reply = context.handler->Handle(request);
      }
    }
  } catch (...) {  // only allocation can throw here; no exception may cross into C
    return MHD_NO;
  }
  return Queue(context, connection, std::move(reply), configured_headers);
}

// libmicrohttpd's MHD_OPTION_NOTIFY_COMPLETED: a request's end, answered or not (the client
// left, the daemon stopped). A deferred request's holder is released here, never earlier: the
// resumed call of Answer reads it.
void Completed(void* cls, MHD_Connection* /*connection*/, void** request_context,
               MHD_RequestTerminationCode /*code*/) {
  if (!IsDeferred(*request_context)) return;
  auto& context = *static_cast<HttpServer::Context*>(cls);
  auto* holder = static_cast<std::shared_ptr<DeferredRequest>*>(*request_context);
  {
    std::lock_guard lock(context.deferred_mutex);
    context.deferred.erase(*holder);
  }
  delete holder;
  *request_context = nullptr;
}

std::string ReadTextFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

}  // namespace

int ListenOn(const std::string& listen_address) {
  const auto address = ParseListenAddress(listen_address);
  if (!address) throw std::runtime_error(address.error());
  const auto listen_fd = BindListenSocket(*address);
  if (!listen_fd) {
    throw std::runtime_error("cannot listen on " + listen_address + ": " + listen_fd.error());
  }
  return *listen_fd;
}

HttpServer::HttpServer(const WebOptions& options, std::shared_ptr<CollectorRunner> runner,
                       DebugRoutes routes)
    : HttpServer(options, ListenOn(options.listen_address), std::move(runner), std::move(routes)) {}

HttpServer::HttpServer(const WebOptions& options, int listen_fd,
                       std::shared_ptr<CollectorRunner> runner, DebugRoutes routes)
    : options_(options) {
  listen_fd_ = listen_fd;
  try {
    handler_ = std::make_unique<HttpHandler>(std::move(runner), options.telemetry_path,
                                             std::move(routes), options.max_requests);
    lane_ = std::make_unique<SlowLane>(kSlowLaneThreads);
    context_ = MakeContext(options.security);
    port_ = LocalPort(listen_fd_);
    daemon_ = Start(*context_);
  } catch (...) {
    close(listen_fd_);
    throw;
  }
}

std::unique_ptr<HttpServer::Context> HttpServer::MakeContext(
    std::shared_ptr<const web::WebConfig> security, const Context* previous) const {
  auto context = std::make_unique<Context>();
  context->handler = handler_.get();
  context->lane = lane_.get();
  context->security = std::move(security);
  if (!context->security) return context;
  if (const web::RateLimit& limit = context->security->rate_limit; limit.limits()) {
    // exporter-toolkit builds its limiter once, at start; rdmascope applies a changed
    // rate_limit on reload (a new, full bucket) and keeps the bucket of an unchanged one.
    const bool same = previous != nullptr && previous->limiter && previous->security &&
                      previous->security->rate_limit == limit;
    context->limiter = same ? previous->limiter
                            : std::make_shared<RateLimiter>(
                                  std::chrono::nanoseconds(limit.interval_ns), limit.burst);
  }
  if (!context->security->basic_auth_users.empty()) {
    context->auth = std::make_unique<web::BasicAuth>(context->security->basic_auth_users);
  }
  const web::TlsServerConfig& tls = context->security->tls;
  if (!tls.enabled) return context;
  auto priorities = web::GnutlsPriorities(tls);
  if (!priorities) throw std::runtime_error(priorities.error());
  context->priorities = std::move(*priorities);
  if (tls.client_auth != web::ClientAuth::kNoClientCert) {
    // libmicrohttpd asks clients for a certificate only when it has a trust list. Without
    // client_ca_file, Go verifies against the system's roots: so do we.
    context->trust_pem = !tls.client_ca_pem.empty()
                             ? tls.client_ca_pem
                             : ReadTextFile("/etc/ssl/certs/ca-certificates.crt");
    if (context->trust_pem.empty()) {
      throw std::runtime_error(
          "client_auth_type needs client_ca_file: no system CA bundle at "
          "/etc/ssl/certs/ca-certificates.crt");
    }
  }
  return context;
}

MHD_Daemon* HttpServer::Start(Context& context) const {
  // Only the thread pool's own epoll threads: no thread per connection, so idle keep-alive
  // connections hold nothing but their socket (and at most max_connections of them).
  // MHD_USE_ITC: MHD_quiesce_daemon needs it in this mode (Reload).
  // MHD_ALLOW_SUSPEND_RESUME: the costly routes' connections wait suspended (Defer).
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC |
                   MHD_ALLOW_SUSPEND_RESUME;
  std::vector<MHD_OptionItem> pool;
  if (options_.threads > 1) {
    pool.push_back({MHD_OPTION_THREAD_POOL_SIZE, static_cast<intptr_t>(options_.threads), nullptr});
  }
  if (context.security && context.security->tls.enabled) {
    // libmicrohttpd keeps these pointers: the strings live in the context, as long as the
    // daemon.
    const web::TlsServerConfig& tls = context.security->tls;
    flags |= MHD_USE_TLS;
    pool.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(tls.key_pem.c_str())});
    pool.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(tls.cert_pem.c_str())});
    pool.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, context.priorities.data()});
    if (!context.trust_pem.empty()) {
      pool.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, context.trust_pem.data()});
    }
  }
  pool.push_back({MHD_OPTION_END, 0, nullptr});
  const int fd = fcntl(listen_fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    throw std::runtime_error(std::string("cannot duplicate the listening socket: ") +
                             std::strerror(errno));
  }
  MHD_Daemon* daemon = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Answer, &context,
      // First, so that start-up messages reach our log too.
      MHD_OPTION_EXTERNAL_LOGGER, &LogFromMhd, nullptr,  //
      MHD_OPTION_LISTEN_SOCKET, fd,                      //
      MHD_OPTION_NOTIFY_COMPLETED, &Completed, &context,  //
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(options_.idle_timeout_seconds),
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(options_.max_connections),  //
      MHD_OPTION_ARRAY, pool.data(),                                                 //
      MHD_OPTION_END);
  if (daemon == nullptr) {
    close(fd);
    throw std::runtime_error("cannot start the HTTP server on " + options_.listen_address);
  }
  return daemon;
}

void HttpServer::Reload(std::shared_ptr<const web::WebConfig> security) {
  std::unique_ptr<Context> context = MakeContext(std::move(security), context_.get());
  MHD_Daemon* daemon = Start(*context);  // both accept on the socket for a moment
  const int old_fd = MHD_quiesce_daemon(daemon_);
  Stop(daemon_, *context_);
  if (old_fd >= 0) close(old_fd);  // after the stop, as libmicrohttpd asks
  daemon_ = daemon;
  context_ = std::move(context);
}

HttpServer::~HttpServer() {
  // Stops the threads and closes every connection and the daemon's socket, then ours; then
  // the lane (waiting for the job it runs), before the handler its jobs call.
  if (daemon_ != nullptr) Stop(daemon_, *context_);
  if (listen_fd_ >= 0) close(listen_fd_);
  lane_.reset();
}

void HttpServer::Stop(MHD_Daemon* daemon, Context& context) {
  {
    // libmicrohttpd forbids stopping a daemon with suspended connections (microhttpd.h,
    // MHD_suspend_connection): each is resumed, to a 503, first. The lane's answer, when it
    // comes, finds it resumed and is dropped.
    std::lock_guard lock(context.deferred_mutex);
    context.stopping = true;
    for (const auto& deferred : context.deferred) deferred->Resume(std::nullopt);
  }
  MHD_stop_daemon(daemon);
}

}  // namespace rdmascope
