// What the container runtime says about each running container (CRI ListContainers), and the
// contract with librdmascope_grpc.so, which calls it: the gRPC client lives in that library,
// loaded with dlopen at the first lookup, so that `serve` without a container runtime to ask
// never maps libgrpc++ and its threads (as librdmascope_pprof.so keeps libprotobuf out).
#pragma once

#include <string>
#include <vector>

#include "core/version.h"

namespace rdmascope::sys {

struct CriContainer {
  std::string id;  // 64 hex digits, as in the container's cgroup path
  std::string pod;
  std::string pod_namespace;
  std::string pod_uid;
  std::string container;  // io.kubernetes.container.name, else the CRI metadata name
};

inline constexpr const char* kGrpcLibraryName = "librdmascope_grpc.so";

// What the executable and the library must agree on: another build's library is refused.
inline std::string GrpcAbi() {
  return std::string(kVersion) + " " + kRevision + " " + std::to_string(sizeof(CriContainer)) +
         " " + std::to_string(sizeof(std::vector<CriContainer>));
}

}  // namespace rdmascope::sys

// The library's entry points (extern "C", looked up with dlsym).
extern "C" {
// GrpcAbi() of the library's build.
using RdmascopeGrpcAbiFn = const char* (*)();
// The running containers `endpoint` ("unix:///run/containerd/containerd.sock") lists, within
// `timeout_ms`. 0 and `out` filled, or non-zero and `error` says why.
using RdmascopeCriListFn = int (*)(const char* endpoint, int timeout_ms,
                                   std::vector<rdmascope::sys::CriContainer>* out,
                                   std::string* error);
}
