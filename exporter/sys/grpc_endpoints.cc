#include "sys/grpc_endpoints.h"

namespace rdmascope::sys {

std::vector<std::string> DefaultCriEndpoints(const std::filesystem::path& root) {
  std::vector<std::string> endpoints;
  // containerd (its CRI plugin), CRI-O, cri-dockerd: their default listen addresses.
  for (const char* socket :
       {"run/containerd/containerd.sock", "run/crio/crio.sock", "run/cri-dockerd.sock"}) {
    endpoints.push_back("unix://" + (root / socket).lexically_normal().string());
  }
  return endpoints;
}

std::string DefaultPodResourcesEndpoint(const std::filesystem::path& root) {
  return "unix://" +
         (root / "var/lib/kubelet/pod-resources/kubelet.sock").lexically_normal().string();
}

}  // namespace rdmascope::sys
