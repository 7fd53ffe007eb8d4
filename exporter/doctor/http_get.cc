#include "doctor/http_get.h"

#include <curl/curl.h>
#include <dlfcn.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <type_traits>

namespace rdmascope {
namespace {

struct Body {
  std::string data;
  size_t max;
  bool too_large = false;
};

size_t OnData(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<Body*>(user);
  const size_t bytes = size * count;
  if (body->data.size() + bytes > body->max) {
    body->too_large = true;
    return 0;  // libcurl stops with CURLE_WRITE_ERROR
  }
  body->data.append(data, bytes);
  return bytes;
}

// libcurl, loaded at the first request (dlopen): only `doctor --exporter` uses it, so `serve`
// never maps it and its TLS libraries (issue 17). Never unloaded: doctor is short-lived.
struct Curl {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL* handle);
  CURLcode (*easy_setopt)(CURL* handle, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL* handle);
  CURLcode (*easy_getinfo)(CURL* handle, CURLINFO info, ...);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* text);
  void (*slist_free_all)(curl_slist* list);
};

constexpr const char* kCurlLibrary = "libcurl.so.4";

std::expected<Curl, std::string> LoadCurl() {
  void* handle = dlopen(kCurlLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return std::unexpected(std::string("libcurl is not available (") +
                           (error != nullptr ? error : kCurlLibrary) +
                           "): install libcurl4 to read an exporter (doctor --exporter)");
  }
  Curl curl{};
  std::string missing;
  const auto bind = [&](const char* name, auto& out) {
    out = reinterpret_cast<std::remove_reference_t<decltype(out)>>(dlsym(handle, name));
    if (out == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  bind("curl_global_init", curl.global_init);
  bind("curl_easy_init", curl.easy_init);
  bind("curl_easy_cleanup", curl.easy_cleanup);
  bind("curl_easy_setopt", curl.easy_setopt);
  bind("curl_easy_perform", curl.easy_perform);
  bind("curl_easy_getinfo", curl.easy_getinfo);
  bind("curl_easy_strerror", curl.easy_strerror);
  bind("curl_slist_append", curl.slist_append);
  bind("curl_slist_free_all", curl.slist_free_all);
  if (!missing.empty()) {
    dlclose(handle);
    return std::unexpected(std::string(kCurlLibrary) + " lacks " + missing);
  }
  // curl_global_init is not thread-safe: once, before any handle (LoadCurl runs once).
  curl.global_init(CURL_GLOBAL_DEFAULT);
  return curl;
}

const std::expected<Curl, std::string>& TheCurl() {
  static const std::expected<Curl, std::string> curl = LoadCurl();
  return curl;
}

// libcurl's code and detail as a sentence that says what to do about it.
HttpError Explain(const Curl& api, CURLcode code, const char* detail,
                  const HttpClientOptions& client) {
  const std::string why = *detail != '\0' ? detail : api.easy_strerror(code);
  switch (code) {
    case CURLE_COULDNT_CONNECT:
      return {"cannot connect: " + why, true};
    case CURLE_COULDNT_RESOLVE_HOST:
      return {"cannot resolve the host: " + why};
    case CURLE_OPERATION_TIMEDOUT:
      return {"timed out: " + why};
    case CURLE_PEER_FAILED_VERIFICATION:
      return {"TLS: the exporter's certificate is not trusted (" + why + "): " +
              (client.ca_file.empty() ? "pass --exporter.ca-file with the CA that signed it"
                                      : "it was not signed by the CA of " + client.ca_file +
                                            ", or does not name this host")};
    case CURLE_SSL_CACERT_BADFILE:
      return {"TLS: cannot use --exporter.ca-file " + client.ca_file + ": " + why};
    case CURLE_SSL_CERTPROBLEM:
      return {
          "TLS: cannot use the client certificate or key (--exporter.cert-file, "
          "--exporter.key-file): " +
          why};
    case CURLE_SSL_CONNECT_ERROR:
      return {"TLS handshake failed (" + why +
              (client.cert_file.empty()
                   ? "): does the exporter require a client certificate (--exporter.cert-file "
                     "and --exporter.key-file)?"
                   : ")")};
    default:
      return {why};
  }
}

}  // namespace

std::expected<HttpUrl, std::string> ParseHttpUrl(const std::string& url) {
  HttpUrl parsed;
  for (const char* scheme : {"http", "https"}) {
    if (url.starts_with(std::string(scheme) + "://")) parsed.scheme = scheme;
  }
  if (parsed.scheme.empty()) return std::unexpected("not an http:// or https:// URL: " + url);
  std::string rest = url.substr(parsed.scheme.size() + 3);
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) parsed.path = rest.substr(slash);
  while (!parsed.path.empty() && parsed.path.back() == '/') parsed.path.pop_back();
  if (authority.find('@') != std::string::npos) {
    // Not echoed: the URL holds a password.
    return std::unexpected(
        "credentials in the URL are not supported: use --exporter.username and "
        "--exporter.password-file");
  }
  std::string port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return std::unexpected("unclosed [ in " + url);
    parsed.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::unexpected("bad host in " + url);
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    parsed.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (parsed.host.empty()) return std::unexpected("no host in " + url);
  if (port.empty() && authority.back() == ':') return std::unexpected("empty port in " + url);
  parsed.port = port.empty() ? (parsed.scheme == "https" ? "443" : "80") : port;
  if (parsed.port.find_first_not_of("0123456789") != std::string::npos || parsed.port.size() > 5 ||
      std::stoi(parsed.port) == 0 || std::stoi(parsed.port) > 65535) {
    return std::unexpected("bad port in " + url);
  }
  return parsed;
}

