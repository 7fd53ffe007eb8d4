#include "cli/profile.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "collectors/build.h"
#include "collectors/mr.h"
#include "collectors/occupancy.h"
#include "collectors/verbs.h"
#include "collectors/workload.h"
#include "core/collector_runner.h"
#include "core/duration.h"
#include "core/log.h"
#include "core/terminal_text.h"
#include "core/version.h"
#include "doctor/check_util.h"
#include "doctor/local_snapshot.h"
#include "profile/output_dir.h"
#include "profile/outputs.h"
#include "profile/own_perf.h"
#include "profile/profile_session.h"
#include "profile/summary.h"

namespace rdmascope {
namespace {

using profile::ProfileData;

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

CLI::Option* AddDuration(CLI::App& app, const std::string& flag, uint64_t& target,
                         const std::string& help, const std::string& default_text) {
  return app
      .add_option_function<std::string>(
          flag, [&target](const std::string& text) { target = *ParseDurationNs(text); }, help)
      ->check([](const std::string& text) {
        const auto ns = ParseDurationNs(text);
        return ns && *ns > 0 ? std::string() : "not a positive duration like 30s: " + text;
      })
      ->default_str(default_text)
      ->group("Profile");
}

// The child's environment: ours, with the preload library prepended to LD_PRELOAD and the
// private stats directory. Built before fork: the child may only make async-signal-safe calls
// (the parent has threads), and setenv is not one.
std::vector<std::string> ChildEnvironment(const std::optional<std::filesystem::path>& preload,
                                          const std::string& preload_dir) {
  std::vector<std::string> env;
  std::string ld_preload = preload ? preload->string() : "";
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view item(*entry);
    if (item.starts_with("LD_PRELOAD=")) {
      const std::string_view inherited = item.substr(11);
      if (!inherited.empty())
        ld_preload += (ld_preload.empty() ? "" : " ") + std::string(inherited);
    } else if (!item.starts_with("RDMASCOPE_PRELOAD_DIR=") &&
               !item.starts_with("RDMASCOPE_PRELOAD_MESSAGE_SIZES=")) {
      env.emplace_back(item);
    }
  }
  if (!ld_preload.empty()) env.push_back("LD_PRELOAD=" + ld_preload);
  env.push_back("RDMASCOPE_PRELOAD_DIR=" + preload_dir);
  // Message sizes are counted only when asked (the post path's cost for everyone else).
  env.push_back("RDMASCOPE_PRELOAD_MESSAGE_SIZES=1");
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// The child: waits for `go` to close (the baseline is taken), then execs. Exec's errno goes
// back through `error_pipe` (close-on-exec: a successful exec closes it empty).
[[noreturn]] void ExecChild(char* const* argv, char* const* envp, int go, int error_pipe) {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  char byte;
  while (read(go, &byte, 1) < 0 && errno == EINTR) {
  }
  execvpe(argv[0], argv, envp);
  const int error = errno;
  (void)!write(error_pipe, &error, sizeof error);
  _exit(127);
}

// The program's exit status as a shell reports it (128 + signal when killed).
int ShellStatus(const siginfo_t& info) {
  return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

std::string ProcessComm(uint32_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(file, comm);
  return comm;
}

}  // namespace

void AddProfileFlags(CLI::App& profile, ProfileOptions& options) {
  AddDuration(profile, "--duration", options.duration_ns,
              "Longest profile window; a launched program that outlives it keeps running", "30s");
  AddDuration(profile, "--interval", options.interval_ns,
              "Time between samples (timelines, peaks, call sites)", "1s");
  profile
      .add_option("--output", options.output,
                  "Directory for profile.json, profile.pb.gz (pprof), *.folded and "
                  "profile.html (created)")
      ->capture_default_str()
      ->group("Profile");
  profile
      .add_option("--preload", options.preload,
                  "librdmascope_preload.so to load into the program (default: beside the "
                  "executable, else the installed one)")
      ->group("Profile");
  profile.add_option("--pid", options.pid, "Attach to this running process instead of launching")
      ->group("Profile");
  profile.add_flag("--quiet", options.quiet, "No progress line on stderr")->group("Profile");
  profile.add_option("command", options.command, "-- COMMAND ARGS...: the program to profile");
}

void FinishProfileOptions(const ProfileOptions& options) {
  if (options.pid.has_value() == !options.command.empty()) {
    throw CLI::ValidationError("profile", "give either --pid PID or -- COMMAND ARGS...");
  }
}

std::optional<std::filesystem::path> FindPreload(const std::string& flag,
                                                 const std::filesystem::path& executable,
                                                 std::string& why) {
  std::error_code ec;
  if (!flag.empty()) {
    if (std::filesystem::is_regular_file(flag, ec)) return std::filesystem::absolute(flag, ec);
    why = "--preload " + flag + " is not a file";
    return std::nullopt;
  }
  const std::filesystem::path dir = executable.parent_path();
  for (const std::filesystem::path& candidate :
       {dir / "preload" / "librdmascope_preload.so",
        std::filesystem::path(RDMASCOPE_PRELOAD_INSTALL_DIR) / "librdmascope_preload.so"}) {
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  why = "librdmascope_preload.so found neither in " + (dir / "preload").string() + " nor in " +
        RDMASCOPE_PRELOAD_INSTALL_DIR + " (--preload PATH)";
  return std::nullopt;
}

int RunProfile(ServeConfig config, const ProfileOptions& options) {
  log::SetLevel(config.log_level);
  // The output directory is checked (and created) before the profile runs: a refused one
  // must not cost the window. Checked again, on what is open, when writing.
  try {
    const profile::OutputDir check(options.output);
  } catch (const std::exception& e) {
    log::Error("profile: cannot write the report", {{"err", e.what()}});
    return 1;
  }
  std::vector<std::string> notes;
  const bool launch = !options.pid.has_value();
  std::optional<std::filesystem::path> preload;
  std::string preload_dir;
  if (launch) {
    std::string why;
    std::error_code ec;
    preload =
        FindPreload(options.preload, std::filesystem::read_symlink("/proc/self/exe", ec), why);
    if (!preload) {
      log::Warn(
          "profile: no preload library; message sizes, completion latency and CQ "
          "occupancy are not measured",
          {{"why", why}});
      notes.push_back("no preload library: " + why);
    }
    // The program's own stats directory: the occupancy collector reads only its files.
    char dir_template[] = "/tmp/rdmascope-profile-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) {
      log::Error("profile: cannot create a stats directory", {{"err", std::strerror(errno)}});
      return 1;
    }
    preload_dir = dir_template;
    config.occupancy.dir = preload_dir;
  } else if (kill(static_cast<pid_t>(*options.pid), 0) != 0 && errno == ESRCH) {
    log::Error("profile: no such process", {{"pid", std::to_string(*options.pid)}});
    return 1;
  }

  // Probes attach here, before the program exists: it is seen from its first instruction.
  std::vector<NamedCollector> collectors = BuildCollectors(config);
  const auto probe_errors = doctor::ProbeErrors(collectors);
  profile::ProfileSession* session_ptr = nullptr;
  std::function<std::vector<VerbsQp>(uint32_t)> qp_source;
  std::function<WorkloadLabels(uint32_t)> workload_source;
  for (NamedCollector& entry : collectors) {
    if (const auto* workload = dynamic_cast<const WorkloadCollector*>(entry.collector.get())) {
      workload_source = [workload](uint32_t pid) { return workload->Describe(pid); };
    }
    if (const auto* verbs = dynamic_cast<const VerbsCollector*>(entry.collector.get())) {
      qp_source = [verbs](uint32_t pid) { return verbs->Qps(pid); };
    }
    if (auto* mr = dynamic_cast<MrCollector*>(entry.collector.get())) {
      mr->SetExitObserver([&session_ptr](const MrProcess& last) {
        if (session_ptr != nullptr) session_ptr->OnMrExit(last);
      });
    }
    // The program's final preload figures: read from its stale stats file by whichever
    // collection finds it after the exit, before that collection deletes the file.
    if (auto* occupancy = dynamic_cast<OccupancyCollector*>(entry.collector.get())) {
      occupancy->SetFinishedObserver([&session_ptr](const OccupancyProcess& last) {
        if (session_ptr != nullptr) session_ptr->OnPreloadFinished(last);
      });
    }
  }
  CollectorRunner runner(std::move(collectors), BuildInfo{kVersion, kRevision}, config.procfs);

  struct sigaction action {};
  action.sa_handler = OnSigint;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  profile::SessionOptions session_options{.pid = options.pid.value_or(0),
                                          .attached = !launch,
                                          .preload_dir = config.occupancy.dir,
                                          .command = options.command,
                                          .procfs = config.procfs,
                                          .sysfs = config.sysfs,
                                          .qps = qp_source,
                                          .workload = workload_source};
  std::optional<profile::ProfileSession> session;
  profile::OwnPerf own_perf;
  pid_t child = -1;
  if (launch) {
    // The child waits for `go` to close: the baseline is taken before its first instruction.
    int go[2], exec_error[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(exec_error, O_CLOEXEC) != 0) {
      throw std::runtime_error(std::string("pipe2 failed: ") + std::strerror(errno));
    }
    std::vector<std::string> env_strings = ChildEnvironment(preload, preload_dir);
    std::vector<std::string> argv_strings = options.command;
    const std::vector<char*> envp = Pointers(env_strings);
    const std::vector<char*> argv = Pointers(argv_strings);
    child = fork();
    if (child < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (child == 0) {
      close(go[1]);
      close(exec_error[0]);
      ExecChild(argv.data(), envp.data(), go[0], exec_error[1]);
    }
    close(go[0]);
    close(exec_error[1]);
    session_options.pid = static_cast<uint32_t>(child);
    // Opened before the exec: the program is counted from its first instruction.
    own_perf = profile::OpenOwnPerf(child, config.sysfs, config.procfs);
    session.emplace(runner, probe_errors, session_options);
    session_ptr = &*session;
    session->Begin();
    close(go[1]);
    int exec_errno = 0;
    const ssize_t got = read(exec_error[0], &exec_errno, sizeof exec_errno);
    close(exec_error[0]);
    if (got == sizeof exec_errno) {
      waitpid(child, nullptr, 0);
      log::Error("profile: cannot run " + options.command.front(),
                 {{"err", std::strerror(exec_errno)}});
      return 1;
    }
  } else {
    session.emplace(runner, probe_errors, session_options);
    session_ptr = &*session;
    session->Begin();
    own_perf = profile::OpenOwnPerf(static_cast<pid_t>(*options.pid), config.sysfs, config.procfs);
  }
  log::Info("profile: window open",
            {{"pid", std::to_string(session_options.pid)},
             {"duration_seconds", doctor::Num(Seconds(options.duration_ns))}});

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::nanoseconds(options.duration_ns);
  auto next_sample = start + std::chrono::nanoseconds(options.interval_ns);
  auto next_progress = start + std::chrono::seconds(1);
  std::string end_reason = "duration";
  std::optional<int> exit_status;
  for (;;) {
    if (g_interrupted.load()) {
      end_reason = "interrupted";
      break;
    }
    if (launch) {
      siginfo_t info{};
      // WNOWAIT: the child stays a zombie (its pid cannot be reused) until the report is done.
      if (waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == child) {
        end_reason = "exited";
        exit_status = ShellStatus(info);
        break;
      }
    } else if ((kill(static_cast<pid_t>(*options.pid), 0) != 0 && errno == ESRCH) ||
               session->exit_seen()) {
      end_reason = "exited";
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    if (now >= next_sample) {
      session->Sample();
      next_sample += std::chrono::nanoseconds(options.interval_ns);
    }
    if (!options.quiet && now >= next_progress) {
      const profile::Progress progress = session->progress();
      std::fprintf(
          stderr, "profile: %.0fs elapsed, %llu registrations, %llu events, %s outstanding\n",
          progress.elapsed_seconds, static_cast<unsigned long long>(progress.registrations),
          static_cast<unsigned long long>(progress.events),
          doctor::Bytes(static_cast<double>(progress.outstanding_bytes)).c_str());
      next_progress += std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (end_reason == "exited") {
    // One collection after the exit: the program's stats file is stale now (the exit closed
    // its lock), so it hands its final figures over unless an earlier one already did.
    session->Sample();
    session->ProcessExited();
  }
  if (launch && end_reason != "exited") {
    notes.push_back("the program (pid " + std::to_string(child) + ") keeps running after the " +
                    (end_reason == "interrupted" ? std::string("interrupt") : "window"));
  }
  session->SetProcessPerf(profile::ReadOwnPerf(own_perf));
  ProfileData data = session->Finish(end_reason, exit_status, notes);
  if (data.comm.empty()) data.comm = ProcessComm(data.pid);
  if (launch && end_reason == "exited") waitpid(child, nullptr, 0);  // reap, now the report is
  if (launch && end_reason == "exited") {
    std::error_code ec;
    std::filesystem::remove_all(preload_dir, ec);  // a program still running keeps writing there
  }
  try {
    profile::WriteOutputs(data, options.output);
  } catch (const std::exception& e) {
    log::Error("profile: cannot write the report", {{"err", e.what()}});
    return 1;
  }
  const std::string summary = profile::Summary(data, options.output);
  std::fwrite(summary.data(), 1, summary.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace rdmascope
