#include "sys/grpc_library.h"

#include <dlfcn.h>

#include "core/private_library.h"
#include "sys/cri_containers.h"

namespace rdmascope::sys {

std::expected<std::filesystem::path, std::string> FindGrpcLibrary(
    const std::filesystem::path& executable_dir) {
  return FindPrivateLibrary(kGrpcLibraryName, executable_dir, RDMASCOPE_GRPC_INSTALL_DIR);
}

std::expected<void*, std::string> GrpcEntryPoint(const std::filesystem::path& library,
                                                 const char* symbol) {
  // Kept loaded for the process's life: never dlclose()d (a second dlopen of the same file
  // returns the same handle).
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return std::unexpected("cannot load " + library.string() + ": " + DlError("dlopen failed"));
  }
  const auto abi = reinterpret_cast<RdmascopeGrpcAbiFn>(dlsym(handle, "rdmascope_grpc_abi"));
  void* entry = dlsym(handle, symbol);
  if (abi == nullptr || entry == nullptr) {
    return std::unexpected(library.string() + " is not rdmascope's gRPC library (no " + symbol +
                           ")");
  }
  if (const std::string theirs = abi(); theirs != GrpcAbi()) {
    return std::unexpected(library.string() + " is from another build (" + theirs + ", this is " +
                           GrpcAbi() + ")");
  }
  return entry;
}

}  // namespace rdmascope::sys
