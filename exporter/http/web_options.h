// How `serve` listens and answers: address, path, threads, limits, --web.config.file.
#pragma once

#include <memory>
#include <string>

#include "core/default_port.h"
#include "web/web_config.h"

namespace rdmascope {

struct WebOptions {
  std::string listen_address = ":" + std::to_string(kDefaultPort);
  std::string telemetry_path = "/metrics";
  int threads = 4;                // libmicrohttpd's thread pool (each thread an epoll loop)
  int idle_timeout_seconds = 60;  // a connection silent this long is closed (keep-alive or not)
  int max_connections = 1024;     // open connections at most; more wait in the listen queue
  // Scrapes running at once at most (--web.max-requests, node_exporter's default); past it 503.
  // 0: no limit. The thread pool bounds them to `threads` as well (docs/architecture.md).
  int max_requests = 40;
  // --web.config.file (exporter-toolkit's format): TLS, basic auth, headers. Loaded and
  // validated by FinishServeConfig; null without the flag (plain HTTP, no auth).
  std::string config_file;
  std::shared_ptr<const web::WebConfig> security;
  bool config_check = false;  // --web.config.check: validate the file and exit
};

}  // namespace rdmascope
