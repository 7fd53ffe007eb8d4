// rdmascope: RDMA observability exporter and profiler.
//   rdmascope serve   run the Prometheus exporter
//   rdmascope check   build every collector once, report and exit
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/serve.h"
#include "cli/serve_flags.h"
#include "core/log.h"
#include "core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"rdmascope: RDMA observability for Linux hosts (Prometheus exporter)", "rdmascope"};
  app.set_version_flag("--version", std::string("rdmascope ") + rdmascope::kVersion +
                                        " (revision " + rdmascope::kRevision + ")");
  app.require_subcommand(1);

  rdmascope::ServeConfig config;
  CLI::App* serve = app.add_subcommand("serve", "Run the Prometheus exporter");
  rdmascope::AddServeFlags(*serve, config);
  CLI::App* check = app.add_subcommand(
      "check",
      "Attach every probe and open every counter as `serve` would (same flags), collect once, "
      "print each collector's state and exit (1 if one failed)");
  rdmascope::AddServeFlags(*check, config);

  try {
    app.parse(argc, argv);
    rdmascope::FinishServeConfig(config);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (serve->parsed()) return rdmascope::RunServe(config);
    if (check->parsed()) return rdmascope::RunCheck(config);
  } catch (const std::exception& e) {
    rdmascope::log::Error("fatal", {{"err", e.what()}});
    return 1;
  }
  return 0;
}
