#include "cli/serve_flags.h"

#include <array>
#include <regex>
#include <string>
#include <tuple>

#include "collectors/registry.h"
#include "core/duration.h"
#include "http/listen_address.h"

namespace rdmascope {
namespace {

// The first release's spellings of collector options. node_exporter's scheme is
// --collector.NAME.OPTION, and these mixed in --NAME.OPTION; --probe.* stays as it is because
// its targets feed two collectors (mr and verbs). Accepted through 0.1.x, removed in 0.2.0
// (docs/configuration.md, "Renamed flags").
constexpr std::array<RenamedFlag, 16> kRenamedFlags{{
    {"--resources.max-processes", "--collector.resources.max-processes"},
    {"--resources.max-raw-cqs", "--collector.resources.max-raw-cqs"},
    {"--mr.library", "--probe.library"},
    {"--mr.binary", "--probe.binary"},
    {"--mr.tracking", "--collector.mr.tracking"},
    {"--mr.max-regions", "--collector.mr.max-regions"},
    {"--mr.leak-age", "--collector.mr.leak-age"},
    {"--mr.pinned-rescan-seconds", "--collector.mr.pinned-rescan-seconds"},
    {"--mr.aggregate-by-comm", "--collector.mr.aggregate-by-comm"},
    {"--mr.max-processes", "--collector.mr.max-processes"},
    {"--verbs.max-queues", "--collector.verbs.max-queues"},
    {"--verbs.max-processes", "--collector.verbs.max-processes"},
    {"--verbs.max-queue-series", "--collector.verbs.max-queue-series"},
    {"--occupancy.dir", "--collector.occupancy.dir"},
    {"--perf.event", "--collector.perf.event"},
    {"--perf.per-cpu", "--collector.perf.per-cpu"},
}};

// Registers `renamed.old_name` as a hidden option that hands its values to the option now named
// `renamed.new_name`, which then validates and stores them as if given under its own name (so
// count() of the new name, checks and defaults all behave the same). Defined after the new
// options, its callback runs after theirs: the new option's callback has not run unless the
// new name was given too, which is refused rather than guessing which one wins.
void AddDeprecatedAlias(CLI::App& app, const RenamedFlag& renamed) {
  CLI::Option* current = app.get_option(std::string(renamed.new_name));
  const std::string old_name(renamed.old_name), new_name(renamed.new_name);
  const CLI::callback_t forward = [current, old_name, new_name](const CLI::results_t& values) {
    if (current->count() > 0) {
      throw CLI::ValidationError(old_name, "is the old name of " + new_name +
                                               ", which is given too: keep only " + new_name);
    }
    log::Warn("deprecated flag, removed in 0.2.0: use the new name",
              {{"flag", old_name}, {"new", new_name}});
    for (const std::string& value : values) current->add_result(value);
    current->run_callback();
    return true;
  };
  CLI::Option* alias = app.add_option(old_name, forward, "deprecated: " + new_name);
  if (current->get_expected_max() == 0) {  // a flag: no value, or an explicit =true/=false
    alias->expected(0)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  } else {
    alias->type_size(current->get_type_size_min(), current->get_type_size_max())
        ->expected(current->get_expected_min(), current->get_expected_max())
        ->multi_option_policy(current->get_multi_option_policy())
        ->allow_extra_args(current->get_allow_extra_args());
  }
  alias->group("");  // hidden from --help
}

void CheckRegex(const std::string& flag, const std::string& pattern) {
  if (pattern.empty()) return;
  try {
    std::regex compiled(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw CLI::ValidationError(flag, "invalid regular expression \"" + pattern + "\": " + e.what());
  }
}

void AddDeviceFilters(CLI::App& serve, const std::string& collector, std::string& include,
                      std::string& exclude) {
  serve
      .add_option("--collector." + collector + ".device-include", include,
                  "Regex of device names to collect (whole-name match; default all)")
      ->group("Collector " + collector);
  serve
      .add_option("--collector." + collector + ".device-exclude", exclude,
                  "Regex of device names to skip (whole-name match)")
      ->group("Collector " + collector);
}

// What `serve` keeps of its capabilities after start-up (docs/security.md, "Capabilities").
void AddPrivilegeFlags(CLI::App& serve, ServeConfig& config) {
  serve
      .add_option_function<std::string>(
          "--capabilities.keep",
          [&config](const std::string& list) {
            config.capabilities_keep = *caps::ParseKeepList(list);
          },
          "Capabilities kept once probes are attached and counters opened, comma-separated "
          "(cap_net_admin,cap_perfmon) or \"none\"; all others are dropped before the HTTP server "
          "starts. Default: what the enabled collectors need while serving. CAP_SYS_ADMIN and "
          "CAP_BPF are never kept")
      ->check([](const std::string& list) {
        const auto parsed = caps::ParseKeepList(list);
        return parsed ? std::string() : parsed.error();
      })
      ->group("Privileges");
  serve
      .add_flag("--capabilities.broker,!--no-capabilities.broker", config.capability_broker,
                "Hold CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (of those kept) in a small broker "
                "process that answers a fixed set of questions about other users' processes, "
                "never in the process that serves HTTP (default on; docs/security.md)")
      ->group("Privileges");
}

// What serve's /doctor keeps (docs/doctor.md, "History mode"). Not doctor's: doctor observes
// its own --window, or shows the exporter's report.
void AddDoctorHistoryFlags(CLI::App& serve, ServeConfig& config) {
  serve
      .add_option_function<std::string>(
          "--doctor.lookback",
          [&config](const std::string& text) {
            config.doctor_lookback_seconds = static_cast<double>(*ParseDurationNs(text)) / 1e9;
          },
          "What /doctor judges counter rates over (CRC and symbol errors, link downs, pause "
          "storms, retransmissions...): the last this long of the exporter's collections, so an "
          "old error burst stops firing (Prometheus duration, 5m to 24h)")
      ->check([](const std::string& text) {
        const auto ns = ParseDurationNs(text);
        return ns && *ns >= 300'000'000'000ULL && *ns <= 86'400'000'000'000ULL
                   ? std::string()
                   : "not a duration from 5m to 24h: " + text;
      })
      ->default_str("15m")
      ->group("Doctor");
}

}  // namespace

void AddServeFlags(CLI::App& serve, ServeConfig& config) {
  serve
      .add_option("--replay", config.replay,
                  "Read a capture (rdmascope capture; docs/capture.md: a directory or the same "
                  "as a .tar.gz) instead of this host: one sample per scrape, the last "
                  "repeating. Every collector the capture recorded answers from it: no file, "
                  "ioctl, netlink socket, BPF program, perf event or gRPC call of this host")
      ->check(CLI::ExistingPath);
  AddWebFlags(serve, config);
  AddCollectorFlags(serve, config);
  AddPrivilegeFlags(serve, config);
  AddDoctorHistoryFlags(serve, config);
}

void AddWebFlags(CLI::App& serve, ServeConfig& config) {
  serve
      .add_option("--web.listen-address", config.web.listen_address,
                  "Address to listen on, [host]:port; port 0 picks a free port")
      ->capture_default_str()
      ->group("Web");
  serve
      .add_option("--web.telemetry-path", config.web.telemetry_path,
                  "Path under which to expose metrics")
      ->capture_default_str()
      ->check([](const std::string& path) {
        return path.size() > 1 && path.front() == '/'
                   ? std::string()
                   : std::string("must start with / and not be /");
      })
      ->group("Web");
  serve
      .add_option("--web.threads", config.web.threads,
                  "HTTP threads; each serves its share of the connections (idle ones cost no "
                  "thread) and runs one scrape at a time")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->group("Web");
  serve
      .add_option("--web.idle-timeout", config.web.idle_timeout_seconds,
                  "Seconds after which a connection that sends nothing (idle keep-alive, or a "
                  "request sent too slowly) is closed")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600))
      ->group("Web");
  serve
      .add_option("--web.max-connections", config.web.max_connections,
                  "Open HTTP connections at most; further ones wait in the kernel's listen queue "
                  "until one closes")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536))
      ->group("Web");
  serve
      .add_option("--web.max-requests", config.web.max_requests,
                  "Scrapes of the telemetry path running at once at most; the next ones get "
                  "503 at once (0: no limit). Each of --web.threads runs one scrape at a time, "
                  "so the limit bites when it is below --web.threads")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536))
      ->group("Web");
  serve
      .add_option("--web.config.file", config.web.config_file,
                  "exporter-toolkit web configuration file: TLS, client certificates, basic "
                  "auth, response headers, rate limit (docs/security.md)")
      ->group("Web");
  serve
      .add_flag("--web.config.check", config.web.config_check,
                "Validate --web.config.file (and the files it names), print the verdict and exit "
                "(0 valid, 1 invalid), as `promtool check web-config` does")
      ->group("Web");
}

