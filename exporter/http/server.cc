#include "http/server.h"

#include <microhttpd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <stdexcept>

#include "core/log.h"

namespace rdmascope {
namespace {

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

MHD_Result Answer(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                  void** request_context) {
  const auto& handler = *static_cast<const HttpHandler*>(cls);
  // libmicrohttpd calls this once when the headers are in, again per piece of body, and a
  // last time when the request is complete. A response queued before the request is complete
  // makes it close the connection, so GET and HEAD are answered on the last call (their
  // connection stays open for keep-alive; a body, which no route reads, is discarded). Any
  // other method gets its 405 at once and the connection closes: no reading a body for it.
  const std::string_view method_name = method;
  const bool keep_alive_method = method_name == "GET" || method_name == "HEAD";
  static int headers_seen;
  if (keep_alive_method && *request_context == nullptr) {
    *request_context = &headers_seen;
    return MHD_YES;
  }
  if (keep_alive_method && *upload_data_size != 0) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  HttpReply reply;
  try {
    HttpRequest request{.method = method, .path = url};
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &AppendArgument, &request.query);
    if (const char* accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_ACCEPT_ENCODING)) {
      request.accept_encoding = accept;
    }
    reply = handler.Handle(request);
  } catch (...) {  // only allocation can throw here; no exception may cross into C
    return MHD_NO;
  }
  // The body is handed over without a copy; libmicrohttpd frees it with the response.
  auto* body = new std::string(std::move(reply.body));
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

}  // namespace

HttpServer::HttpServer(const WebOptions& options, std::shared_ptr<CollectorRunner> runner,
                       DebugRoutes routes)
    : handler_(std::make_unique<HttpHandler>(std::move(runner), options.telemetry_path,
                                             std::move(routes))) {
  const auto address = ParseListenAddress(options.listen_address);
  if (!address) throw std::runtime_error(address.error());
  const auto listen_fd = BindListenSocket(*address);
  if (!listen_fd) {
    throw std::runtime_error("cannot listen on " + options.listen_address + ": " +
                             listen_fd.error());
  }
  port_ = LocalPort(*listen_fd);

  // Only the thread pool's own epoll threads: no thread per connection, so idle keep-alive
  // connections hold nothing but their socket (and at most max_connections of them).
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
  MHD_OptionItem pool[] = {
      {options.threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
       static_cast<intptr_t>(options.threads), nullptr},
      {MHD_OPTION_END, 0, nullptr},
  };
  daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Answer, handler_.get(),
      // First, so that start-up messages reach our log too.
      MHD_OPTION_EXTERNAL_LOGGER, &LogFromMhd, nullptr,  //
      MHD_OPTION_LISTEN_SOCKET, *listen_fd,              //
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(options.idle_timeout_seconds),
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(options.max_connections),  //
      MHD_OPTION_ARRAY, pool,                                                       //
      MHD_OPTION_END);
  if (daemon_ == nullptr) {
    close(*listen_fd);
    throw std::runtime_error("cannot start the HTTP server on " + options.listen_address);
  }
}

HttpServer::~HttpServer() {
  // Stops the threads and closes every connection and the listening socket.
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace rdmascope
