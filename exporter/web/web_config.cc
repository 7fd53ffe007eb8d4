#include "web/web_config.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "web/go_decode.h"

namespace rdmascope::web {
namespace {

using Error = std::unexpected<std::string>;

// Go's tls.CipherSuites() (the secure list: exporter-toolkit rejects every other name, RC4,
// 3DES and CBC-SHA256 included) with the GnuTLS priority keywords of each part. GnuTLS
// chooses suites from sets of key exchanges, ciphers and MACs, so a list is enforced as the
// union of its parts (docs/security.md). TLS 1.3 suites have no key exchange of their own.
struct CipherSuite {
  std::string_view iana, kx, cipher, mac;
};
constexpr std::array<CipherSuite, 17> kCipherSuites{{
    {"TLS_RSA_WITH_AES_128_CBC_SHA", "RSA", "AES-128-CBC", "SHA1"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", "RSA", "AES-256-CBC", "SHA1"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", "RSA", "AES-128-GCM", "AEAD"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", "RSA", "AES-256-GCM", "AEAD"},
    {"TLS_AES_128_GCM_SHA256", "", "AES-128-GCM", "AEAD"},
    {"TLS_AES_256_GCM_SHA384", "", "AES-256-GCM", "AEAD"},
    {"TLS_CHACHA20_POLY1305_SHA256", "", "CHACHA20-POLY1305", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA", "AES-128-CBC", "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA", "AES-256-CBC", "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA", "AES-128-CBC", "SHA1"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA", "AES-256-CBC", "SHA1"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA", "AES-128-GCM", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA", "AES-128-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA", "AES-256-GCM", "AEAD"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA", "CHACHA20-POLY1305", "AEAD"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA", "CHACHA20-POLY1305", "AEAD"},
}};

// exporter-toolkit's curves map.
constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kCurves{{
    {"CurveP256", "GROUP-SECP256R1"},
    {"CurveP384", "GROUP-SECP384R1"},
    {"CurveP521", "GROUP-SECP521R1"},
    {"X25519", "GROUP-X25519"},
}};

// exporter-toolkit's extraHTTPHeaders: only these may be set; an empty list allows any value.
const std::map<std::string, std::vector<std::string>, std::less<>>& AllowedHeaders() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> allowed{
      {"Strict-Transport-Security", {}},
      {"X-Content-Type-Options", {"nosniff"}},
      {"X-Frame-Options", {"deny", "sameorigin"}},
      {"X-XSS-Protection", {}},
      {"Content-Security-Policy", {}},
  };
  return allowed;
}

std::string Where(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? std::string() : "line " + std::to_string(mark.line + 1) + ": ";
}

// Strict decoding as yaml.v2's UnmarshalStrict: a mapping whose keys are all known, each once.
// A null node (the key present with no value) is an empty mapping.
std::expected<std::vector<std::pair<std::string, YAML::Node>>, std::string> Fields(
    const YAML::Node& node, std::string_view what, const std::set<std::string_view>& known) {
  std::vector<std::pair<std::string, YAML::Node>> fields;
  if (node.IsNull()) return fields;
  if (!node.IsMap()) return Error(Where(node) + std::string(what) + " must be a mapping");
  std::set<std::string> seen;
  for (const auto& item : node) {
    if (!item.first.IsScalar()) return Error(Where(item.first) + "keys must be strings");
    const std::string key = item.first.Scalar();
    if (!known.empty() && !known.contains(key)) {
      return Error(Where(item.first) + "field " + key + " not found in " + std::string(what));
    }
    if (!seen.insert(key).second) {
      return Error(Where(item.first) + "key " + key + " already set in " + std::string(what));
    }
    fields.emplace_back(key, item.second);
  }
  return fields;
}

std::expected<std::string, std::string> String(const YAML::Node& node, std::string_view key) {
  if (node.IsNull()) return std::string();
  if (!node.IsScalar()) return Error(Where(node) + std::string(key) + " must be a string");
  return node.Scalar();
}

std::expected<std::vector<std::string>, std::string> StringList(const YAML::Node& node,
                                                                std::string_view key) {
  std::vector<std::string> out;
  if (node.IsNull()) return out;
  if (!node.IsSequence()) return Error(Where(node) + std::string(key) + " must be a list");
  for (const auto& item : node) {
    auto value = String(item, key);
    if (!value) return Error(value.error());
    out.push_back(std::move(*value));
  }
  return out;
}

std::expected<bool, std::string> Bool(const YAML::Node& node, std::string_view key) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    return Error(Where(node) + std::string(key) + " must be true or false");
  }
  return value;
}

