#include "sys/cri_names.h"

#include <dlfcn.h>

#include "core/log.h"
#include "core/private_library.h"

namespace rdmascope::sys {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::expected<std::filesystem::path, std::string> FindGrpcLibrary(
    const std::filesystem::path& executable_dir) {
  return FindPrivateLibrary(kGrpcLibraryName, executable_dir, RDMASCOPE_GRPC_INSTALL_DIR);
}

std::vector<std::string> DefaultCriEndpoints(const std::filesystem::path& root) {
  std::vector<std::string> endpoints;
  // containerd (its CRI plugin), CRI-O, cri-dockerd: their default listen addresses.
  for (const char* socket :
       {"run/containerd/containerd.sock", "run/crio/crio.sock", "run/cri-dockerd.sock"}) {
    endpoints.push_back("unix://" + (root / socket).lexically_normal().string());
  }
  return endpoints;
}

ContainerNames::ContainerNames(CriOptions options, ListFn list)
    : options_(std::move(options)), list_(std::move(list)) {}

ContainerNames::~ContainerNames() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<CriContainer> ContainerNames::Lookup(std::string_view id) {
  std::unique_lock lock(mutex_);
  if (!started_) {
    started_ = true;
    thread_ = std::thread([this] { Run(); });
  }
  if (const auto found = containers_.find(id); found != containers_.end()) return found->second;
  if (not_in_runtime_.contains(id) || asked_.contains(id)) return std::nullopt;
  missed_.emplace(id);
  if (!miss_) {
    miss_ = true;
    lock.unlock();
    changed_.notify_all();
  }
  return std::nullopt;
}

ContainerNames::Status ContainerNames::status() const {
  const std::lock_guard lock(mutex_);
  return status_;
}

bool ContainerNames::WaitForAttempts(uint64_t attempts, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return status_.attempts >= attempts; });
}

std::expected<std::vector<CriContainer>, std::string> ContainerNames::ListThroughLibrary() {
  if (cri_list_ == nullptr) {
    // Kept loaded for the process's life (gRPC's threads run from it).
    void* handle = dlopen(options_.library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      return std::unexpected("cannot load " + options_.library.string() + ": " +
                             DlError("dlopen failed"));
    }
    const auto abi = reinterpret_cast<RdmascopeGrpcAbiFn>(dlsym(handle, "rdmascope_grpc_abi"));
    const auto list = reinterpret_cast<RdmascopeCriListFn>(dlsym(handle, "rdmascope_cri_list"));
    if (abi == nullptr || list == nullptr) {
      return std::unexpected(options_.library.string() + " is not rdmascope's gRPC library");
    }
    if (const std::string theirs = abi(); theirs != GrpcAbi()) {
      return std::unexpected(options_.library.string() + " is from another build (" + theirs +
                             ", this is " + GrpcAbi() + ")");
    }
    cri_list_ = list;
  }
  std::vector<CriContainer> containers;
  std::string error;
  if (cri_list_(options_.endpoint.c_str(), static_cast<int>(options_.timeout.count()), &containers,
                &error) != 0) {
    return std::unexpected(error);
  }
  return containers;
}

void ContainerNames::Run() {
  std::unique_lock lock(mutex_);
  std::optional<Clock::time_point> last_attempt;
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    const bool due = !last_attempt || now - *last_attempt >= options_.refresh_interval ||
                     (miss_ && now - *last_attempt >= options_.miss_interval);
    if (!due) {
      const Clock::time_point next =
          *last_attempt + (miss_ ? options_.miss_interval : options_.refresh_interval);
      changed_.wait_until(lock, next);
      continue;
    }
    last_attempt = now;
    miss_ = false;
    asked_.merge(missed_);
    missed_.clear();
    lock.unlock();
    auto listed = list_ ? list_() : ListThroughLibrary();
    lock.lock();
    ++status_.attempts;
    if (listed) {
      containers_.clear();
      for (CriContainer& container : *listed) {
        std::string id = container.id;
        containers_.insert_or_assign(std::move(id), std::move(container));
      }
      status_.containers = containers_.size();
      // Bounded: IDs come from cgroup paths, one per container on the host at most.
      constexpr size_t kMaxNotInRuntime = 4096;
      if (not_in_runtime_.size() + asked_.size() > kMaxNotInRuntime) not_in_runtime_.clear();
      not_in_runtime_.merge(asked_);
      std::erase_if(not_in_runtime_,
                    [this](const std::string& id) { return containers_.contains(id); });
      status_.last_success = Clock::now();
      if (!status_.last_error.empty()) {
        log::Info("container runtime answers again", {{"endpoint", options_.endpoint}});
      }
      status_.last_error.clear();
    } else {
      missed_.merge(asked_);  // asked again at the next attempt
      // The last answer stays: a runtime restarting must not strip every pod name.
      if (status_.last_error != listed.error()) {
        log::Warn("container runtime did not answer; container names are the last known",
                  {{"endpoint", options_.endpoint}, {"err", listed.error()}});
      }
      status_.last_error = listed.error();
    }
    asked_.clear();
    changed_.notify_all();
  }
}

}  // namespace rdmascope::sys
