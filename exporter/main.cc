// rdmascope: RDMA observability exporter and profiler.
//   rdmascope serve   run the Prometheus exporter
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

  try {
    app.parse(argc, argv);
    rdmascope::FinishServeConfig(config);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (serve->parsed()) return rdmascope::RunServe(config);
  } catch (const std::exception& e) {
    rdmascope::log::Error("fatal", {{"err", e.what()}});
    return 1;
  }
  return 0;
}
