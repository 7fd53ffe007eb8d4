// roce.default_tos, roce.ecn, host.kernel_modules: see checks_roce_config.h and docs/doctor.md.
#include "doctor/checks_roce_config.h"

#include "doctor/check_util.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {
namespace {

std::vector<const Sample*> RocePorts(const Snapshot& now) {
  return now.Find("rdma_port_info", {{"link_layer", "Ethernet"}});
}

// The priority a DSCP lands on under the default DSCP-to-priority map of a NIC trusting DSCP:
// eight DSCPs per priority (mlnx_qos prints "prio:3 dscp:31,30,...,24" before any change).
int DefaultPriority(int dscp) { return dscp >> 3; }

}  // namespace

std::vector<Finding> CheckDefaultTos(const Snapshot& now, const Snapshot*,
                                     const DoctorOptions& options) {
  const std::string id = "roce.default_tos";
  const std::string area = "roce";
  const std::string runbook = "roce-default-tos";
  // The ToS that puts traffic on the RoCE priority: DSCP priority x 8 + 2 (26 for priority 3,
  // the DSCP of NVIDIA's lossless RoCE guide) with ECN-capable transport (ECT(0)): 106.
  const int dscp = options.roce_priority * 8 + 2;
  const int wanted_tos = (dscp << 2) | 2;
  const auto configfs = now.Value("rdma_host_rdma_cm_configfs");
  std::vector<Finding> findings;
  for (const Sample* port : RocePorts(now)) {
    Scope scope = PortScope(*port);
    const std::string device = port->Label("device");
    const std::string dir = "/sys/kernel/config/rdma_cm/" + device;
    if (!configfs) {
      findings.push_back(Skip(id, area, std::move(scope), runbook,
                              "no rdma_host_rdma_cm_configfs series: the host collector did not "
                              "look at rdma_cm's configfs"));
      continue;
    }
    if (*configfs == 0) {
      findings.push_back(
          Skip(id, area, std::move(scope), runbook,
               "no /sys/kernel/config/rdma_cm: configfs is not mounted (mount -t configfs none "
               "/sys/kernel/config) or rdma_cm is not loaded; unset, rdma_cm connects with ToS 0"));
      continue;
    }
    const auto tos = now.Value("rdma_port_default_roce_tos",
                               {{"device", device}, {"port", port->Label("port")}});
    if (!tos) {
      findings.push_back(Skip(id, area, std::move(scope), runbook,
                              "no " + dir +
                                  " directory: mkdir it to read and set the default "
                                  "ToS; until then rdma_cm connects with ToS 0 unless the "
                                  "application sets one (rdma_set_option RDMA_OPTION_ID_TOS)"));
      continue;
    }
    const int value = static_cast<int>(*tos);
    const int priority = DefaultPriority(value >> 2);
    const bool off = priority != options.roce_priority;
    Finding finding =
        Make(id, area, off ? Severity::kWarn : Severity::kOk, std::move(scope), runbook);
    finding.observed = "default RoCE ToS " + Num(value) + " (DSCP " + Num(value >> 2) +
                       ", priority " + Num(priority) + " under the default DSCP map)";
    finding.expected = "a DSCP on priority " + Num(options.roce_priority) + ", e.g. ToS " +
                       Num(wanted_tos) + " (DSCP " + Num(dscp) + ", ECT(0))";
    if (off) {
      finding.advice = "rdma_cm connections that set no ToS are sent with DSCP " + Num(value >> 2) +
                       ", priority " + Num(priority) +
                       " on a NIC trusting DSCP, not the RoCE priority " +
                       Num(options.roce_priority) + " where PFC and ECN are set up: set ToS " +
                       Num(wanted_tos) + " (DSCP " + Num(dscp) + ")";
      finding.fix = FixLine({"echo ", Num(wanted_tos), " > ",
                             HostValue(dir + "/ports/" + port->Label("port") + "/default_roce_tos")});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckEcn(const Snapshot& now, const Snapshot*, const DoctorOptions& options) {
  const std::string id = "roce.ecn";
  const std::string area = "roce";
  const std::string runbook = "rdmacongestionnotifications";
  const std::string priority = std::to_string(options.roce_priority);
  std::vector<Finding> findings;
  for (const Sample* port : RocePorts(now)) {
    const std::string netdev = port->Label("netdev");
    if (netdev.empty()) continue;
    Scope scope = PortScope(*port);
    scope.emplace_back("netdev", netdev);
    const auto np = now.Value("rdma_netdev_ecn_enabled",
                              {{"device", netdev}, {"point", "np"}, {"priority", priority}});
    const auto rp = now.Value("rdma_netdev_ecn_enabled",
                              {{"device", netdev}, {"point", "rp"}, {"priority", priority}});
    if (!np && !rp) {
      findings.push_back(Skip(id, area, std::move(scope), runbook,
                              "no /sys/class/net/" + netdev + "/ecn/roce_np|roce_rp/enable/" +
                                  priority +
                                  ": the driver exposes no ECN settings (the mlx5 ECN sysfs comes "
                                  "with MLNX_OFED's driver); CNP counters still show ECN at work"));
      continue;
    }
    std::string missing;
    if (np && *np == 0) missing = "roce_np";
    if (rp && *rp == 0) missing += missing.empty() ? "roce_rp" : " and roce_rp";
    Finding finding = Make(id, area, missing.empty() ? Severity::kOk : Severity::kWarn,
                           std::move(scope), runbook);
    finding.observed = "ECN on priority " + priority + ": notification point " +
                       (np ? (*np != 0 ? "on" : "off") : "unknown") + ", reaction point " +
                       (rp ? (*rp != 0 ? "on" : "off") : "unknown");
    finding.expected = "both on for the RoCE priority";
    if (!missing.empty()) {
      finding.advice = missing + " off on priority " + priority + ": " +
                       (np && *np == 0 ? "marked packets get no CNP back" : "CNPs are ignored") +
                       ", so senders do not slow down and congestion turns into PFC pauses and "
                       "drops; enable ECN on priority " +
                       priority;
      std::string fix;
      for (const char* point : {"roce_np", "roce_rp"}) {
        if (missing.find(point) == std::string::npos) continue;
        const std::string one = FixLine(
            {"echo 1 > ",
             HostValue("/sys/class/net/" + netdev + "/ecn/" + point + "/enable/" + priority)});
        if (one.empty()) {  // a netdev name that cannot be quoted: no fix at all
          fix.clear();
          break;
        }
        fix += (fix.empty() ? "" : " && ") + one;
      }
      finding.fix = fix;
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckKernelModules(const Snapshot& now, const Snapshot*,
                                        const DoctorOptions&) {
  const std::string id = "host.kernel_modules";
  const std::string area = "host";
  const std::string runbook = "host-tuning";
  std::vector<Finding> findings;
  for (const Sample* module : now.Find("rdma_host_kernel_module_loaded")) {
    const std::string name = module->Label("module");
    const std::string needed_by = module->Label("needed_by");
    const bool missing = module->value == 0;
    Finding finding = Make(id, area, missing ? Severity::kWarn : Severity::kOk,
                           {{"module", name}, {"needed_by", needed_by}}, runbook);
    finding.observed = name + (missing ? " not loaded" : " loaded");
    finding.expected = "loaded";
    if (missing) {
      if (needed_by != "rdma") {
        finding.advice = "NICs driven by " + needed_by + " have no RDMA device without " + name +
                         ": load it (and add it to /etc/modules-load.d)";
      } else if (name == "rdma_ucm") {
        finding.advice =
            "applications that connect through rdma_cm (librdmacm: NCCL, UCX, "
            "NVMe-oF, iSER) cannot open /dev/infiniband/rdma_cm: load rdma_ucm";
      } else {
        finding.advice = "no process can use verbs without " + name + ": load it";
      }
      finding.fix = FixLine({"modprobe ", HostValue(name)});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
