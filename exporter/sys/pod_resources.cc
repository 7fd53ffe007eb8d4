#include "sys/pod_resources.h"

#include "sys/grpc_capture.h"
#include "sys/grpc_library.h"

namespace rdmascope::sys {

PodResources::PodResources(PodResourcesOptions options, ListFn list)
    : options_(std::move(options)),
      list_(std::move(list)),
      devices_(std::make_shared<const std::vector<PodDevices>>()),
      refresh_(
          {.refresh_interval = options_.refresh_interval,
           // No reader asks sooner: a device handed to a pod shows at the next refresh.
           .miss_interval = options_.refresh_interval,
           .failed_message = "kubelet PodResources did not answer; the pods of devices are "
                             "the last known",
           .recovered_message = "kubelet PodResources answers again",
           .endpoint = options_.endpoint},
          {.fetch =
               [this] {
                 // Replaying: the sample's recorded answer, no library loaded.
                 fetched_ = CapturedPodResourcesList(
                     options_.endpoint, [this] { return list_ ? list_() : ListThroughLibrary(); });
                 return fetched_ ? std::string() : fetched_.error();
               },
           .after =
               [this](bool ok) {
                 // A failure keeps the last answer: a kubelet restarting must not strip
                 // every device of its pod.
                 if (ok) {
                   devices_ = std::make_shared<const std::vector<PodDevices>>(std::move(*fetched_));
                   fetched_->clear();
                 }
               }}) {}

PodResources::~PodResources() = default;

std::shared_ptr<const std::vector<PodDevices>> PodResources::Snapshot() {
  const auto lock = refresh_.Lock();
  refresh_.StartLocked();
  return devices_;
}

std::expected<std::vector<PodDevices>, std::string> PodResources::ListThroughLibrary() {
  if (list_entry_ == nullptr) {
    const auto entry = GrpcEntryPoint(options_.library, "rdmascope_podresources_list");
    if (!entry) return std::unexpected(entry.error());
    list_entry_ = reinterpret_cast<RdmascopePodResourcesListFn>(*entry);
  }
  std::vector<PodDevices> devices;
  std::string error;
  if (list_entry_(options_.endpoint.c_str(), static_cast<int>(options_.timeout.count()), &devices,
                  &error) != 0) {
    return std::unexpected(error);
  }
  return devices;
}

}  // namespace rdmascope::sys
