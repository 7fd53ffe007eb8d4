// Names of containers (pod, namespace, container) from the container runtime's CRI socket,
// for the workload collector: a cgroup path says which container a process runs in, only the
// runtime knows what Kubernetes calls it.
//
// A scrape never waits for the runtime: lookups read the last answer, a thread of its own asks
// the runtime every refresh interval, and sooner (at most once per `miss_interval`) when a
// lookup meets a container it does not know (one started since). A runtime that hangs costs
// that thread its timeout; one that is gone leaves the last answer in place.
//
// Nothing starts before the first lookup (the first scrape): `serve` drops its capabilities
// while it has one thread only, and loading librdmascope_grpc.so starts gRPC's own threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sys/cri_containers.h"

namespace rdmascope::sys {

struct CriOptions {
  // "unix:///run/containerd/containerd.sock", or what gRPC accepts as a target.
  std::string endpoint;
  std::chrono::milliseconds timeout{2000};
  std::chrono::milliseconds refresh_interval{30000};
  std::chrono::milliseconds miss_interval{5000};
  std::filesystem::path library;  // librdmascope_grpc.so; found with FindGrpcLibrary
};

// The library beside the executable (the build tree), else the installed one.
std::expected<std::filesystem::path, std::string> FindGrpcLibrary(
    const std::filesystem::path& executable_dir);

// The sockets containerd, CRI-O and cri-dockerd listen on by default, as gRPC targets, in that
// order, under `root` (the host's / as this process sees it).
std::vector<std::string> DefaultCriEndpoints(const std::filesystem::path& root = "/");

class ContainerNames {
 public:
  using ListFn = std::function<std::expected<std::vector<CriContainer>, std::string>()>;

  // `list` replaces the call through librdmascope_grpc.so (a test seam).
  explicit ContainerNames(CriOptions options, ListFn list = {});
  ~ContainerNames();
  ContainerNames(const ContainerNames&) = delete;
  ContainerNames& operator=(const ContainerNames&) = delete;

  // The runtime's last word on the container with this 64-hex ID; nullopt when it has not
  // named it (yet). Never blocks on the runtime.
  std::optional<CriContainer> Lookup(std::string_view id);

  struct Status {
    size_t containers = 0;
    std::optional<std::chrono::steady_clock::time_point> last_success;
    std::string last_error;  // of the last attempt; empty when it succeeded
    uint64_t attempts = 0;
  };
  Status status() const;
  const std::string& endpoint() const { return options_.endpoint; }

  // Waits until the refresher has made `attempts` attempts in all (tests).
  bool WaitForAttempts(uint64_t attempts, std::chrono::milliseconds timeout) const;

 private:
  void Run();
  std::expected<std::vector<CriContainer>, std::string> ListThroughLibrary();

  const CriOptions options_;
  ListFn list_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<std::string, CriContainer, std::less<>> containers_;
  Status status_;
  bool started_ = false;
  bool stopping_ = false;
  bool miss_ = false;  // a lookup met an unknown container
  // Containers looked up and not found: those since the last attempt began, those the attempt
  // in flight was made for, and those an answer did not name (a container the runtime does
  // not manage, e.g. Docker's own beside containerd's CRI): these do not ask again.
  std::set<std::string, std::less<>> missed_, asked_, not_in_runtime_;
  std::thread thread_;
  // The library's entry point, once loaded (by the refresher thread only).
  RdmascopeCriListFn cri_list_ = nullptr;
};

}  // namespace rdmascope::sys
