// --web.config.file (web/web_config): exporter-toolkit's YAML, parsed and validated. Relative
// certificate paths resolve against the fixture directory, whose server.crt and server.key are
// real, so that a mutated YAML can reach the TLS checks.
#include "web/web_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  const auto config =
      rdmascope::web::ParseWebConfig(yaml, std::string(RDMASCOPE_FIXTURES) + "/web");
  if (config) {
    rdmascope::web::GnutlsPriorities(config->tls);
    for (const auto& [user, hash] : config->basic_auth_users) rdmascope::web::IsBcryptHash(hash);
  }
  return 0;
}
