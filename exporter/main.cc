// rdmascope: RDMA observability exporter and profiler.
//   rdmascope serve   run the Prometheus exporter
//   rdmascope check   build every collector once, report and exit
//   rdmascope doctor  diagnose the host's RDMA set-up, with advice (docs/doctor.md)
//   rdmascope profile a time-bounded profile of one RDMA process (docs/profile.md)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "cli/capture.h"
#include "cli/doctor.h"
#include "cli/help_format.h"
#include "cli/profile.h"
#include "cli/serve.h"
#include "cli/serve_flags.h"
#include "core/log.h"
#include "core/version.h"
#include "doctor/report.h"
#include "sys/capability_broker.h"
#include "sys/unwind_sandbox.h"

int main(int argc, char** argv) {
  // The exporter's own unwinder worker (sys/unwind_client.h starts it): not a command for
  // users, so not in --help; it sandboxes itself before it reads a byte.
  if (argc >= 2 && std::string_view(argv[1]) == "__unwind-worker") {
    return rdmascope::sys::UnwindWorkerMain(argc, argv);
  }
  // serve's capability broker (sys/capability_broker.h), likewise: it confines itself first.
  if (argc >= 2 && std::string_view(argv[1]) == "__capability-broker") {
    return rdmascope::sys::CapabilityBrokerMain(argc, argv);
  }
  // libdwfl's dwfl_standard_find_debuginfo fetches debug info from the servers this names
  // (libdwfl/debuginfod-client.c): the unwinder never calls it (sys/module_files.h), and
  // nothing a process's files say should make the exporter reach the network. Unset while
  // the process is still single-threaded (unsetenv is not thread-safe).
  unsetenv("DEBUGINFOD_URLS");
  CLI::App app{"rdmascope: RDMA observability for Linux hosts (Prometheus exporter)", "rdmascope"};
  app.set_version_flag("--version", std::string("rdmascope ") + rdmascope::kVersion +
                                        " (revision " + rdmascope::kRevision + ")");
  app.require_subcommand(1);
  rdmascope::UseHelpFormatter(app);  // before the subcommands, which inherit it

  rdmascope::ServeConfig config;
  CLI::App* serve = app.add_subcommand("serve", "Run the Prometheus exporter");
  rdmascope::AddServeFlags(*serve, config);
  CLI::App* check = app.add_subcommand(
      "check",
      "Attach every probe and open every counter as `serve` would (same flags), collect once, "
      "print each collector's state and exit (1 if one failed)");
  rdmascope::AddServeFlags(*check, config);
  rdmascope::doctor::DoctorOptions doctor_options;
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Run the collectors as `serve` would (same flags), twice --window apart, and report every "
      "RDMA pitfall found with advice; exit 0 ok, 1 warn, 2 crit, 3 could not run");
  rdmascope::AddCollectorFlags(*doctor, config);  // no --web.*: doctor serves nothing
  rdmascope::AddDoctorFlags(*doctor, doctor_options);
  rdmascope::CaptureOptions capture_options;
  CLI::App* capture = app.add_subcommand(
      "capture",
      "Record what the collectors read from this host (sysfs and procfs files, ethtool and "
      "netlink replies) into a capture directory for a bug report or `--replay` "
      "(docs/capture.md); says what it could not record and why");
  rdmascope::AddCollectorFlags(*capture, config);
  rdmascope::AddCaptureFlags(*capture, capture_options);
  rdmascope::ProfileOptions profile_options;
  CLI::App* profile = app.add_subcommand(
      "profile",
      "Profile one RDMA process: launch it (-- COMMAND ARGS...) or attach (--pid) with the "
      "collectors `serve` runs, until it exits, --duration ends or Ctrl-C; writes a summary, "
      "profile.json, pprof, folded stacks and an HTML report");
  rdmascope::AddCollectorFlags(*profile, config);
  rdmascope::AddProfileFlags(*profile, profile_options);

  try {
    app.parse(argc, argv);
    rdmascope::FinishServeConfig(config);
    if (doctor->parsed()) rdmascope::FinishDoctorOptions(doctor_options);
    if (capture->parsed()) rdmascope::FinishCaptureOptions(capture_options);
    // A profile follows serve's MR tracking: with DWARF unwinding of the captured stacks
    // (issue 27) the kernel path's call sites go through libibverbs without frame pointers.
    if (profile->parsed()) rdmascope::FinishProfileOptions(profile_options);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // Nagios: a doctor that cannot run is UNKNOWN (3), not a finding.
    return code != 0 && doctor->parsed() ? rdmascope::doctor::kExitCannotRun : code;
  }

  try {
    if (serve->parsed()) return rdmascope::RunServe(config);
    if (check->parsed()) return rdmascope::RunCheck(config);
    if (capture->parsed()) return rdmascope::RunCapture(config, capture_options);
    if (doctor->parsed()) return rdmascope::RunDoctor(config, doctor_options);
    if (profile->parsed()) return rdmascope::RunProfile(config, profile_options);
  } catch (const std::exception& e) {
    rdmascope::log::Error("fatal", {{"err", e.what()}});
    return 1;
  }
  return 0;
}
