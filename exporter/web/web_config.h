// --web.config.file: exporter-toolkit's web configuration file (TLS, basic auth, extra
// headers, rate limit), parsed and validated as current exporter-toolkit does (checked against
// its master of 2026-07, web/tls_config.go getConfig, validateTLSPaths and ConfigToTLSConfig;
// web/handler.go validateUsers and validateHeaderConfig): strict decoding (an unknown key is an
// error naming it), TLS 1.2 to 1.3 by default, relative paths resolved against the file's
// directory, bcrypt hashes checked for form, and the certificate, key and client CA (inline or
// from files) read and checked here so that a bad one is a start-up error.
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmascope::web {

// exporter-toolkit's client_auth_type values (Go's tls.ClientAuthType).
enum class ClientAuth {
  kNoClientCert,                // "" or "NoClientCert"
  kRequestClientCert,           // asked for, never checked
  kRequireAnyClientCert,        // must be sent, never checked ("RequireClientCert" too)
  kVerifyClientCertIfGiven,     // checked against the client CAs when sent
  kRequireAndVerifyClientCert,  // must be sent and check out
};

enum class TlsVersion { kTls10 = 10, kTls11 = 11, kTls12 = 12, kTls13 = 13 };

struct TlsServerConfig {
  // false: plain HTTP (none of cert, cert_file, key, key_file, client_ca, client_ca_file,
  // client_auth_type set: TLSConfig.IsEnabled)
  bool enabled = false;
  std::filesystem::path cert_file, key_file, client_ca_file;  // absolute after loading
  // Inline PEM (cert, key, client_ca): used when the matching *_file is not set (a file wins,
  // as in exporter-toolkit; the inline value is then noted as ignored).
  std::string cert, key, client_ca;
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  // exporter-toolkit's semantics (web/tls_config.go VerifyPeerCertificate): unset (absent or
  // null) checks nothing; set, even to [], and with a client_auth_type that asks for a
  // certificate, the client must send one whose leaf has one of these as a DNS, e-mail, IP or
  // URI subject alternative name ([] matches none: every client is refused).
  std::optional<std::vector<std::string>> client_allowed_sans;
  TlsVersion min_version = TlsVersion::kTls12;
  TlsVersion max_version = TlsVersion::kTls13;
  std::vector<std::string> cipher_suites;      // IANA/Go names, in preference order
  std::vector<std::string> curve_preferences;  // Go names: CurveP256, CurveP384, ...
  bool prefer_server_cipher_suites = true;
  // What TLS uses, checked while loading (PEM): each file's contents, or the inline text.
  std::string cert_pem, key_pem, client_ca_pem;
};

// rate_limit: a token bucket shared by every request (exporter-toolkit's
// rate.NewLimiter(rate.Every(interval), burst)). interval 0: no limiter; below 0: Go's
// rate.Every gives an infinite rate, every request passes; burst 0 or less with an interval
// above 0: every request is refused (429).
struct RateLimit {
  int64_t interval_ns = 0;
  int64_t burst = 0;
  bool limits() const { return interval_ns > 0; }  // false: every request passes
  bool operator==(const RateLimit&) const = default;
};

struct WebConfig {
  TlsServerConfig tls;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash
  std::vector<std::pair<std::string, std::string>> headers;
  RateLimit rate_limit;
  // What was accepted but has no effect here, to be logged once (e.g. http2).
  std::vector<std::string> notes;
};

// Reads and validates the file, and the certificate, key and CA files it names. The error is
// one line naming the file and the offending key.
std::expected<WebConfig, std::string> LoadWebConfig(const std::filesystem::path& file);

// The same, from text; relative paths are resolved against `directory`.
std::expected<WebConfig, std::string> ParseWebConfig(std::string_view yaml,
                                                     const std::filesystem::path& directory);

// What a reload compares: the bytes of `file` (inline cert, key and client_ca included) and of
// the certificate, key and CA files that `current` names (a rotated certificate is a change
// even if the YAML is not). Unreadable files count as empty.
std::string Fingerprint(const std::filesystem::path& file, const WebConfig& current);

// GnuTLS's priority string for the versions, cipher suites and curves of `tls`, or an error
// naming what GnuTLS cannot express.
std::expected<std::string, std::string> GnutlsPriorities(const TlsServerConfig& tls);

// True if `hash` is a bcrypt hash exporter-toolkit accepts ($2a$, $2b$, $2y$; cost 4 to 31).
bool IsBcryptHash(std::string_view hash);

}  // namespace rdmascope::web
