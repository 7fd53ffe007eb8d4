#include "web/client_cert.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace rdmascope::web {
namespace {

struct CrtDeleter {
  void operator()(gnutls_x509_crt_t crt) const { gnutls_x509_crt_deinit(crt); }
};

// The subject alternative names exporter-toolkit's VerifyPeerCertificate compares
// (web/tls_config.go): Go's cert.DNSNames, EmailAddresses (rfc822Name SANs, not the subject's
// emailAddress), IPAddresses as net.IP.String() (an IPv4-mapped IPv6 address prints as
// a.b.c.d) and URIs; never the subject's common name.
std::vector<std::string> SubjectAltNames(const gnutls_datum_t& der) {
  std::vector<std::string> names;
  gnutls_x509_crt_t raw = nullptr;
  if (gnutls_x509_crt_init(&raw) < 0) return names;
  std::unique_ptr<std::remove_pointer_t<gnutls_x509_crt_t>, CrtDeleter> crt(raw);
  if (gnutls_x509_crt_import(crt.get(), &der, GNUTLS_X509_FMT_DER) < 0) return names;
  for (unsigned seq = 0;; ++seq) {
    char buffer[1024];
    size_t size = sizeof buffer;
    const int type = gnutls_x509_crt_get_subject_alt_name(crt.get(), seq, buffer, &size, nullptr);
    if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) break;
    if (type == GNUTLS_E_SHORT_MEMORY_BUFFER) continue;  // longer than any name we compare
    if (type < 0) break;
    if (type == GNUTLS_SAN_IPADDRESS) {
      char text[INET6_ADDRSTRLEN];
      static constexpr unsigned char kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
      const bool mapped = size == 16 && std::memcmp(buffer, kV4Mapped, sizeof kV4Mapped) == 0;
      const int family = size == 4 || mapped ? AF_INET : size == 16 ? AF_INET6 : 0;
      if (family != 0 &&
          inet_ntop(family, mapped ? buffer + 12 : buffer, text, sizeof text) != nullptr) {
        names.emplace_back(text);
      }
    } else if (type == GNUTLS_SAN_DNSNAME || type == GNUTLS_SAN_RFC822NAME ||
               type == GNUTLS_SAN_URI) {
      names.emplace_back(buffer, size);
    }
  }
  return names;
}

}  // namespace

std::string CheckClientCertificate(void* session_ptr, const TlsServerConfig& tls) {
  const ClientAuth auth = tls.client_auth;
  // Go asks for no certificate then, so it never calls VerifyPeerCertificate.
  if (auth == ClientAuth::kNoClientCert) return {};
  const bool check_sans = tls.client_allowed_sans.has_value();
  if (auth == ClientAuth::kRequestClientCert && !check_sans) return {};
  auto* session = static_cast<gnutls_session_t>(session_ptr);
  if (session == nullptr) return "no TLS session";
  unsigned count = 0;
  const gnutls_datum_t* chain = gnutls_certificate_get_peers(session, &count);
  if (chain == nullptr || count == 0) {
    // Go's handshake calls VerifyPeerCertificate with no certificate too, whatever the
    // policy, and exporter-toolkit's rawCerts[0] then fails the connection: with allowed
    // SANs a certificate is always needed.
    if (auth == ClientAuth::kVerifyClientCertIfGiven && !check_sans) return {};
    return check_sans ? "a client certificate with an allowed SAN is required"
                      : "a client certificate is required";
  }
  if (auth == ClientAuth::kVerifyClientCertIfGiven ||
      auth == ClientAuth::kRequireAndVerifyClientCert) {
    // Against the client CAs libmicrohttpd was given (MHD_OPTION_HTTPS_MEM_TRUST): chain,
    // signatures, validity dates. No host name: a client has none to match.
    unsigned status = 0;
    const int error = gnutls_certificate_verify_peers3(session, nullptr, &status);
    if (error < 0) return std::string("client certificate not verified: ") + gnutls_strerror(error);
    if (status != 0) {
      gnutls_datum_t text{};
      std::string reason = "client certificate not trusted";
      if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) >= 0) {
        reason += ": " + std::string(reinterpret_cast<char*>(text.data), text.size);
        gnutls_free(text.data);
      }
      return reason;
    }
  }
  if (check_sans) {
    const std::vector<std::string>& allowed_sans = *tls.client_allowed_sans;
    const std::vector<std::string> names = SubjectAltNames(chain[0]);
    const bool allowed = std::ranges::any_of(names, [&](const std::string& name) {
      return std::ranges::find(allowed_sans, name) != allowed_sans.end();
    });
    if (!allowed) {
      std::string found;
      for (const auto& name : names) found += (found.empty() ? "" : ", ") + name;
      return "could not find allowed SANs in client cert, found: [" + found + "]";
    }
  }
  return {};
}

}  // namespace rdmascope::web
