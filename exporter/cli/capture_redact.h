// `capture --redact` of the running exporter's debug answers (docs/capture.md "Redaction"):
// /debug/workloads and /debug/mr/stacks name tenants' workloads, processes and code. Each is
// rewritten field by field from what the exporter is known to answer, as core/redact.h hashes
// the rest of a capture:
//   workload labels (pod, namespace, container, ids, Slurm ids, systemd unit)  WorkloadLabel
//   paths, addresses and host names in free text (modules, errors, reasons)   FreeText
//   the container runtime's and kubelet's endpoints                             RedactEndpoint
// comm and pids stay, as the resources and workload collectors' files keep them; counts and
// ages stay. A field the exporter is not known to answer is left out, not kept: a newer
// exporter's addition may name what these rules do not cover.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "core/redact.h"

namespace rdmascope {

// `route` is "/debug/workloads" or "/debug/mr/stacks"; `body` its JSON answer. Unexpected (why)
// for a body that is not a JSON object, or another route: then nothing is kept.
std::expected<std::string, std::string> RedactExporterAnswer(const redact::Redactor& redactor,
                                                             std::string_view route,
                                                             std::string_view body);

}  // namespace rdmascope
