// caps::: the capability table, --capabilities.keep parsing, and the drop itself (in a forked
// child, so the test process keeps its own capabilities).
#include "core/capabilities.h"

#include <gtest/gtest.h>
#include <sys/capability.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "cli/serve_flags.h"
#include "collectors/registry.h"

namespace rdmascope::caps {
namespace {

std::map<std::string, bool> AllEnabled() {
  std::map<std::string, bool> enabled;
  for (const CollectorEntry& entry : AllCollectors()) enabled[std::string(entry.name)] = true;
  return enabled;
}

TEST(Capabilities, EveryCollectorHasAnEntry) {
  std::set<std::string> table;
  for (const CollectorNeeds& needs : Needs()) table.insert(std::string(needs.collector));
  std::set<std::string> registry;
  for (const CollectorEntry& entry : AllCollectors()) registry.insert(std::string(entry.name));
  EXPECT_EQ(table, registry);
}

// The default serving set of docs/security.md ("Final list"), every collector on.
TEST(Capabilities, ServingNeedsOfEveryCollector) {
  EXPECT_EQ(ServingNeeds(AllEnabled()),
            (CapabilitySet{CAP_NET_ADMIN, CAP_PERFMON, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH}));
  // The socket is bound before the drop: a privileged port needs it at start-up only.
  EXPECT_FALSE(ServingNeeds(AllEnabled()).contains(CAP_NET_BIND_SERVICE));
  EXPECT_EQ(ServingNeeds({{"ethtool", true}, {"host", true}, {"perf", false}}), CapabilitySet{});
  EXPECT_EQ(ServingNeeds({{"perf", true}}), CapabilitySet{CAP_PERFMON});
}

TEST(Capabilities, NeverServesWithSysAdminOrBpf) {
  for (const CollectorNeeds& needs : Needs()) {
    EXPECT_FALSE(needs.serve.contains(CAP_SYS_ADMIN)) << needs.collector;
    EXPECT_FALSE(needs.serve.contains(CAP_BPF)) << needs.collector;
  }
}

TEST(Capabilities, ParseKeepList) {
  EXPECT_EQ(*ParseKeepList("cap_net_admin,PERFMON"), (CapabilitySet{CAP_NET_ADMIN, CAP_PERFMON}));
  EXPECT_EQ(*ParseKeepList("none"), CapabilitySet{});
  EXPECT_EQ(Names(*ParseKeepList("perfmon,net_admin")), "cap_net_admin,cap_perfmon");
  EXPECT_EQ(Names({}), "none");
  for (const char* bad : {"", "cap_net_admin,", "cap_nonsense", "all", "12", "cap_net_admin,,x"}) {
    EXPECT_FALSE(ParseKeepList(bad).has_value()) << bad;
  }
  for (const char* never : {"cap_sys_admin", "SYS_ADMIN", "bpf", "net_admin,cap_bpf"}) {
    const auto parsed = ParseKeepList(never);
    ASSERT_FALSE(parsed.has_value()) << never;
    EXPECT_NE(parsed.error().find("never kept"), std::string::npos) << parsed.error();
  }
}

TEST(Capabilities, KeepFlag) {
  CLI::App app;
  ServeConfig config;
  AddServeFlags(app, config);
  app.parse(std::vector<std::string>{"--capabilities.keep=cap_perfmon"});
  EXPECT_EQ(config.capabilities_keep, CapabilitySet{CAP_PERFMON});
  CLI::App refusing;
  ServeConfig other;
  AddServeFlags(refusing, other);
  EXPECT_THROW(refusing.parse(std::vector<std::string>{"--capabilities.keep=cap_sys_admin"}),
               CLI::ValidationError);
  EXPECT_FALSE(other.capabilities_keep.has_value());
}

// "CapEff:\t0000000000001000" -> 0x1000, from this process's status file.
std::map<std::string, uint64_t> StatusFields() {
  std::map<std::string, uint64_t> fields;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    if (key.rfind("Cap", 0) == 0) fields[key] = std::stoull(line.substr(colon + 1), nullptr, 16);
    if (key == "NoNewPrivs") fields[key] = std::stoull(line.substr(colon + 1));
  }
  return fields;
}

// Runs `body` in a forked child; its return value is the child's exit code (0: pass).
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(Capabilities, DropKeepsOnlyTheKeptSetForGood) {
  const bool root = geteuid() == 0;
  const int code = InChild([root] {
    const auto report = DropTo({CAP_NET_ADMIN});
    if (!report) return 1;
    auto fields = StatusFields();
    const uint64_t kept = root ? uint64_t{1} << CAP_NET_ADMIN : 0;
    if (fields["CapEff"] != kept || fields["CapPrm"] != kept) return 2;
    if (fields["CapInh"] != 0 || fields["CapAmb"] != 0) return 3;
    if (fields["NoNewPrivs"] != 1) return 4;
    if (root && (fields["CapBnd"] != kept || !report->bounding_set_cleared)) return 5;
    if (!root && !report->not_permitted.contains(CAP_NET_ADMIN)) return 6;
    // Nothing comes back: raising a dropped capability fails.
    cap_t caps = cap_get_proc();
    const cap_value_t admin = CAP_SYS_ADMIN;
    cap_set_flag(caps, CAP_EFFECTIVE, 1, &admin, CAP_SET);
    const bool raised = cap_set_proc(caps) == 0;
    cap_free(caps);
    return raised ? 7 : 0;
  });
  EXPECT_EQ(code, 0);
}

TEST(Capabilities, DropNoneLeavesNothing) {
  const int code = InChild([] {
    if (!DropTo({})) return 1;
    auto fields = StatusFields();
    return fields["CapEff"] == 0 && fields["CapPrm"] == 0 && fields["CapAmb"] == 0 ? 0 : 2;
  });
  EXPECT_EQ(code, 0);
}

// A thread started before the drop would keep every capability: refused.
TEST(Capabilities, DropRefusesWhenAnotherThreadRuns) {
  const int code = InChild([] {
    const uint64_t before = StatusFields()["CapEff"];
    std::mutex mutex;
    std::condition_variable done;
    bool stop = false;
    std::thread other([&] {
      std::unique_lock lock(mutex);
      done.wait(lock, [&] { return stop; });
    });
    const auto report = DropTo({});
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    done.notify_all();
    other.join();
    if (report) return 1;
    if (report.error().find("2 threads") == std::string::npos) return 2;
    return StatusFields()["CapEff"] == before ? 0 : 3;
  });
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace rdmascope::caps
