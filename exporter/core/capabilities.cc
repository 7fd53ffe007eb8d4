#include "core/capabilities.h"

#include <sys/capability.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

namespace rdmascope::caps {
namespace {

// The sources of each entry (kernel functions) are in docs/security.md, "Capabilities".
// Start-up: uprobes need CAP_SYS_ADMIN since "perf: Require CAP_SYS_ADMIN for uprobes"
// (kernel/events/core.c perf_uprobe_event_init, 2025, backported to stable kernels; before
// it CAP_PERFMON); loading the programs needs CAP_BPF and, for kprobe-type programs,
// CAP_PERFMON (kernel/bpf/syscall.c bpf_prog_load).
const CollectorNeeds kNeeds[] = {
    // SIOCETHTOOL GDRVINFO/GSSET_INFO/GSTRINGS/GSTATS/GCOALESCE/GPFLAGS and RTM_GETDCB are
    // open to anyone (net/ethtool/ioctl.c __dev_ethtool, net/dcb/dcbnl.c dcb_doit).
    {"ethtool", {}, {}},
    // sysfs files are 0444; ibv_open_device opens /dev/infiniband/uverbs*, 0666 by udev.
    {"rdma", {}, {}},
    // Resource dumps are open (nldev.c res_get_common_dumpit); the raw CQ dump
    // (RDMA_NLDEV_CMD_RES_CQ_GET_RAW) is RDMA_NL_ADMIN_PERM, checked at each scrape against
    // the calling thread (netlink.c rdma_nl_rcv_msg, netlink_capable).
    {"resources", {}, {CAP_NET_ADMIN}},
    // Serving: /proc/PID/fd (the uverbs scan for VmPin) is 0500, owned by the process's user
    // (listing it: CAP_DAC_READ_SEARCH), and each link, like /proc/PID/maps (symbolising
    // /debug/mr/stacks), needs PTRACE_MODE_READ (fs/proc/base.c proc_fd_access_allowed).
    {"mr", {CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON}, {CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH}},
    // Serving reads BPF maps through descriptors opened at start-up and /proc/PID/stat (0444).
    {"verbs", {CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON}, {}},
    // CPU-wide events need CAP_PERFMON (kernel/events/core.c perf_event_open,
    // perf_allow_cpu); they are opened again on a CPU that comes online, so it is kept.
    {"perf", {CAP_PERFMON}, {CAP_PERFMON}},
    // Stats files are 0644; /proc/PID/ns/pid of other users' processes (pid namespace
    // translation) needs PTRACE_MODE_READ (fs/proc/namespaces.c proc_ns_get_link).
    {"occupancy", {}, {CAP_SYS_PTRACE}},
    // sysfs and procfs settings readable by anyone.
    {"host", {}, {}},
    // ETHTOOL_MSG_MODULE_EEPROM_GET is GENL_UNS_ADMIN_PERM (net/ethtool/netlink.c
    // ethtool_genl_ops), checked at each request: the refresher thread reads modules while
    // serving.
    {"link", {}, {CAP_NET_ADMIN}},
    // /proc/PID/cgroup is 0444 with no ptrace check (fs/proc/base.c, ONE("cgroup", S_IRUGO,
    // proc_cgroup_show)); only a hidepid= mount of /proc hides other users' processes.
    {"workload", {}, {}},
};

struct CapFree {
  void operator()(void* p) const { cap_free(p); }
};
using CapHandle = std::unique_ptr<std::remove_pointer_t<cap_t>, CapFree>;

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The kernel's count for this process; tasks under /proc/self/task would race thread exits.
std::expected<int, std::string> ThreadCount() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return std::unexpected("cannot read the thread count from /proc/self/status");
}

bool Has(cap_t caps, Capability cap, cap_flag_t flag) {
  cap_flag_value_t value = CAP_CLEAR;
  return cap_get_flag(caps, cap, flag, &value) == 0 && value == CAP_SET;
}

}  // namespace

std::span<const CollectorNeeds> Needs() { return kNeeds; }