std::expected<TlsVersion, std::string> Version(const YAML::Node& node, std::string_view key) {
  auto text = String(node, key);
  if (!text) return Error(text.error());
  for (const auto& [name, version] :
       {std::pair{"TLS10", TlsVersion::kTls10}, std::pair{"TLS11", TlsVersion::kTls11},
        std::pair{"TLS12", TlsVersion::kTls12}, std::pair{"TLS13", TlsVersion::kTls13}}) {
    if (*text == name) return version;
  }
  return Error(Where(node) + std::string(key) + ": unknown TLS version: " + *text);
}

std::expected<ClientAuth, std::string> ParseClientAuth(const std::string& text) {
  if (text.empty() || text == "NoClientCert") return ClientAuth::kNoClientCert;
  if (text == "RequestClientCert") return ClientAuth::kRequestClientCert;
  // "RequireClientCert": kept by exporter-toolkit for backwards compatibility.
  if (text == "RequireAnyClientCert" || text == "RequireClientCert") {
    return ClientAuth::kRequireAnyClientCert;
  }
  if (text == "VerifyClientCertIfGiven") return ClientAuth::kVerifyClientCertIfGiven;
  if (text == "RequireAndVerifyClientCert") return ClientAuth::kRequireAndVerifyClientCert;
  return Error("client_auth_type: invalid value: " + text);
}

std::filesystem::path Resolve(const std::filesystem::path& directory, const std::string& path) {
  // config_util.JoinDir: an empty or absolute path is kept as it is.
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  return directory / path;
}

