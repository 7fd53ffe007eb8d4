// --web.config.file (web/web_config): exporter-toolkit's YAML, parsed and validated. Relative
// certificate paths resolve against the fixture directory, whose server.crt and server.key are
// real, so that a mutated YAML can reach the TLS checks; inline PEM (cert, key, client_ca) and
// rate_limit's Go durations and integers (web/go_decode) are parsed from the input itself.
#include <cstdlib>

#include "web/go_decode.h"
#include "web/web_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  const auto config =
      rdmascope::web::ParseWebConfig(yaml, std::string(RDMASCOPE_FIXTURES) + "/web");
  if (config) {
    rdmascope::web::GnutlsPriorities(config->tls);
    for (const auto& [user, hash] : config->basic_auth_users) rdmascope::web::IsBcryptHash(hash);
    // What the server relies on: TLS on means a checked certificate and key to hand over.
    if (config->tls.enabled && (config->tls.cert_pem.empty() || config->tls.key_pem.empty())) {
      std::abort();
    }
  }
  // The input as one scalar: never a crash, and no positive duration from text starting
  // with '-'.
  if (size < 64) {
    const auto duration = rdmascope::web::ParseGoDuration(yaml);
    if (duration && *duration > 0 && !yaml.empty() && yaml[0] == '-') std::abort();
    rdmascope::web::DecodeGoInt({yaml, true});
    rdmascope::web::DecodeGoDuration({yaml, true});
  }
  return 0;
}
