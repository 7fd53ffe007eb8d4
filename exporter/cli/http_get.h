// A minimal blocking HTTP/1.1 GET for `doctor --exporter`: plain http:// only (the exporter
// listens on loopback by default), one request, the whole answer read until the server closes,
// every step bounded by one deadline so that a silent server never hangs doctor. Not a general
// client: no TLS, no redirects, no proxies (libcurl would bring those, doctor needs none).
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <string>

namespace rdmascope {

struct HttpUrl {
  std::string host;  // a name or an address; [v6] brackets removed
  std::string port;  // "80" when absent
  std::string path;  // without the trailing '/', "" for the root
};

// http://HOST[:PORT][/PATH]; anything else (https://, no host, a bad port) is an error saying why.
std::expected<HttpUrl, std::string> ParseHttpUrl(const std::string& url);

struct HttpAnswer {
  int status = 0;
  std::string body;
};

// GETs `target` (path and query) from `url`'s host; the error says what failed (resolve,
// connect refused, timed out, a malformed answer). At most `max_body` bytes are accepted.
std::expected<HttpAnswer, std::string> HttpGet(const HttpUrl& url, const std::string& target,
                                               std::chrono::milliseconds timeout,
                                               size_t max_body = 16 << 20);

}  // namespace rdmascope
