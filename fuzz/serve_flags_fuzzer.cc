// `rdmascope serve` flags (cli/serve_flags, CLI11), parsed in-process: one argument per line.
// Parse errors are CLI::Error exceptions (what main() turns into a usage message); any other
// exception or a crash is a defect. Built only as a corpus replay under the g++ build: the
// collector registry it needs links the whole exporter.
#include <CLI/CLI.hpp>

#include "cli/serve_flags.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args = rdmascope::fuzz::Lines(text);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  CLI::App app{"rdmascope serve"};
  rdmascope::ServeConfig config;
  rdmascope::AddServeFlags(app, config);
  try {
    app.parse(args);
    rdmascope::FinishServeConfig(config);
  } catch (const CLI::Error&) {
    // A usage error: reported to the user, the process exits 2.
  }
  return 0;
}
