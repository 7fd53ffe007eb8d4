// `rdmascope capture` (docs/capture.md): records what the collectors read from this host into
// a capture directory, and `--replay` on serve/check: every collector answered from one.
// Flags and wiring only; the format is core/capture.h, its ioctl and netlink parts
// sys/ethtool_capture.h and sys/netlink_capture.h.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>

#include "cli/capture_exporter.h"
#include "cli/serve_config.h"

namespace rdmascope {

struct CaptureOptions {
  std::filesystem::path output;  // empty: rdmascope-capture-HOST-YYYYmmddTHHMMSS
  bool force = false;
  // Two samples give every counter a rate (doctor's, the alerts'); 10s apart is doctor's
  // default --window, long enough for a counter that moves at all to move, short enough to
  // wait for while filing a bug.
  int samples = 2;
  std::chrono::nanoseconds interval = std::chrono::seconds(10);
  bool redact = false;
  std::filesystem::path redact_key_file;  // empty: a key of this capture's own
  CaptureExporterOptions exporter;        // whose debug answers each sample records
};

// Registers capture's own flags (--output, --force, --samples, --interval, --redact,
// --redact.key-file, --exporter, --exporter.timeout).
void AddCaptureFlags(CLI::App& capture, CaptureOptions& options);
// After parsing: what CLI11 cannot check (--exporter.* pairs, as doctor's). Throws
// CLI::ValidationError.
void FinishCaptureOptions(const CaptureOptions& options);
int RunCapture(ServeConfig config, const CaptureOptions& options);

// --replay PATH: the collectors that cannot be replayed are turned off in `config`, and the
// capture is installed as the process's host boundary. Before any thread starts. Throws with
// a message naming what is wrong with the capture.
void StartReplay(ServeConfig& config);

}  // namespace rdmascope
