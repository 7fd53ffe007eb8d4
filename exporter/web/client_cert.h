// exporter-toolkit's client_auth_type and client_allowed_sans, checked per request on the
// GnuTLS session libmicrohttpd hands us: libmicrohttpd only asks for a certificate
// (GNUTLS_CERT_REQUEST, when given a trust list) and completes the handshake whatever the
// client sends, so the policy is enforced here, before any route runs.
#pragma once

#include <string>

#include "web/web_config.h"

namespace rdmascope::web {

// Empty if the session's client certificate satisfies `tls`; otherwise why not, for the log
// and the 403 body. `session` is a gnutls_session_t (void* to keep GnuTLS out of headers).
std::string CheckClientCertificate(void* session, const TlsServerConfig& tls);

}  // namespace rdmascope::web
