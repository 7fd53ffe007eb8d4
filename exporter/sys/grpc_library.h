// librdmascope_grpc.so, the gRPC clients (the container runtime's CRI, the kubelet's
// PodResources): found beside the executable or installed, loaded with dlopen by the refresher
// thread that first needs it, and refused when it is another build's (sys/cri_containers.h).
#pragma once

#include <expected>
#include <filesystem>
#include <string>

namespace rdmascope::sys {

// The library beside the executable (the build tree), else the installed one.
std::expected<std::filesystem::path, std::string> FindGrpcLibrary(
    const std::filesystem::path& executable_dir);

// The entry point `symbol` of `library`, loaded once for the process's life (gRPC's threads
// run from it) and checked to be this build's (rdmascope_grpc_abi).
std::expected<void*, std::string> GrpcEntryPoint(const std::filesystem::path& library,
                                                 const char* symbol);

}  // namespace rdmascope::sys
