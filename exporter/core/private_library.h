// rdmascope's own shared libraries, loaded with dlopen only by the code that needs them
// (librdmascope_pprof.so by `profile`, librdmascope_grpc.so by the workload collector), so that
// `serve` does not map what it does not use.
#pragma once

#include <dlfcn.h>

#include <expected>
#include <filesystem>
#include <string>
#include <system_error>

namespace rdmascope {

// `name` beside the executable (the build tree), else in `installed_dir` (<libdir>/rdmascope);
// the error names both places.
inline std::expected<std::filesystem::path, std::string> FindPrivateLibrary(
    const std::string& name, const std::filesystem::path& executable_dir,
    const std::filesystem::path& installed_dir) {
  std::error_code ec;
  for (const std::filesystem::path& candidate : {executable_dir / name, installed_dir / name}) {
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  return std::unexpected(name + " found neither in " + executable_dir.string() + " nor in " +
                         installed_dir.string());
}

// dlerror()'s message, or `fallback` when it has none.
inline std::string DlError(const std::string& fallback) {
  const char* error = dlerror();
  return error != nullptr ? error : fallback;
}

}  // namespace rdmascope