std::expected<std::string, std::string> ReadFile(const std::filesystem::path& path,
                                                 std::string_view key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error(std::string(key) + ": cannot read " + path.string() + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

gnutls_datum_t Datum(const std::string& text) {
  return {reinterpret_cast<unsigned char*>(const_cast<char*>(text.data())),
          static_cast<unsigned>(text.size())};
}

// Where a PEM came from, for messages: the file, or the inline key (never its text: `key` is
// a secret, config_util.Secret).
std::string Source(const std::filesystem::path& file, std::string_view inline_key) {
  return file.empty() ? "inline " + std::string(inline_key) : file.string();
}

// The checks tls.X509KeyPair makes: both parse and the key is the certificate's.
std::expected<void, std::string> CheckKeyPair(const TlsServerConfig& tls) {
  gnutls_certificate_credentials_t credentials = nullptr;
  if (gnutls_certificate_allocate_credentials(&credentials) < 0) {
    return Error("cannot allocate TLS credentials");
  }
  const gnutls_datum_t cert = Datum(tls.cert_pem), key = Datum(tls.key_pem);
  const int status =
      gnutls_certificate_set_x509_key_mem(credentials, &cert, &key, GNUTLS_X509_FMT_PEM);
  gnutls_certificate_free_credentials(credentials);
  if (status < 0) {
    return Error("tls_server_config: failed to load the key pair (" +
                 Source(tls.cert_file, "cert") + ", " + Source(tls.key_file, "key") +
                 "): " + gnutls_strerror(status));
  }
  return {};
}

std::expected<void, std::string> CheckClientCa(const TlsServerConfig& tls) {
  gnutls_x509_crt_t* certs = nullptr;
  unsigned count = 0;
  const gnutls_datum_t pem = Datum(tls.client_ca_pem);
  const int status = gnutls_x509_crt_list_import2(&certs, &count, &pem, GNUTLS_X509_FMT_PEM, 0);
  for (unsigned i = 0; i < count; ++i) gnutls_x509_crt_deinit(certs[i]);
  gnutls_free(certs);
  // Stricter than Go's AppendCertsFromPEM, which ignores a file without certificates and so
  // trusts nobody without saying why.
  if (status < 0 || count == 0) {
    return Error(std::string(tls.client_ca_file.empty() ? "client_ca" : "client_ca_file") +
                 ": no PEM certificate in " + Source(tls.client_ca_file, "client_ca") +
                 (status < 0 ? std::string(": ") + gnutls_strerror(status) : std::string()));
  }
  return {};
}

// What TLS uses of a file/inline pair: the file if named (exporter-toolkit reads it and
// ignores the inline text, said in a note), else the inline text.
std::expected<std::string, std::string> Material(const std::filesystem::path& file,
                                                 const std::string& inline_text,
                                                 std::string_view file_key,
                                                 std::string_view inline_key,
                                                 std::vector<std::string>& notes) {
  if (file.empty()) return inline_text;
  if (!inline_text.empty()) {
    notes.push_back("tls_server_config." + std::string(inline_key) + " is ignored: " +
                    std::string(file_key) + " is set and wins (as in exporter-toolkit)");
  }
  return ReadFile(file, file_key);
}

std::expected<void, std::string> ParseTls(const YAML::Node& node, const std::filesystem::path& dir,
                                          TlsServerConfig& tls, std::vector<std::string>& notes) {
  const auto fields =
      Fields(node, "tls_server_config",
             {"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type",
              "client_ca_file", "client_allowed_sans", "cipher_suites", "curve_preferences",
              "min_version", "max_version", "prefer_server_cipher_suites"});
  if (!fields) return Error(fields.error());
  std::string client_auth;
  for (const auto& [key, value] : *fields) {
    std::expected<void, std::string> ok;
    auto text = [&](std::string& out) -> std::expected<void, std::string> {
      auto parsed = String(value, key);
      if (!parsed) return Error(parsed.error());
      out = std::move(*parsed);
      return {};
    };
    std::string path;
    if (key == "cert") {
      ok = text(tls.cert);
    } else if (key == "key") {
      ok = text(tls.key);
    } else if (key == "client_ca") {
      ok = text(tls.client_ca);
    } else if (key == "cert_file") {
      ok = text(path);
      tls.cert_file = Resolve(dir, path);
    } else if (key == "key_file") {
      ok = text(path);
      tls.key_file = Resolve(dir, path);
    } else if (key == "client_ca_file") {
      ok = text(path);
      tls.client_ca_file = Resolve(dir, path);
    } else if (key == "client_auth_type") {
      ok = text(client_auth);
    } else if (key == "client_allowed_sans") {
      auto list = StringList(value, key);
      if (!list) return Error(list.error());
      // null stays unset, as Go's nil slice; [] is set (and matches no certificate).
      if (!value.IsNull()) tls.client_allowed_sans = std::move(*list);
    } else if (key == "cipher_suites") {
      auto list = StringList(value, key);
      if (!list) return Error(list.error());
      for (const std::string& name : *list) {
        if (std::ranges::none_of(kCipherSuites, [&](const auto& s) { return s.iana == name; })) {
          return Error(Where(value) + "cipher_suites: unknown cipher: " + name);
        }
      }
      tls.cipher_suites = std::move(*list);
    } else if (key == "curve_preferences") {
      auto list = StringList(value, key);
      if (!list) return Error(list.error());
      for (const std::string& name : *list) {
        if (std::ranges::none_of(kCurves, [&](const auto& c) { return c.first == name; })) {
          return Error(Where(value) + "curve_preferences: unknown curve: " + name);
        }
      }
      tls.curve_preferences = std::move(*list);
    } else if (key == "min_version" || key == "max_version") {
      auto version = Version(value, key);
      if (!version) return Error(version.error());
      (key == "min_version" ? tls.min_version : tls.max_version) = *version;
    } else if (key == "prefer_server_cipher_suites") {
      auto flag = Bool(value, key);
      if (!flag) return Error(flag.error());
      tls.prefer_server_cipher_suites = *flag;
    }
    if (!ok) return ok;
  }
  // ConfigToTLSConfig's checks, in its order.
  tls.enabled = !tls.cert_file.empty() || !tls.cert.empty() || !tls.key_file.empty() ||
                !tls.key.empty() || !tls.client_ca_file.empty() || !tls.client_ca.empty() ||
                !client_auth.empty();
  if (!tls.enabled) return {};  // Validate: errNoTLSConfig is no error (plain HTTP)
  if (tls.cert_file.empty() && tls.cert.empty()) {
    return Error("tls_server_config: missing one of cert or cert_file");
  }
  if (tls.key_file.empty() && tls.key.empty()) {
    return Error("tls_server_config: missing one of key or key_file");
  }
  auto cert = Material(tls.cert_file, tls.cert, "cert_file", "cert", notes);
  if (!cert) return Error(cert.error());
  auto key = Material(tls.key_file, tls.key, "key_file", "key", notes);
  if (!key) return Error(key.error());
  tls.cert_pem = std::move(*cert);
  tls.key_pem = std::move(*key);
  if (auto pair = CheckKeyPair(tls); !pair) return pair;
  const bool has_ca = !tls.client_ca_file.empty() || !tls.client_ca.empty();
  if (has_ca) {
    auto ca = Material(tls.client_ca_file, tls.client_ca, "client_ca_file", "client_ca", notes);
    if (!ca) return Error(ca.error());
    tls.client_ca_pem = std::move(*ca);
    if (auto checked = CheckClientCa(tls); !checked) return checked;
  }
  auto auth = ParseClientAuth(client_auth);
  if (!auth) return Error(auth.error());
  tls.client_auth = *auth;
  if (has_ca && tls.client_auth == ClientAuth::kNoClientCert) {
    return Error("tls_server_config: " +
                 std::string(tls.client_ca_file.empty() ? "client_ca" : "client_ca_file") +
                 " is set without a client_auth_type (Client CA's have been configured "
                 "without a Client Auth Policy)");
  }
  return {};
}

std::expected<void, std::string> ParseHttp(const YAML::Node& node, WebConfig& config) {
  const auto fields = Fields(node, "http_server_config", {"http2", "headers"});
  if (!fields) return Error(fields.error());
  for (const auto& [key, value] : *fields) {
    if (key == "http2") {
      auto flag = Bool(value, key);
      if (!flag) return Error(flag.error());
      // libmicrohttpd speaks HTTP/1.1 only: http2 (true or false) changes nothing here.
      config.notes.push_back(
          "http_server_config.http2 is accepted and ignored: rdmascope "
          "serves HTTP/1.1 only");
      continue;
    }
    const auto headers = Fields(value, "http_server_config.headers", {});
    if (!headers) return Error(headers.error());
    for (const auto& [name, header_value] : *headers) {
      auto text = String(header_value, name);
      if (!text) return Error(text.error());
      const auto allowed = AllowedHeaders().find(name);
      if (allowed == AllowedHeaders().end()) {
        return Error("http_server_config.headers: HTTP header \"" + name +
                     "\" can not be configured");
      }
      if (!allowed->second.empty() &&
          std::ranges::find(allowed->second, *text) == allowed->second.end()) {
        std::string expected;
        for (const auto& v : allowed->second) expected += (expected.empty() ? "" : ", ") + v;
        return Error("http_server_config.headers: invalid value for " + name +
                     ": expected one of " + expected + ", got \"" + *text + "\"");
      }
      config.headers.emplace_back(name, std::move(*text));
    }
  }
  return {};
}

// A scalar as yaml.v2 resolves it: plain (untagged, unquoted) or a string.
std::expected<YamlScalar, std::string> Scalar(const YAML::Node& node, std::string_view key,
                                              std::string_view what) {
  if (node.IsNull()) return YamlScalar{"", true};
  if (!node.IsScalar()) {
    return Error(Where(node) + std::string(key) + " must be " + std::string(what));
  }
  const std::string& tag = node.Tag();
  return YamlScalar{node.Scalar(), tag == "?" || tag == "tag:yaml.org,2002:int" ||
                                       tag == "tag:yaml.org,2002:float"};
}

std::expected<void, std::string> ParseRateLimit(const YAML::Node& node, WebConfig& config) {
  const auto fields = Fields(node, "rate_limit", {"interval", "burst"});
  if (!fields) return Error(fields.error());
  bool burst_set = false;
  for (const auto& [key, value] : *fields) {
    const std::string name = "rate_limit." + key;
    if (key == "interval") {
      auto scalar = Scalar(value, name, "a duration (e.g. 1s, 500ms)");
      if (!scalar) return Error(scalar.error());
      auto interval = DecodeGoDuration(*scalar);
      if (!interval) return Error(Where(value) + name + ": " + interval.error());
      config.rate_limit.interval_ns = *interval;
    } else {
      auto scalar = Scalar(value, name, "an integer");
      if (!scalar) return Error(scalar.error());
      auto burst = DecodeGoInt(*scalar);
      if (!burst) return Error(Where(value) + name + ": " + burst.error());
      config.rate_limit.burst = *burst;
      burst_set = !value.IsNull();
    }
  }
  // Accepted as exporter-toolkit accepts them, and said, since each surprises a reader.
  const RateLimit& limit = config.rate_limit;
  if (limit.interval_ns == 0 && burst_set) {
    config.notes.push_back("rate_limit.burst has no effect: rate_limit.interval is 0 (no limit)");
  } else if (limit.interval_ns < 0) {
    config.notes.push_back(
        "rate_limit has no effect: a negative interval is an infinite rate in exporter-toolkit "
        "(golang.org/x/time/rate.Every), every request passes");
  } else if (limit.interval_ns > 0 && limit.burst < 1) {
    config.notes.push_back("rate_limit.burst is " + std::to_string(limit.burst) +
                           ": every request is refused with 429 (a request needs a whole token, "
                           "as in exporter-toolkit)");
  }
  return {};
}

std::expected<void, std::string> ParseUsers(const YAML::Node& node, WebConfig& config) {
  const auto users = Fields(node, "basic_auth_users", {});
  if (!users) return Error(users.error());
  for (const auto& [user, hash_node] : *users) {
    auto hash = String(hash_node, "basic_auth_users." + user);
    if (!hash) return Error(hash.error());
    // Never the hash itself in the message: it is a secret (config_util.Secret).
    if (!IsBcryptHash(*hash)) {
      return Error("basic_auth_users." + user +
                   ": not a bcrypt hash ($2y$, $2b$ or $2a$, cost "
                   "4 to 31; make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)");
    }
    config.basic_auth_users.emplace(user, std::move(*hash));
  }
  return {};
}

}  // namespace

bool IsBcryptHash(std::string_view hash) {
  // $2y$NN$ then 53 characters of bcrypt's base64: 22 of salt, 31 of hash.
  constexpr std::string_view kAlphabet =
      "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' || hash[3] != '$' || hash[6] != '$') {
    return false;
  }
  if (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') return false;
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9') return false;
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  return hash.substr(7).find_first_not_of(kAlphabet) == std::string_view::npos;
}

std::expected<WebConfig, std::string> ParseWebConfig(std::string_view yaml,
                                                     const std::filesystem::path& directory) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Error(e.what());
  }
  WebConfig config;
  if (!root.IsDefined() || root.IsNull()) return config;  // an empty file: plain HTTP, no auth
  const auto fields =
      Fields(root, "the web config",
             {"tls_server_config", "http_server_config", "rate_limit", "basic_auth_users"});
  if (!fields) return Error(fields.error());
  // http_server_config, rate_limit and basic_auth_users first: exporter-toolkit reports a bad
  // header, duration or user before it looks at the TLS files.
  for (const auto& [key, value] : *fields) {
    std::expected<void, std::string> ok;
    if (key == "http_server_config") ok = ParseHttp(value, config);
    if (key == "rate_limit") ok = ParseRateLimit(value, config);
    if (key == "basic_auth_users") ok = ParseUsers(value, config);
    if (!ok) return Error(ok.error());
  }
  for (const auto& [key, value] : *fields) {
    if (key != "tls_server_config") continue;
    if (auto ok = ParseTls(value, directory, config.tls, config.notes); !ok) {
      return Error(ok.error());
    }
  }
  if (config.tls.enabled) {
    auto priorities = GnutlsPriorities(config.tls);
    if (!priorities) return Error(priorities.error());
  }
  // Accepted as exporter-toolkit accepts it, but said: no certificate is asked for, so the
  // list checks nothing.
  if (config.tls.client_allowed_sans &&
      (!config.tls.enabled || config.tls.client_auth == ClientAuth::kNoClientCert)) {
    config.notes.push_back(
        "tls_server_config.client_allowed_sans has no effect: no client_auth_type asks for "
        "client certificates (exporter-toolkit ignores it too)");
  }
  return config;
}

