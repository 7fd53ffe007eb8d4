#include "cli/client_access_flags.h"

namespace rdmascope {

void AddClientAccessFlags(CLI::App& app, const std::string& prefix, const std::string& server,
                          doctor::ClientAccess& access, const std::string& group) {
  struct ClientFlag {
    const char* name;
    std::string doctor::ClientAccess::*member;
    bool existing_file;
    std::string help;
  };
  const ClientFlag flags[] = {
      {"ca-file", &doctor::ClientAccess::ca_file, true,
       "CA certificate(s) " + server +
           "'s TLS certificate must chain to (https://; default: the system's)"},
      {"cert-file", &doctor::ClientAccess::cert_file, true,
       "Client certificate for " + server + " when it verifies clients (mutual TLS)"},
      {"key-file", &doctor::ClientAccess::key_file, true,
       "Private key of --" + prefix + ".cert-file"},
      {"username", &doctor::ClientAccess::username, false,
       "User name for " + server + "'s basic auth (with --" + prefix + ".password-file)"},
      {"password-file", &doctor::ClientAccess::password_file, true,
       "File holding the basic auth password (surrounding whitespace ignored); never a password "
       "on the command line"},
      {"bearer-token-file", &doctor::ClientAccess::bearer_token_file, true,
       "File holding a bearer token sent to " + server +
           " (Authorization: Bearer; surrounding whitespace ignored)"},
  };
  for (const ClientFlag& flag : flags) {
    CLI::Option* option =
        app.add_option("--" + prefix + "." + flag.name, access.*flag.member, flag.help);
    if (flag.existing_file) option->check(CLI::ExistingFile);
    option->group(group);
  }
  app.add_flag("--" + prefix + ".insecure-skip-verify", access.insecure_skip_verify,
               "Accept any TLS certificate of " + server + " (no CA, no name check)")
      ->group(group);
}

void CheckClientAccess(const std::string& flag, const doctor::ClientAccess& access) {
  if (access.cert_file.empty() != access.key_file.empty()) {
    throw CLI::ValidationError(flag + ".cert-file/" + flag + ".key-file", "give both or neither");
  }
  if (access.username.empty() != access.password_file.empty()) {
    throw CLI::ValidationError(flag + ".username/" + flag + ".password-file",
                               "give both or neither");
  }
  if (!access.username.empty() && !access.bearer_token_file.empty()) {
    throw CLI::ValidationError(flag + ".username/" + flag + ".bearer-token-file",
                               "give one or the other");
  }
}

}  // namespace rdmascope