void AddCollectorFlags(CLI::App& serve, ServeConfig& config) {
  serve
      .add_option("--path.sysfs", config.sysfs, "sysfs mount point (e.g. /host/sys in a container)")
      ->capture_default_str()
      ->group("Paths");
  serve.add_option("--path.procfs", config.procfs, "procfs mount point")
      ->capture_default_str()
      ->group("Paths");
  serve
      .add_option_function<std::string>(
          "--log.level",
          [&config](const std::string& level) { config.log_level = *log::ParseLevel(level); },
          "Log level: debug, info, warn, error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->default_str("info")
      ->group("Logging");

  serve
      .add_flag("--collector.disable-defaults", config.disable_default_collectors,
                "Disable every collector not enabled explicitly with --collector.NAME")
      ->group("Collectors");
  for (const CollectorEntry& entry : AllCollectors()) {
    const std::string name(entry.name);
    // One flag and its negation: the last one given wins, as in node_exporter.
    serve
        .add_flag_function(
            "--collector." + name + ",!--no-collector." + name,
            [&config, name](std::int64_t on) { config.collector_explicit[name] = on > 0; },
            std::string(entry.help) +
                (entry.enabled_by_default ? " (default on)" : " (default off)"))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->group("Collectors");
  }

  AddDeviceFilters(serve, "ethtool", config.ethtool.device_include, config.ethtool.device_exclude);
  serve
      .add_option("--collector.ethtool.stat-include", config.ethtool.stat_include,
                  "Regex of raw `ethtool -S` stat names to export (whole-name match; default "
                  "all). Normalised counters are computed from all stats regardless.")
      ->group("Collector ethtool");
  serve
      .add_option("--collector.ethtool.stat-exclude", config.ethtool.stat_exclude,
                  "Regex of raw stat names not to export")
      ->group("Collector ethtool");
  serve
      .add_option_function<std::string>(
          "--collector.ethtool.queue-stats",
          [&config](const std::string& mode) {
            config.ethtool.queue_stats = mode == "label" ? QueueStatsMode::kLabel
                                         : mode == "sum" ? QueueStatsMode::kSum
                                                         : QueueStatsMode::kRaw;
          },
          "Per-queue stats: raw (as ethtool -S prints them), label (queue index moved to a "
          "`queue` label), sum (summed over queues)")
      ->check(CLI::IsMember({"raw", "label", "sum"}))
      ->default_str("raw")
      ->group("Collector ethtool");
  serve
      .add_flag("--collector.ethtool.pfc,!--no-collector.ethtool.pfc", config.ethtool.pfc,
                "Query DCB netlink for the PFC configuration (default on)")
      ->group("Collector ethtool");
  serve
      .add_option_function<std::string>(
          "--collector.ethtool.refresh-interval",
          [&config](const std::string& text) {
            config.ethtool.refresh_interval = std::chrono::nanoseconds(*ParseDurationNs(text));
          },
          "How often the ethtool collector reads the settings that change only by hand (driver "
          "and firmware version, interrupt coalescing, private flags, NUMA node); between reads "
          "it serves the last values, so a change shows within this long (Prometheus duration; "
          "0s reads them at every scrape). A new or re-created interface is read at once; stats, "
          "MTU and PFC are read at every scrape")
      ->check([](const std::string& text) {
        return ParseDurationNs(text) ? std::string()
                                     : "not a duration like 90s, 10m or 1h30m: " + text;
      })
      ->default_str("60s")
      ->group("Collector ethtool");
  AddDeviceFilters(serve, "rdma", config.rdma.device_include, config.rdma.device_exclude);
  AddDeviceFilters(serve, "resources", config.resources.device_include,
                   config.resources.device_exclude);
  serve
      .add_option("--collector.resources.max-processes", config.resources.max_processes,
                  "Processes with their own rdma_process_* series, the ones holding the most "
                  "RDMA objects; the rest are summed under pid=\"other\"")
      ->capture_default_str()
      ->check(CLI::Range(0U, 100000U))
      ->group("Collector resources");
  serve
      .add_option("--collector.resources.max-raw-cqs", config.resources.max_raw_cqs,
                  "User CQs whose raw hardware state (true occupancy, mlx5, CAP_NET_ADMIN) is "
                  "queried per scrape, one netlink round trip each; 0 turns it off")
      ->capture_default_str()
      ->check(CLI::Range(0U, 100000U))
      ->group("Collector resources");

  // --probe.* are not --collector.NAME.* options: one set of targets feeds two collectors.
  const std::string probes_group =
      "eBPF probes (shared by collectors mr and verbs, hence not --collector.NAME.*)";
  serve
      .add_flag("--probe.strict", config.probe_strict,
                "Exit at start-up when an enabled eBPF probe set (mr, verbs) cannot attach, "
                "instead of serving without it")
      ->group(probes_group);
  serve
      .add_option("--probe.library", config.mr.libraries,
                  "libibverbs to trace with the mr and verbs probes (repeatable; default: the "
                  "one the loader finds, e.g. /lib/x86_64-linux-gnu/libibverbs.so.1; give "
                  "others for containers)")
      ->check(CLI::ExistingFile)
      ->group(probes_group);
  serve
      .add_option("--probe.binary", config.mr.binaries,
                  "Statically linked program to trace (repeatable)")
      ->check(CLI::ExistingFile)
      ->group(probes_group);
  serve
      .add_option_function<std::string>(
          "--collector.mr.tracking",
          [&config](const std::string& text) { config.mr.tracking = *ParseMrTracking(text); },
          "What feeds the MR metrics: kernel (fentry/fexit on uverbs and ib_core: every "
          "program whatever its libibverbs, no trap; needs ib_core with BTF), uprobes (on "
          "--probe.library/--probe.binary), or auto: kernel when it attaches, else uprobes. "
          "profile's default is uprobes (their call stacks start at the caller of "
          "ibv_reg_mr; the kernel path's stop in libc's ioctl without frame pointers)")
      ->check([](const std::string& text) {
        return ParseMrTracking(text) ? std::string() : "not auto, kernel or uprobes: " + text;
      })
      ->default_str("auto")
      ->group("Collector mr");
  serve
      .add_option("--collector.mr.max-regions", config.mr.max_regions,
                  "Outstanding regions tracked at most (BPF map size); more are counted in "
                  "rdma_mr_lost_total{reason=\"regions\"}")
      ->capture_default_str()
      ->check(CLI::Range(1U, 1U << 26))
      ->group("Collector mr");
  serve
      .add_option_function<std::string>(
          "--collector.mr.leak-age",
          [&config](const std::string& text) { config.mr.leak_age_ns = *ParseDurationNs(text); },
          "Outstanding regions older than this are leak suspects (Prometheus duration: 90s, 10m, "
          "1h30m; 0s disables the scan)")
      ->check([](const std::string& text) {
        return ParseDurationNs(text) ? std::string()
                                     : "not a duration like 90s, 10m or 1h30m: " + text;
      })
      ->default_str("10m")
      ->group("Collector mr");
  serve
      .add_option("--collector.mr.pinned-rescan-seconds", config.mr.pinned_rescan_seconds,
                  "How often to scan every process's open files for /dev/infiniband/uverbs* "
                  "(rdma_process_pinned_bytes); processes the probes saw register are read at "
                  "once")
      ->capture_default_str()
      ->check(CLI::Range(0U, 86400U))
      ->group("Collector mr");
  serve
      .add_flag("--collector.mr.aggregate-by-comm", config.mr.aggregate_by_comm,
                "Per-process MR series by command only (no pid label): bounded cardinality on "
                "hosts with many short-lived RDMA processes")
      ->group("Collector mr");
  serve
      .add_option("--collector.mr.max-processes", config.mr.max_processes,
                  "Processes tracked at most (BPF map size)")
      ->capture_default_str()
      ->check(CLI::Range(1U, 1U << 22))
      ->group("Collector mr");
  serve
      .add_option("--collector.mr.stack-bytes", config.mr.stack_bytes,
                  "Bytes of user stack copied at each registration for DWARF unwinding of its "
                  "call site (as perf --call-graph dwarf; 0: frame pointers only)")
      ->capture_default_str()
      ->check(CLI::Range(0U, 16384U))
      ->group("Collector mr");
  serve
      .add_flag("--collector.mr.unwind-sandbox,!--no-collector.mr.unwind-sandbox",
                config.mr.unwind_sandbox,
                "Unwind and symbolize registration stacks in a sandboxed worker process (no "
                "capabilities, namespaces of its own, seccomp; docs/security.md) rather than in "
                "the exporter (default on)")
      ->group("Collector mr");
  serve
      .add_option("--collector.mr.stack-memory-bytes", config.mr.stack_memory_bytes,
                  "Memory for stack copies waiting to be unwound and for unwound call sites; "
                  "stacks past it are counted in rdmascope_mr_stacks_dropped_total")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1} << 20, uint64_t{1} << 34))
      ->group("Collector mr");
  serve
      .add_option("--collector.verbs.max-queues", config.verbs.probe.max_queues,
                  "CQs and QPs tracked at most, each (BPF map sizes; SRQs: a quarter); more are "
                  "counted in rdma_verbs_lost_total{reason=\"objects\"}")
      ->capture_default_str()
      ->check(CLI::Range(1U, 1U << 22))
      ->group("Collector verbs");
  serve
      .add_option("--collector.verbs.max-processes", config.verbs.probe.max_processes,
                  "Processes tracked at most (BPF map size)")
      ->capture_default_str()
      ->check(CLI::Range(1U, 1U << 22))
      ->group("Collector verbs");
  serve
      .add_option("--collector.verbs.max-queue-series", config.verbs.max_queue_series,
                  "Per-queue series exported at most: CQs first, the worst-sized first, then "
                  "SRQs; the rest are counted in rdmascope_verbs_queues_omitted")
      ->capture_default_str()
      ->check(CLI::Range(0U, 1000000U))
      ->group("Collector verbs");
  serve
      .add_option("--collector.occupancy.dir", config.occupancy.dir,
                  "Directory of the preload library's stats files (its RDMASCOPE_PRELOAD_DIR)")
      ->capture_default_str()
      ->group("Collector occupancy");
  serve
      .add_option("--collector.occupancy.max-processes", config.occupancy.max_processes,
                  "Stats files read per collection at most; the rest are skipped and counted in "
                  "rdmascope_occupancy_files_skipped_total")
      ->capture_default_str()
      ->check(CLI::Range(1U, 100000U))
      ->group("Collector occupancy");
  serve
      .add_option("--collector.occupancy.max-processes-per-uid",
                  config.occupancy.max_processes_per_uid,
                  "Stats files read per collection at most per file owner (a user's flood of "
                  "files cannot push other users' processes out)")
      ->capture_default_str()
      ->check(CLI::Range(1U, 100000U))
      ->group("Collector occupancy");
  serve
      .add_option_function<std::string>(
          "--collector.host.refresh-interval",
          [&config](const std::string& text) {
            config.host.refresh_interval = std::chrono::nanoseconds(*ParseDurationNs(text));
          },
          "How often the host collector reads the settings that change only by hand (kernel "
          "modules, sysctls, THP, governors, RoCE ToS, ECN enables, IRQ affinity, XPS); between "
          "reads it serves the last values, so a change or a new interface shows within this "
          "long (Prometheus duration; 0s reads them at every scrape). The PCIe functions are "
          "found on this interval too; huge page counts and PCIe link speed and width are read at "
          "every scrape")
      ->check([](const std::string& text) {
        return ParseDurationNs(text) ? std::string()
                                     : "not a duration like 90s, 10m or 1h30m: " + text;
      })
      ->default_str("60s")
      ->group("Collector host");
  serve
      .add_option_function<std::string>(
          "--collector.link.refresh-interval",
          [&config](const std::string& text) {
            config.link.refresh_interval = std::chrono::nanoseconds(*ParseDurationNs(text));
          },
          "How often the link collector reads each module's temperature, supply, per-lane bias "
          "and power and CMIS state, in the background and staggered across modules (a scrape "
          "serves the last reading; Prometheus duration, at least 1s; 0s reads every module at "
          "every scrape)")
      ->check([](const std::string& text) {
        const auto ns = ParseDurationNs(text);
        if (!ns) return "not a duration like 30s, 1m or 1h30m: " + text;
        return *ns == 0 || *ns >= 1000000000 ? std::string() : "below 1s: " + text;
      })
      ->default_str("30s")
      ->group("Collector link");
  serve
      .add_option_function<std::string>(
          "--collector.link.static-refresh-interval",
          [&config](const std::string& text) {
            config.link.static_refresh_interval = std::chrono::nanoseconds(*ParseDurationNs(text));
          },
          "How often the link collector reads each module's identity and thresholds again (a "
          "new module is read whole at once)")
      ->check([](const std::string& text) {
        return ParseDurationNs(text) ? std::string() : "not a duration like 30m or 1h: " + text;
      })
      ->default_str("1h")
      ->group("Collector link");
  serve
      .add_option("--collector.link.max-netdevs", config.link.max_netdevs,
                  "Interfaces whose modules the link collector reads at most (RDMA ports' first, "
                  "then other physical interfaces by name)")
      ->capture_default_str()
      ->check(CLI::Range(0U, 4096U))
      ->group("Collector link");
  serve
      .add_option(
          "--collector.workload.cri-endpoint", config.workload.cri_endpoint,
          "The container runtime's CRI socket, asked for the pod, namespace and container "
          "names of containers (gRPC target, e.g. unix:///run/containerd/containerd.sock); "
          "auto: the first of containerd's, CRI-O's and cri-dockerd's default sockets that "
          "exists at start; none: cgroups only. Whoever can connect to that socket controls "
          "every container of the node (docs/security.md)")
      ->capture_default_str()
      ->group("Collector workload");
  serve
      .add_option(
          "--collector.workload.kubelet-socket", config.workload_kubelet.socket,
          "The kubelet's PodResources socket, asked which pod and container each device "
          "plugin device (SR-IOV VF, sub-function) was handed to, for "
          "rdma_device_workload_info (a path, or a gRPC target); auto: "
          "/var/lib/kubelet/pod-resources/kubelet.sock if it exists at start; none: no device "
          "series. It lists every pod's devices and CPUs, read only (docs/security.md)")
      ->capture_default_str()
      ->group("Collector workload");
  for (const auto& [flag, field, help, fallback] :
       {std::tuple{"--collector.workload.cri-timeout", &config.workload.cri_timeout,
                   "How long a call to the container runtime may take; scrapes never wait for "
                   "it (they use the last answer)",
                   "2s"},
        std::tuple{"--collector.workload.cri-refresh-interval",
                   &config.workload.cri_refresh_interval,
                   "How often the container runtime is asked for the running containers; sooner "
                   "(at most every 5s) when a process runs in a container it has not named",
                   "30s"},
        std::tuple{"--collector.workload.recheck-interval", &config.workload.recheck_interval,
                   "How long a process's cgroup reading is kept before it is read again (a "
                   "process moved to another cgroup shows its new workload within this time; "
                   "one that exits, or whose pid is reused, at the next scrape; spread by pid "
                   "between 3/4 of it and all of it)",
                   "60s"},
        std::tuple{"--collector.workload.kubelet-timeout", &config.workload_kubelet.timeout,
                   "How long a call to the kubelet's PodResources API may take; scrapes never "
                   "wait for it (they use the last answer)",
                   "2s"},
        std::tuple{"--collector.workload.kubelet-refresh-interval",
                   &config.workload_kubelet.refresh_interval,
                   "How often the kubelet is asked for the devices of pods (a device handed to a "
                   "pod shows within this long)",
                   "30s"}}) {
    serve
        .add_option_function<std::string>(
            flag,
            [target = field](const std::string& text) {
              *target = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::nanoseconds(*ParseDurationNs(text)));
            },
            help)
        ->check([](const std::string& text) {
          const auto ns = ParseDurationNs(text);
          return ns && *ns >= 1000000 ? std::string()
                                      : "not a duration of at least 1ms like 2s or 1m: " + text;
        })
        ->default_str(fallback)
        ->group("Collector workload");
  }
  serve
      .add_option("--collector.perf.event", config.perf.events,
                  "Perf event to count, repeatable: a libpfm4 name (cycles, LLC-load-misses, "
                  "INST_RETIRED:ANY_P), a sysfs PMU event (uncore_imc_0/cas_count_read/, "
                  "cpu/event=0xc0,umask=0x00/), or a group counted together: "
                  "{cycles,instructions}. Default: cycles and instructions (grouped), "
                  "stalled-cycles-frontend, LLC-loads, LLC-load-misses, and the read and write "
                  "CAS counts of every memory-controller PMU")
      ->group("Collector perf");
  serve
      .add_flag("--collector.perf.per-cpu", config.perf.per_cpu,
                "Series per CPU (label cpu) instead of summed per NUMA node")
      ->group("Collector perf");

  for (const RenamedFlag& renamed : kRenamedFlags) AddDeprecatedAlias(serve, renamed);
}

