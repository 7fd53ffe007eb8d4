// What the container runtime says about each running container (CRI ListContainers), what the
// kubelet says about the devices of each pod (PodResources List), and the contract with
// librdmascope_grpc.so, which calls them: the gRPC clients live in that library, loaded with
// dlopen at the first lookup, so that `serve` without a container runtime or kubelet to ask
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

// One container's devices of one resource, as the kubelet's PodResources List gives them
// (device plugin resources; a container with several resources is several entries).
struct PodDevices {
  std::string pod;
  std::string pod_namespace;
  std::string container;
  std::string resource;                 // "nvidia.com/sriov_rdma_vf", "rdma/hca_shared_devices_a"
  std::vector<std::string> device_ids;  // as the device plugin reported them
};

inline constexpr const char* kGrpcLibraryName = "librdmascope_grpc.so";

// What the executable and the library must agree on: another build's library is refused.
inline std::string GrpcAbi() {
  return std::string(kVersion) + " " + kRevision + " " + std::to_string(sizeof(CriContainer)) +
         " " + std::to_string(sizeof(std::vector<CriContainer>)) + " " +
         std::to_string(sizeof(PodDevices));
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
// The pods' devices the kubelet's PodResources socket `endpoint`
// ("unix:///var/lib/kubelet/pod-resources/kubelet.sock") lists, within `timeout_ms`; as above.
using RdmascopePodResourcesListFn = int (*)(const char* endpoint, int timeout_ms,
                                            std::vector<rdmascope::sys::PodDevices>* out,
                                            std::string* error);
}
