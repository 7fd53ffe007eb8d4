// Where the container runtimes and the kubelet listen by default, as gRPC targets: asked by the
// workload collectors (sys/cri_names.h, sys/pod_resources.h) and kept by `capture --redact`
// (sys/grpc_capture.h: a default endpoint says which runtime it was, nothing of the host).
// Names only, so that what records and replays the answers needs none of the clients.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rdmascope::sys {

// The sockets containerd, CRI-O and cri-dockerd listen on by default, as gRPC targets, in that
// order, under `root` (the host's / as this process sees it).
std::vector<std::string> DefaultCriEndpoints(const std::filesystem::path& root = "/");

// The kubelet's default PodResources socket under `root`, as a gRPC target.
std::string DefaultPodResourcesEndpoint(const std::filesystem::path& root = "/");

}  // namespace rdmascope::sys
