// One blocking GET for `doctor --exporter`, with libcurl: http:// and https:// (server
// verification against the system's or a given CA, a client certificate for mTLS), basic auth,
// one deadline for the whole request so that a silent server never hangs doctor. No redirects
// and no proxies (the exporter is a host's own address). The options mirror what
// --web.config.file can ask of a client (docs/doctor.md, "History mode").
// libcurl (libcurl.so.4) is loaded with dlopen at the first request, so that `serve` never maps
// it; without it HttpGet fails saying so.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <string>

#include "doctor/options.h"

namespace rdmascope {

struct HttpUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // a name or an address; [v6] brackets removed
  std::string port;    // "80" / "443" when absent
  std::string path;    // without the trailing '/', "" for the root
};

// http[s]://HOST[:PORT][/PATH]; anything else (another scheme, no host, a bad port, credentials
// in the URL) is an error saying why.
std::expected<HttpUrl, std::string> ParseHttpUrl(const std::string& url);

// How to reach an exporter behind --web.config.file. Empty strings: not used.
struct HttpClientOptions {
  std::string ca_file;    // CA bundle the server's certificate must chain to (else the system's)
  std::string cert_file;  // client certificate and key, for client_auth_type RequireAndVerify...
  std::string key_file;
  bool insecure_skip_verify = false;  // accept any server certificate and name
  std::string username;               // basic auth, sent only with a password
  std::string password;
  std::string bearer_token;  // "Authorization: Bearer", as Prometheus' bearer_token_file sends it
  // Ask for a compressed answer (Accept-Encoding: gzip, deflate...): a Prometheus query API
  // answer shrinks some 50 times (docs/benchmarks.md).
  bool compressed = false;
};

struct HttpAnswer {
  int status = 0;
  std::string body;
};

// Why a GET failed; `unreachable` when nothing listens at the address (the ordinary case of a
// host without `serve`, which doctor reports at info level).
struct HttpError {
  std::string message;
  bool unreachable = false;
};

// GETs `target` (path and query) below `url`; at most `max_body` bytes are accepted.
std::expected<HttpAnswer, HttpError> HttpGet(const HttpUrl& url, const std::string& target,
                                             std::chrono::milliseconds timeout,
                                             const HttpClientOptions& client = {},
                                             size_t max_body = 16 << 20);

// The HTTP client options of `--PREFIX.*` (exporter, prometheus): its password and bearer token
// read from their files. Throws when a file cannot be read.
HttpClientOptions ClientOptions(const doctor::ClientAccess& access, const std::string& prefix);

}  // namespace rdmascope