std::expected<HttpAnswer, HttpError> HttpGet(const HttpUrl& url, const std::string& target,
                                             std::chrono::milliseconds timeout,
                                             const HttpClientOptions& client, size_t max_body) {
  const auto& loaded = TheCurl();
  if (!loaded) return std::unexpected(HttpError{loaded.error()});
  const Curl& api = *loaded;
  std::unique_ptr<CURL, void (*)(CURL*)> curl(api.easy_init(), api.easy_cleanup);
  if (!curl) return std::unexpected(HttpError{"libcurl: cannot create a handle"});
  const std::string host =
      url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  const std::string full = url.scheme + "://" + host + ":" + url.port + url.path + target;
  Body body{.data = {}, .max = max_body};
  char detail[CURL_ERROR_SIZE] = {};
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> headers(
      api.slist_append(nullptr, "Accept: application/json"), api.slist_free_all);
  const std::string authorization = "Authorization: Bearer " + client.bearer_token;
  if (!client.bearer_token.empty()) {
    headers.reset(api.slist_append(headers.release(), authorization.c_str()));
  }
  CURL* h = curl.get();
  api.easy_setopt(h, CURLOPT_URL, full.c_str());
  api.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  api.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for name lookups: doctor has threads
  api.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  api.easy_setopt(h, CURLOPT_PROXY, "");  // the exporter is this host's or a node's own address
  api.easy_setopt(h, CURLOPT_USERAGENT, "rdmascope-doctor");
  api.easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  api.easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
  api.easy_setopt(h, CURLOPT_WRITEFUNCTION, OnData);
  api.easy_setopt(h, CURLOPT_WRITEDATA, &body);
  // "": every encoding this libcurl decodes; the body handed to OnData is decoded.
  if (client.compressed) api.easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
  if (!client.ca_file.empty()) api.easy_setopt(h, CURLOPT_CAINFO, client.ca_file.c_str());
  if (!client.cert_file.empty()) api.easy_setopt(h, CURLOPT_SSLCERT, client.cert_file.c_str());
  if (!client.key_file.empty()) api.easy_setopt(h, CURLOPT_SSLKEY, client.key_file.c_str());
  if (client.insecure_skip_verify) {
    api.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    api.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!client.username.empty()) {
    api.easy_setopt(h, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    api.easy_setopt(h, CURLOPT_USERNAME, client.username.c_str());
    api.easy_setopt(h, CURLOPT_PASSWORD, client.password.c_str());
  }
  const CURLcode code = api.easy_perform(h);
  if (body.too_large) return std::unexpected(HttpError{"answer larger than the limit"});
  if (code != CURLE_OK) return std::unexpected(Explain(api, code, detail, client));
  long status = 0;
  api.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  return HttpAnswer{.status = static_cast<int>(status), .body = std::move(body.data)};
}

namespace {

// A secret kept in a file: surrounding whitespace (the file's newline) is not part of it, as in
// Prometheus' password_file and bearer_token_file. Throws when it cannot be read: doctor was
// told how to log in and cannot, which is the user's to fix (exit 3).
std::string ReadSecret(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw std::runtime_error("cannot read " + flag + " " + path);
  const std::string secret = text.str();
  const size_t first = secret.find_first_not_of(" \t\r\n");
  const size_t last = secret.find_last_not_of(" \t\r\n");
  return first == std::string::npos ? "" : secret.substr(first, last - first + 1);
}

}  // namespace

HttpClientOptions ClientOptions(const doctor::ClientAccess& access, const std::string& prefix) {
  HttpClientOptions client{.ca_file = access.ca_file,
                           .cert_file = access.cert_file,
                           .key_file = access.key_file,
                           .insecure_skip_verify = access.insecure_skip_verify,
                           .username = access.username};
  if (!access.password_file.empty()) {
    client.password = ReadSecret(access.password_file, "--" + prefix + ".password-file");
  }
  if (!access.bearer_token_file.empty()) {
    client.bearer_token =
        ReadSecret(access.bearer_token_file, "--" + prefix + ".bearer-token-file");
  }
  return client;
}

}  // namespace rdmascope
