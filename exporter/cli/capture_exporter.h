// The running exporter's answers in a capture (docs/capture.md "The running exporter"): what
// `rdmascope serve` holds in memory (the MRs its eBPF probes saw registered, with their call
// sites; the workloads it described) is no file, ioctl or netlink reply a capture records, so
// `capture` asks the exporter on this host for its /debug/mr/stacks and /debug/workloads once
// per sample, and `serve --replay` answers those routes from the capture where no collector of
// its own does (mr is off under replay: no probes).
#pragma once

#include <CLI/CLI.hpp>
#include <array>
#include <chrono>
#include <string>
#include <string_view>

#include "core/capture.h"
#include "core/collector.h"
#include "doctor/options.h"

namespace rdmascope {

struct CaptureExporterOptions {
  // A URL, "auto" (root's rdmascope on the default port, as doctor finds it) or "none".
  std::string exporter = "auto";
  std::chrono::milliseconds timeout = std::chrono::seconds(5);
  // --exporter.ca-file...: an exporter behind --web.config.file (TLS, basic auth), as doctor's.
  doctor::ClientAccess access;
};

struct CapturedRoute {
  std::string_view route;  // "/debug/mr/stacks"
  std::string_view file;   // its answer in a sample: "exporter/debug/mr/stacks.json"
};
inline constexpr std::array<CapturedRoute, 2> kCapturedExporterRoutes{{
    {"/debug/mr/stacks", "exporter/debug/mr/stacks.json"},
    {"/debug/workloads", "exporter/debug/workloads.json"},
}};
// A debug answer is at most this large: /debug/mr/stacks' answer is bounded by its top=100
// well below it; anything larger is refused when recorded and when replayed.
inline constexpr size_t kMaxExporterAnswer = 16 << 20;

// --exporter, --exporter.timeout, and doctor's --exporter.* TLS and auth flags
// (cli/client_access_flags.h).
void AddCaptureExporterFlags(CLI::App& capture, CaptureExporterOptions& options);

// Asks the exporter for each route and writes the 200 answers into the writer's open sample;
// why one is not recorded (nobody answers, not root's rdmascope, HTTP 404 with its collector
// off) goes to the index's "not_recorded". `redactor`: --redact's, the answers' names and
// addresses hashed (cli/capture_redact.h); null: kept as answered. Throws when a password or
// token file of --exporter.* cannot be read (before anything is asked).
void RecordExporterAnswers(const CaptureExporterOptions& options, capture::Writer& writer,
                           const redact::Redactor* redactor);

// serve --replay (the capture installed): each route no collector serves and some sample
// holds is answered from the sample replayed now, byte for byte if it is JSON; a sample
// without it is an error naming the file.
void AddCapturedExporterRoutes(DebugRoutes& routes);

}  // namespace rdmascope
