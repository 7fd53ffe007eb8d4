// The container runtime's and the kubelet's answers behind the host boundary of core/capture.h
// (docs/capture.md "Format"): librdmascope_grpc.so hands the workload collector decoded
// structs, not bytes, so a capture keeps those structs as JSON, one file per sample:
//
//   grpc/cri.json           {"endpoint": "unix:///run/containerd/containerd.sock",
//                            "containers": [{"id": "<64 hex>", "pod": "llm-0", "namespace":
//                            "training", "pod_uid": "<uuid>", "container": "worker"}]}
//   grpc/podresources.json  {"endpoint": "...", "pod_devices": [{"pod": ..., "namespace": ...,
//                            "container": ..., "resource": "rdma/vf", "device_ids": [...]}]}
//
// or {"endpoint": ..., "error": "why the call failed"} when it failed. Live, the call is made
// (one branch more); recording, its answer is also written into the open sample (pod,
// namespace and container names and ids hashed under --redact, core/redact.h WorkloadLabel);
// replaying, the sample's file answers: no socket, no dlopen of the gRPC library.
//
// The file is hostile input: at most kMaxGrpcAnswerBytes, nested at most 4 deep, every field
// checked for its type and length, unknown fields ignored; a file that is not one is the
// source failing with the reason, never a made-up answer.
#pragma once

#include <cstddef>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/redact.h"
#include "sys/cri_containers.h"

namespace rdmascope::sys {

inline constexpr std::string_view kCriAnswerFile = "grpc/cri.json";
inline constexpr std::string_view kPodResourcesAnswerFile = "grpc/podresources.json";
// A node runs hundreds of containers at most, a few hundred bytes each.
inline constexpr size_t kMaxGrpcAnswerBytes = 4 << 20;

using CriAnswer = std::expected<std::vector<CriContainer>, std::string>;
using PodResourcesAnswer = std::expected<std::vector<PodDevices>, std::string>;

// What one file records: where the answer came from, and the answer (an error is an answer).
template <typename Answer>
struct Recorded {
  std::string endpoint;
  Answer answer;
};

std::string FormatCriAnswer(std::string_view endpoint, const CriAnswer& answer);
std::string FormatPodResourcesAnswer(std::string_view endpoint, const PodResourcesAnswer& answer);
// The file's text -> what it records; unexpected: the file is not one (why).
std::expected<Recorded<CriAnswer>, std::string> ParseCriAnswer(std::string_view text);
std::expected<Recorded<PodResourcesAnswer>, std::string> ParsePodResourcesAnswer(
    std::string_view text);

// --redact: names and ids hashed as core/redact.h WorkloadLabel does (container ids and pod
// UIDs as the cgroup files' are, so the replayed lookups still match); resource names and
// device ids (PCI addresses, kept elsewhere too) stay.
void Redact(const redact::Redactor& redactor, std::vector<CriContainer>& containers);
void Redact(const redact::Redactor& redactor, std::vector<PodDevices>& devices);
// An endpoint under --redact: the runtimes' and the kubelet's default sockets stay (which
// runtime it was is what a support case needs, and says nothing of the host); any other (a
// path of the host's, a host name, an address) becomes Name("endpoint", it).
std::string RedactEndpoint(const redact::Redactor& redactor, std::string_view endpoint);

// The boundary (core/capture.h Active()): live, `live()`; recording, `live()` written to the
// sample as it answered (redacted under --redact); replaying, the sample's file, `live` never
// called. A sample without the file, or a file refused, is an error answer saying so.
CriAnswer CapturedCriList(std::string_view endpoint, const std::function<CriAnswer()>& live);
PodResourcesAnswer CapturedPodResourcesList(std::string_view endpoint,
                                            const std::function<PodResourcesAnswer()>& live);

// Replaying: whether a sample holds `file` (kCriAnswerFile...), and then the endpoint the
// first sample holding it recorded ("" when that file is refused). nullopt: not recorded,
// i.e. the host had no such source to ask.
std::optional<std::string> RecordedEndpoint(std::string_view file);

}  // namespace rdmascope::sys