std::expected<WebConfig, std::string> LoadWebConfig(const std::filesystem::path& file) {
  auto text = ReadFile(file, "--web.config.file");
  if (!text) return Error(text.error());
  const std::filesystem::path directory = std::filesystem::absolute(file).parent_path();
  auto config = ParseWebConfig(*text, directory);
  if (!config) return Error(file.string() + ": " + config.error());
  return config;
}

std::string Fingerprint(const std::filesystem::path& file, const WebConfig& current) {
  std::string fingerprint;
  for (const std::filesystem::path& path :
       {file, current.tls.cert_file, current.tls.key_file, current.tls.client_ca_file}) {
    auto text = path.empty() ? std::expected<std::string, std::string>() : ReadFile(path, "");
    const std::string bytes = text ? *text : std::string();
    fingerprint += std::to_string(bytes.size()) + ':' + bytes;
  }
  return fingerprint;
}

std::expected<std::string, std::string> GnutlsPriorities(const TlsServerConfig& tls) {
  std::string priorities = "NORMAL";
  if (tls.prefer_server_cipher_suites) priorities += ":%SERVER_PRECEDENCE";
  priorities += ":-VERS-ALL";
  static constexpr std::array<std::pair<TlsVersion, std::string_view>, 4> kVersions{{
      {TlsVersion::kTls13, "VERS-TLS1.3"},
      {TlsVersion::kTls12, "VERS-TLS1.2"},
      {TlsVersion::kTls11, "VERS-TLS1.1"},
      {TlsVersion::kTls10, "VERS-TLS1.0"},
  }};
  int enabled = 0;
  for (const auto& [version, keyword] : kVersions) {
    if (version < tls.min_version || version > tls.max_version) continue;
    priorities += ":+" + std::string(keyword);
    ++enabled;
  }
  if (enabled == 0) return Error("tls_server_config: min_version is above max_version");

  if (!tls.cipher_suites.empty()) {
    std::vector<std::string_view> kx, ciphers, macs;
    auto add = [](std::vector<std::string_view>& list, std::string_view item) {
      if (!item.empty() && std::ranges::find(list, item) == list.end()) list.push_back(item);
    };
    for (const std::string& name : tls.cipher_suites) {
      const auto suite =
          std::ranges::find_if(kCipherSuites, [&](const auto& s) { return s.iana == name; });
      if (suite == kCipherSuites.end()) return Error("cipher_suites: unknown cipher: " + name);
      add(kx, suite->kx);
      add(ciphers, suite->cipher);
      add(macs, suite->mac);
    }
    // Only TLS 1.3 suites listed: TLS 1.3's own (EC)DHE key exchange stays available.
    if (kx.empty()) kx = {"ECDHE-RSA", "ECDHE-ECDSA"};
    priorities += ":-KX-ALL";
    for (const auto item : kx) priorities += ":+" + std::string(item);
    priorities += ":-CIPHER-ALL";
    for (const auto item : ciphers) priorities += ":+" + std::string(item);
    priorities += ":-MAC-ALL";
    for (const auto item : macs) priorities += ":+" + std::string(item);
  }
  if (!tls.curve_preferences.empty()) {
    priorities += ":-GROUP-ALL";
    for (const std::string& name : tls.curve_preferences) {
      const auto curve =
          std::ranges::find_if(kCurves, [&](const auto& c) { return c.first == name; });
      if (curve == kCurves.end()) return Error("curve_preferences: unknown curve: " + name);
      priorities += ":+" + std::string(curve->second);
    }
  }
  // What this GnuTLS accepts (a keyword it lacks would only show at the first handshake).
  gnutls_priority_t cache = nullptr;
  const char* error_at = nullptr;
  const int status = gnutls_priority_init(&cache, priorities.c_str(), &error_at);
  if (status < 0) {
    return Error("tls_server_config: GnuTLS rejects the priorities \"" + priorities + "\" at \"" +
                 (error_at != nullptr ? error_at : "") + "\": " + gnutls_strerror(status));
  }
  gnutls_priority_deinit(cache);
  return priorities;
}

}  // namespace rdmascope::web
