#include "web/basic_auth.h"

#include <crypt.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <array>
#include <cctype>
#include <memory>

namespace rdmascope::web {
namespace {

// exporter-toolkit's hash of "fakepassword", checked for unknown users so that they cost the
// same time as known ones.
constexpr char kFakeHash[] = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding (RFC 7617 uses RFC 4648 section 4), strict.
bool DecodeBase64(std::string_view in, std::string& out) {
  if (in.size() % 4 != 0) return false;
  out.clear();
  for (size_t i = 0; i < in.size(); i += 4) {
    int values[4];
    int padding = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = in[i + j];
      const bool last_group = i + 4 == in.size();
      if (c == '=' && last_group && j >= 2 && (j == 3 || in[i + 3] == '=')) {
        values[j] = 0;
        ++padding;
        continue;
      }
      if (padding > 0 || (values[j] = Base64Value(c)) < 0) return false;
    }
    const unsigned bits = (values[0] << 18) | (values[1] << 12) | (values[2] << 6) | values[3];
    out += static_cast<char>(bits >> 16);
    if (padding < 2) out += static_cast<char>((bits >> 8) & 0xff);
    if (padding < 1) out += static_cast<char>(bits & 0xff);
  }
  return true;
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

// The cache key: a digest, so that passwords are not kept in memory in clear (later
// exporter-toolkit releases hash the key with SHA-256 too). Lengths first: no two different
// triples give the same input.
std::string CacheKey(const std::string& user, const std::string& hash,
                     const std::string& password) {
  std::string input;
  for (const std::string* part : {&user, &hash, &password}) {
    input += std::to_string(part->size()) + ':' + *part;
  }
  std::array<unsigned char, 32> digest{};
  gnutls_hash_fast(GNUTLS_DIG_SHA256, input.data(), input.size(), digest.data());
  return std::string(digest.begin(), digest.end());
}

}  // namespace

bool ParseBasicAuthorization(std::string_view authorization, Credentials& out) {
  // The scheme is case-insensitive (RFC 7235 section 2.1).
  constexpr std::string_view kScheme = "basic ";
  if (authorization.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  }
  std::string_view encoded = authorization.substr(kScheme.size());
  while (!encoded.empty() && encoded.front() == ' ') encoded.remove_prefix(1);
  std::string decoded;
  if (!DecodeBase64(encoded, decoded)) return false;
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  out.user = decoded.substr(0, colon);
  out.password = decoded.substr(colon + 1);
  return true;
}

BasicAuth::BasicAuth(std::map<std::string, std::string> users) : users_(std::move(users)) {}

int BasicAuth::bcrypt_runs() const {
  std::lock_guard lock(cache_mutex_);
  return bcrypt_runs_;
}

size_t BasicAuth::cached() const {
  std::lock_guard lock(cache_mutex_);
  return cache_.size();
}

bool BasicAuth::Verify(const std::string& password, const std::string& hash) {
  // crypt_rn never takes a NUL inside the password: such a password matches nothing.
  if (password.find('\0') != std::string::npos) return false;
  auto data = std::make_unique<crypt_data>();  // 32 KiB: not on an HTTP thread's stack
  std::lock_guard lock(bcrypt_mutex_);
  const char* computed =
      crypt_rn(password.c_str(), hash.c_str(), data.get(), static_cast<int>(sizeof *data));
  // libxcrypt returns null (or a string starting with '*') on failure.
  if (computed == nullptr || computed[0] == '*') return false;
  return ConstantTimeEqual(computed, hash);
}

bool BasicAuth::Check(std::string_view authorization) {
  Credentials credentials;
  if (!ParseBasicAuthorization(authorization, credentials)) return false;
  const auto user = users_.find(credentials.user);
  const bool known = user != users_.end();
  const std::string& hash = known ? user->second : std::string(kFakeHash);
  const std::string key = CacheKey(credentials.user, hash, credentials.password);
  {
    std::lock_guard lock(cache_mutex_);
    if (const auto cached = cache_.find(key); cached != cache_.end()) return cached->second;
  }
  const bool ok = Verify(credentials.password, hash) && known;
  std::lock_guard lock(cache_mutex_);
  ++bcrypt_runs_;
  if (cache_.size() >= kCacheSize) {
    // exporter-toolkit drops a tenth of the entries at random when full; the keys are
    // digests, so the hash table's first tenth is as good as a random one.
    size_t drop = cache_.size() / 10 + 1;
    for (auto it = cache_.begin(); it != cache_.end() && drop > 0; --drop) it = cache_.erase(it);
  }
  cache_.emplace(key, ok);
  return ok;
}

}  // namespace rdmascope::web
