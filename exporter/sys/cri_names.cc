#include "sys/cri_names.h"

#include "core/log.h"
#include "sys/grpc_capture.h"

namespace rdmascope::sys {

ContainerNames::ContainerNames(CriOptions options, ListFn list)
    : options_(std::move(options)),
      list_(std::move(list)),
      refresh_(
          {.refresh_interval = options_.refresh_interval,
           .miss_interval = options_.miss_interval,
           .failed_message = "container runtime did not answer; container names are the last known",
           .recovered_message = "container runtime answers again",
           .endpoint = options_.endpoint},
          {.before =
               [this] {
                 asked_.merge(missed_);
                 missed_.clear();
               },
           .fetch = [this] { return Fetch(); },
           .after = [this](bool ok) { Publish(ok); }}) {}

ContainerNames::~ContainerNames() = default;

std::optional<CriContainer> ContainerNames::Lookup(std::string_view id) {
  const auto lock = refresh_.Lock();
  refresh_.StartLocked();
  if (const auto found = containers_.find(id); found != containers_.end()) return found->second;
  if (not_in_runtime_.contains(id) || asked_.contains(id)) return std::nullopt;
  missed_.emplace(id);
  refresh_.MissLocked();
  return std::nullopt;
}

ContainerNames::Status ContainerNames::status() const {
  const auto lock = refresh_.Lock();
  const BackgroundRefresh::Status& refresh = refresh_.StatusLocked();
  return {.containers = containers_.size(),
          .last_success = refresh.last_success,
          .last_error = refresh.last_error,
          .attempts = refresh.attempts};
}

bool ContainerNames::WaitForAttempts(uint64_t attempts, std::chrono::milliseconds timeout) const {
  return refresh_.WaitForAttempts(attempts, timeout);
}

std::expected<std::vector<CriContainer>, std::string> ContainerNames::ListThroughLibrary() {
  if (cri_list_ == nullptr) {
    const auto entry = GrpcEntryPoint(options_.library, "rdmascope_cri_list");
    if (!entry) return std::unexpected(entry.error());
    cri_list_ = reinterpret_cast<RdmascopeCriListFn>(*entry);
  }
  std::vector<CriContainer> containers;
  std::string error;
  if (cri_list_(options_.endpoint.c_str(), static_cast<int>(options_.timeout.count()), &containers,
                &error) != 0) {
    return std::unexpected(error);
  }
  return containers;
}

std::string ContainerNames::Fetch() {
  // Through the capture's boundary: replaying, the sample's recorded answer, and the library
  // is never loaded.
  fetched_ =
      CapturedCriList(options_.endpoint, [this] { return list_ ? list_() : ListThroughLibrary(); });
  return fetched_ ? std::string() : fetched_.error();
}

void ContainerNames::Publish(bool ok) {
  if (ok) {
    containers_.clear();
    for (CriContainer& container : *fetched_) {
      std::string id = container.id;
      containers_.insert_or_assign(std::move(id), std::move(container));
    }
    fetched_->clear();
    // Bounded: IDs come from cgroup paths, one per container on the host at most.
    constexpr size_t kMaxNotInRuntime = 4096;
    if (not_in_runtime_.size() + asked_.size() > kMaxNotInRuntime) not_in_runtime_.clear();
    not_in_runtime_.merge(asked_);
    std::erase_if(not_in_runtime_,
                  [this](const std::string& id) { return containers_.contains(id); });
  } else {
    // The last answer stays: a runtime restarting must not strip every pod name.
    missed_.merge(asked_);  // asked again at the next attempt
  }
  asked_.clear();
}

}  // namespace rdmascope::sys
