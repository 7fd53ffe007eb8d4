// Names of containers (pod, namespace, container) from the container runtime's CRI socket,
// for the workload collector: a cgroup path says which container a process runs in, only the
// runtime knows what Kubernetes calls it.
//
// A scrape never waits for the runtime: lookups read the last answer, a thread of its own
// (sys/background_refresh.h) asks the runtime every refresh interval, and sooner (at most once
// per `miss_interval`) when a lookup meets a container it does not know (one started since). A
// runtime that hangs costs that thread its timeout; one that is gone leaves the last answer in
// place. Nothing starts before the first lookup (the first scrape).
#pragma once

#include <chrono>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sys/background_refresh.h"
#include "sys/cri_containers.h"
#include "sys/grpc_endpoints.h"
#include "sys/grpc_library.h"

namespace rdmascope::sys {

struct CriOptions {
  // "unix:///run/containerd/containerd.sock", or what gRPC accepts as a target.
  std::string endpoint;
  std::chrono::milliseconds timeout{2000};
  std::chrono::milliseconds refresh_interval{30000};
  std::chrono::milliseconds miss_interval{5000};
  std::filesystem::path library;  // librdmascope_grpc.so; found with FindGrpcLibrary
};

class ContainerNames {
 public:
  using ListFn = std::function<std::expected<std::vector<CriContainer>, std::string>()>;

  // `list` replaces the call through librdmascope_grpc.so (a test seam).
  explicit ContainerNames(CriOptions options, ListFn list = {});
  ~ContainerNames();
  ContainerNames(const ContainerNames&) = delete;
  ContainerNames& operator=(const ContainerNames&) = delete;

  // A collection begins: with a refresh interval of 0 (capture and replay: each sample holds
  // the answer it was collected with) the runtime is asked now, on this thread; otherwise
  // nothing (the refresher keeps the answer fresh).
  void CollectionStarts() { refresh_.FetchNow(); }

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
  std::string Fetch();    // on the refresher's thread
  void Publish(bool ok);  // with the refresher's lock held
  std::expected<std::vector<CriContainer>, std::string> ListThroughLibrary();

  const CriOptions options_;
  ListFn list_;
  // Guarded by refresh_.Lock():
  std::map<std::string, CriContainer, std::less<>> containers_;
  // Containers looked up and not found: those since the last attempt began, those the attempt
  // in flight was made for, and those an answer did not name (a container the runtime does
  // not manage, e.g. Docker's own beside containerd's CRI): these do not ask again.
  std::set<std::string, std::less<>> missed_, asked_, not_in_runtime_;
  // The refresher thread's own: the answer of the attempt in flight, and the library's entry
  // point once loaded.
  std::expected<std::vector<CriContainer>, std::string> fetched_;
  RdmascopeCriListFn cri_list_ = nullptr;
  // Last: destroyed first, so its thread is stopped before the members it uses.
  BackgroundRefresh refresh_;
};

}  // namespace rdmascope::sys
