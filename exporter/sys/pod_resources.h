// The devices of each pod and container from the kubelet's PodResources API (v1 List on
// /var/lib/kubelet/pod-resources/kubelet.sock), for the workload collector's
// rdma_device_workload_info: which pod an SR-IOV VF or sub-function was handed to.
//
// As the container runtime's names (sys/cri_names.h): a scrape never waits for the kubelet.
// Snapshot() reads the last answer; a thread of its own (sys/background_refresh.h), started by
// the first Snapshot() (the first scrape), asks the kubelet every refresh interval; a kubelet
// that hangs costs that thread its timeout, one that is gone leaves the last answer in place.
#pragma once

#include <chrono>
#include <expected>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sys/background_refresh.h"
#include "sys/cri_containers.h"
#include "sys/grpc_endpoints.h"

namespace rdmascope::sys {

struct PodResourcesOptions {
  // "unix:///var/lib/kubelet/pod-resources/kubelet.sock", or what gRPC accepts as a target.
  std::string endpoint;
  std::chrono::milliseconds timeout{2000};
  std::chrono::milliseconds refresh_interval{30000};
  std::filesystem::path library;  // librdmascope_grpc.so; found with FindGrpcLibrary
};

class PodResources {
 public:
  using ListFn = std::function<std::expected<std::vector<PodDevices>, std::string>()>;

  // `list` replaces the call through librdmascope_grpc.so (a test seam).
  explicit PodResources(PodResourcesOptions options, ListFn list = {});
  ~PodResources();
  PodResources(const PodResources&) = delete;
  PodResources& operator=(const PodResources&) = delete;

  // A collection begins: with a refresh interval of 0 (capture and replay) the kubelet is
  // asked now, on this thread; otherwise nothing.
  void CollectionStarts() { refresh_.FetchNow(); }

  // The kubelet's last answer (empty before the first one). Never blocks on the kubelet.
  std::shared_ptr<const std::vector<PodDevices>> Snapshot();

  const std::string& endpoint() const { return options_.endpoint; }
  BackgroundRefresh::Status status() const { return refresh_.status(); }
  // Waits until the refresher has made `attempts` attempts in all (tests).
  bool WaitForAttempts(uint64_t attempts, std::chrono::milliseconds timeout) const {
    return refresh_.WaitForAttempts(attempts, timeout);
  }

 private:
  std::expected<std::vector<PodDevices>, std::string> ListThroughLibrary();

  const PodResourcesOptions options_;
  ListFn list_;
  std::shared_ptr<const std::vector<PodDevices>> devices_;  // guarded by refresh_.Lock()
  // The refresher thread's own: the answer in flight, the library's entry point once loaded.
  std::expected<std::vector<PodDevices>, std::string> fetched_;
  RdmascopePodResourcesListFn list_entry_ = nullptr;
  // Last: destroyed first, so its thread is stopped before the members it uses.
  BackgroundRefresh refresh_;
};

}  // namespace rdmascope::sys
