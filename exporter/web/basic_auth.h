// HTTP basic authentication against exporter-toolkit's basic_auth_users (bcrypt hashes), as
// its web/handler.go does: a verified (user, hash, password) is cached so that a scrape does
// not pay bcrypt (~225 ms at cost 12) each time; bcrypt runs one at a time; an unknown user is
// checked against a fixed hash so that timing does not tell which users exist.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace rdmascope::web {

class BasicAuth {
 public:
  // users: name -> bcrypt hash, already validated (web_config.h).
  explicit BasicAuth(std::map<std::string, std::string> users);

  bool enabled() const { return !users_.empty(); }

  // True if the Authorization header's value ("Basic base64(user:password)") names a
  // configured user with the right password. Thread-safe.
  bool Check(std::string_view authorization);

  // bcrypt computations so far (the cache hits are the checks that did not need one).
  int bcrypt_runs() const;
  // Verdicts cached now (at most kCacheSize).
  size_t cached() const;

  static constexpr size_t kCacheSize = 100;  // exporter-toolkit's cacheSize

 private:
  bool Verify(const std::string& password, const std::string& hash);

  std::map<std::string, std::string> users_;
  mutable std::mutex cache_mutex_;
  std::unordered_map<std::string, bool> cache_;  // SHA-256(user, hash, password) -> ok
  std::mutex bcrypt_mutex_;                      // bcrypt is CPU-heavy: one at a time
  int bcrypt_runs_ = 0;                          // guarded by cache_mutex_
};

struct Credentials {
  std::string user, password;
};
// "Basic dXNlcjpwYXNz" -> {"user", "pass"}; false on any malformation (bad scheme, bad
// base64, no colon).
bool ParseBasicAuthorization(std::string_view authorization, Credentials& out);

}  // namespace rdmascope::web