CapabilitySet ServingNeeds(const std::map<std::string, bool>& enabled) {
  CapabilitySet needs;
  for (const CollectorNeeds& entry : kNeeds) {
    const auto found = enabled.find(std::string(entry.collector));
    if (found != enabled.end() && found->second)
      needs.insert(entry.serve.begin(), entry.serve.end());
  }
  return needs;
}

std::expected<CapabilitySet, std::string> ParseKeepList(std::string_view text) {
  CapabilitySet set;
  if (text == "none") return set;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    std::string name(text.substr(begin, comma - begin));
    begin = comma + 1;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (name.empty()) return std::unexpected("empty capability name (use \"none\" to keep none)");
    if (name.rfind("cap_", 0) != 0) name = "cap_" + name;
    cap_value_t value = 0;
    // cap_from_name also takes numbers and "all": only names are meant here.
    if (name == "cap_all" || !std::isalpha(static_cast<unsigned char>(name[4])) ||
        cap_from_name(name.c_str(), &value) != 0) {
      return std::unexpected("unknown capability \"" + name + "\"");
    }
    if (value == CAP_SYS_ADMIN || value == CAP_BPF) {
      return std::unexpected(name + " is never kept while serving: no scrape needs it");
    }
    set.insert(value);
  }
  return set;
}

std::string Names(const CapabilitySet& set) {
  if (set.empty()) return "none";
  std::string names;
  for (const Capability cap : set) {
    std::unique_ptr<char, CapFree> name(cap_to_name(cap));
    // Appended piecewise: `"," + std::string(...)` trips GCC 12's -Wrestrict false positive at
    // -O3 (GCC bug 105329), which fails a Release build with RDMASCOPE_WERROR.
    if (!names.empty()) names += ',';
    names += name ? std::string(name.get()) : std::to_string(cap);
  }
  return names;
}

std::expected<DropReport, std::string> DropTo(const CapabilitySet& keep) {
  const auto threads = ThreadCount();
  if (!threads) return std::unexpected(threads.error());
  if (*threads != 1) {
    return std::unexpected("capabilities are per thread and " + std::to_string(*threads) +
                           " threads run: they must be dropped before any thread starts");
  }
  const CapHandle current(cap_get_proc());
  if (!current) return std::unexpected(Errno("cap_get_proc"));
  DropReport report;
  for (const Capability cap : keep) {
    (Has(current.get(), cap, CAP_PERMITTED) ? report.kept : report.not_permitted).insert(cap);
  }
  // The bounding set first: shrinking it needs CAP_SETPCAP, which the next step drops.
  if (Has(current.get(), CAP_SETPCAP, CAP_EFFECTIVE)) {
    for (Capability cap = 0; cap < static_cast<Capability>(cap_max_bits()); ++cap) {
      if (report.kept.contains(cap)) continue;
      if (cap_drop_bound(cap) != 0) return std::unexpected(Errno("cap_drop_bound"));
    }
    report.bounding_set_cleared = true;
  }
  // Ambient capabilities (how a non-root user is given them) would pass to any child.
  if (cap_reset_ambient() != 0) return std::unexpected(Errno("clearing ambient capabilities"));
  const CapHandle next(cap_init());  // every flag clear: inheritable stays empty
  if (!next) return std::unexpected(Errno("cap_init"));
  const std::vector<cap_value_t> values(report.kept.begin(), report.kept.end());
  if (!values.empty() && (cap_set_flag(next.get(), CAP_PERMITTED, static_cast<int>(values.size()),
                                       values.data(), CAP_SET) != 0 ||
                          cap_set_flag(next.get(), CAP_EFFECTIVE, static_cast<int>(values.size()),
                                       values.data(), CAP_SET) != 0)) {
    return std::unexpected(Errno("cap_set_flag"));
  }
  if (cap_set_proc(next.get()) != 0) return std::unexpected(Errno("cap_set_proc"));
  // A set-uid or file-capability program executed later gains nothing either.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::unexpected(Errno("no_new_privs"));
  const CapHandle after(cap_get_proc());
  if (!after || cap_compare(after.get(), next.get()) != 0) {
    return std::unexpected("the capability sets read back differ from the ones set");
  }
  return report;
}

}  // namespace rdmascope::caps
