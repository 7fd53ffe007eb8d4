// The client side of a server's TLS and authentication (`--PREFIX.ca-file`...), for the
// commands that ask an HTTP server: `doctor` (its exporter and its Prometheus) and `capture`
// (the exporter whose debug answers it records). One set of flags, named as Prometheus'
// scrape config and node_exporter's flags name them, so that a command line written for
// doctor's --exporter.* works for capture's.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "doctor/options.h"

namespace rdmascope {

// Adds --PREFIX.ca-file, cert-file, key-file, username, password-file, bearer-token-file and
// insecure-skip-verify to `app` in help group `group`; `server` names the server in the help
// ("the exporter").
void AddClientAccessFlags(CLI::App& app, const std::string& prefix, const std::string& server,
                          doctor::ClientAccess& access, const std::string& group);

// After parsing: what CLI11 cannot check of one set (`prefix` "--exporter"): a client
// certificate with its key, a user with a password file, not a user and a bearer token.
// Throws CLI::ValidationError.
void CheckClientAccess(const std::string& prefix, const doctor::ClientAccess& access);

}  // namespace rdmascope
