// librdmascope_grpc.so: the CRI client and the kubelet's PodResources client
// (sys/cri_containers.h), the only code that links libgrpc++. One channel per endpoint, kept
// for the process's life: gRPC reconnects it by itself when the runtime or kubelet restarts.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "cri_runtime.grpc.pb.h"
#include "kubelet_podresources.grpc.pb.h"
#include "sys/cri_containers.h"

namespace {

// A node with thousands of containers answers in megabytes; gRPC's default limit is 4 MiB.
constexpr int kMaxResponseBytes = 64 << 20;

std::shared_ptr<grpc::Channel> ChannelFor(const std::string& endpoint) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<grpc::Channel>> channels;
  const std::lock_guard lock(mutex);
  auto& channel = channels[endpoint];
  if (!channel) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(kMaxResponseBytes);
    channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), arguments);
  }
  return channel;
}

std::string Label(const runtime::v1::Container& container, const std::string& key) {
  const auto found = container.labels().find(key);
  return found == container.labels().end() ? std::string() : found->second;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* rdmascope_grpc_abi() {
  static const std::string abi = rdmascope::sys::GrpcAbi();
  return abi.c_str();
}

__attribute__((visibility("default"))) int rdmascope_cri_list(
    const char* endpoint, int timeout_ms, std::vector<rdmascope::sys::CriContainer>* out,
    std::string* error) {
  try {
    auto stub = runtime::v1::RuntimeService::NewStub(ChannelFor(endpoint));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    runtime::v1::ListContainersRequest request;
    request.mutable_filter()->mutable_state()->set_state(runtime::v1::CONTAINER_RUNNING);
    runtime::v1::ListContainersResponse response;
    const grpc::Status status = stub->ListContainers(&context, request, &response);
    if (!status.ok()) {
      *error = "ListContainers: " + status.error_message() + " (gRPC code " +
               std::to_string(static_cast<int>(status.error_code())) + ")";
      return 1;
    }
    out->clear();
    out->reserve(static_cast<size_t>(response.containers_size()));
    for (const runtime::v1::Container& container : response.containers()) {
      rdmascope::sys::CriContainer entry{
          .id = container.id(),
          .pod = Label(container, "io.kubernetes.pod.name"),
          .pod_namespace = Label(container, "io.kubernetes.pod.namespace"),
          .pod_uid = Label(container, "io.kubernetes.pod.uid"),
          .container = Label(container, "io.kubernetes.container.name"),
      };
      if (entry.container.empty()) entry.container = container.metadata().name();
      out->push_back(std::move(entry));
    }
    return 0;
  } catch (const std::exception& e) {
    *error = e.what();
    return 1;
  }
}

__attribute__((visibility("default"))) int rdmascope_podresources_list(
    const char* endpoint, int timeout_ms, std::vector<rdmascope::sys::PodDevices>* out,
    std::string* error) {
  try {
    auto stub = v1::PodResourcesLister::NewStub(ChannelFor(endpoint));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    v1::ListPodResourcesResponse response;
    const grpc::Status status = stub->List(&context, v1::ListPodResourcesRequest(), &response);
    if (!status.ok()) {
      *error = "PodResources List: " + status.error_message() + " (gRPC code " +
               std::to_string(static_cast<int>(status.error_code())) + ")";
      return 1;
    }
    out->clear();
    for (const v1::PodResources& pod : response.pod_resources()) {
      for (const v1::ContainerResources& container : pod.containers()) {
        for (const v1::ContainerDevices& devices : container.devices()) {
          out->push_back(
              {.pod = pod.name(),
               .pod_namespace = pod.namespace_(),
               .container = container.name(),
               .resource = devices.resource_name(),
               .device_ids = {devices.device_ids().begin(), devices.device_ids().end()}});
        }
      }
    }
    return 0;
  } catch (const std::exception& e) {
    *error = e.what();
    return 1;
  }
}

}  // extern "C"