std::span<const RenamedFlag> RenamedFlags() { return kRenamedFlags; }

void FinishServeConfig(ServeConfig& config) {
  for (const CollectorEntry& entry : AllCollectors()) {
    const std::string name(entry.name);
    const auto explicit_choice = config.collector_explicit.find(name);
    config.collector_enabled[name] =
        explicit_choice != config.collector_explicit.end()
            ? explicit_choice->second
            : entry.enabled_by_default && !config.disable_default_collectors;
  }
  CheckRegex("--collector.ethtool.device-include", config.ethtool.device_include);
  CheckRegex("--collector.ethtool.device-exclude", config.ethtool.device_exclude);
  CheckRegex("--collector.ethtool.stat-include", config.ethtool.stat_include);
  CheckRegex("--collector.ethtool.stat-exclude", config.ethtool.stat_exclude);
  CheckRegex("--collector.rdma.device-include", config.rdma.device_include);
  CheckRegex("--collector.rdma.device-exclude", config.rdma.device_exclude);
  CheckRegex("--collector.resources.device-include", config.resources.device_include);
  CheckRegex("--collector.resources.device-exclude", config.resources.device_exclude);
  if (const auto groups = sys::ParseEventGroups(config.perf.events); !groups) {
    throw CLI::ValidationError("--collector.perf.event", groups.error());
  }
  if (const auto address = ParseListenAddress(config.web.listen_address); !address) {
    throw CLI::ValidationError("--web.listen-address", address.error());
  }
  if (!config.web.config_file.empty()) {
    auto web_config = web::LoadWebConfig(config.web.config_file);
    if (!web_config) throw CLI::ValidationError("--web.config.file", web_config.error());
    config.web.security = std::make_shared<const web::WebConfig>(std::move(*web_config));
  } else if (config.web.config_check) {
    throw CLI::ValidationError("--web.config.check", "needs --web.config.file");
  }
  for (const auto& [flag, path] :
       {std::pair{"--path.sysfs", config.sysfs}, std::pair{"--path.procfs", config.procfs}}) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      throw CLI::ValidationError(flag, "not a directory: " + path.string());
    }
  }
}

}  // namespace rdmascope
