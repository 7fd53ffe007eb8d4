// Output safe to paste (issue 37 item 5): doctor's fix lines quote every host value or are
// dropped, and text for a terminal carries no control character raw. Each quoted word is run
// through a real /bin/sh to prove it comes back as the one literal word it was.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/html.h"
#include "core/terminal_text.h"
#include "doctor/checks.h"
#include "doctor/report.h"
#include "doctor/shell_quote.h"
#include "sys/local_exporter.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

// What `sh -c 'printf %s WORD'` prints: the word after the shell parsed it (and ran nothing:
// a command substitution would print, or touch, something else).
std::string ThroughShell(const std::string& word) {
  const std::string script = "printf %s " + word;
  // The script is itself passed single-quoted to popen's sh: quote it with the same rule.
  const std::string command = "sh -c " + *ShellQuote(script) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "<popen failed>";
  std::string out;
  char buffer[256];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  pclose(pipe);
  return out;
}

TEST(ShellQuote, PlainWordsStayAsTheyAre) {
  EXPECT_EQ(ShellQuote("eth0"), "eth0");
  EXPECT_EQ(ShellQuote("mlx5_0"), "mlx5_0");
  EXPECT_EQ(ShellQuote("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(ShellQuote("/sys/class/net/eth0/ecn/roce_np/enable/3"),
            "/sys/class/net/eth0/ecn/roce_np/enable/3");
}

TEST(ShellQuote, HostileWordsAreOneLiteralWord) {
  for (const std::string hostile :
       {"$(reboot)", "`reboot`", "a b", "it's", "'", "''", "\"x\"", "a;rm -rf /", "a|b", "a&b",
        "$HOME", "*", "~root", "a\\b", "!1", "{a,b}", "x>y", "#c"}) {
    const auto quoted = ShellQuote(hostile);
    ASSERT_TRUE(quoted) << hostile;
    EXPECT_NE(*quoted, hostile) << "left unquoted: " << hostile;
    EXPECT_EQ(ThroughShell(*quoted), hostile) << *quoted;
  }
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

TEST(ShellQuote, RefusesWhatCannotBePastedSafely) {
  for (const std::string& bad :
       {std::string(), std::string("a\nreboot"), std::string("\x1b[2J"), std::string("a\tb"),
        std::string("a\x7f"),
        std::string("a\xc2\x9b"
                    "31m"),
        std::string("\xff\xfe"), std::string("-rf"), std::string("a\0b", 3)}) {
    EXPECT_FALSE(ShellQuote(bad)) << bad;
  }
}

TEST(FixLine, QuotesHostValuesOnlyAndDropsTheLineOnABadOne) {
  const std::string comm = "$(touch /tmp/pwned)";
  EXPECT_EQ(FixLine({"numactl --cpunodebind=1 --membind=1 -- ", HostValue(comm)}),
            "numactl --cpunodebind=1 --membind=1 -- '$(touch /tmp/pwned)'");
  EXPECT_EQ(FixLine({"ip link set dev ", HostValue("eth0"), " up"}), "ip link set dev eth0 up");
  EXPECT_EQ(FixLine({"ip link set dev ", HostValue("e\x1b]0;x\x07"), " up"}), "");
  EXPECT_EQ(QuotedWords("26:3 48:6"), "26:3 48:6");
  EXPECT_EQ(QuotedWords("26:3 $(x)"), "26:3 '$(x)'");
  EXPECT_EQ(QuotedWords("26:3 a\nb"), "");
}

TEST(TerminalText, EscapesC0DelAndC1) {
  EXPECT_EQ(EscapeControls("plain ≥ text"), "plain ≥ text");
  EXPECT_EQ(EscapeControls("a\x1b[31mred"), "a\\x1b[31mred");
  EXPECT_EQ(EscapeControls("line\nnext\t\r"), "line\\x0anext\\x09\\x0d");
  EXPECT_EQ(EscapeControls("del\x7f"), "del\\x7f");
  EXPECT_EQ(EscapeControls("csi\xc2\x9b"
                           "2J"),
            "csi\\u009b2J");
  EXPECT_EQ(EscapeControls("lone\x9b"), "lone\xef\xbf\xbd");  // invalid UTF-8: U+FFFD
  EXPECT_FALSE(HasControlCharacters(EscapeControls("\x1b\x7f\xc2\x85\n")));
}

TEST(TerminalText, JsonKeepsItsMeaningWithoutRawControls) {
  EXPECT_EQ(EscapeJsonControls("{\"a\": \"x\x7fy\xc2\x9bz ≥\"}"),
            "{\"a\": \"x\\u007fy\\u009bz ≥\"}");
  EXPECT_EQ(EscapeJsonControls("{\"a\": 1}"), "{\"a\": 1}");
}

TEST(TerminalText, HtmlEscapeWritesControlsAsText) {
  EXPECT_EQ(HtmlEscape("<b>\x1b[1m</b>\t\n"), "&lt;b&gt;\\x1b[1m&lt;/b&gt;\t\n");
  EXPECT_EQ(HtmlEscape("x\xc2\x9by\xc2\xa0"), "x\\u009by\xc2\xa0");  // U+00A0 is not C1
}

// host.numa_placement's fix names the process by its comm, which the process chooses (prctl
// PR_SET_NAME, 15 bytes). Before issue 37 it was pasted into `numactl ... -- COMM` raw.
std::vector<Finding> NumaFindings(const std::string& comm) {
  testing::Families f;
  f.Gauge("rdma_device_numa_node", {{"device", "mlx5_0"}}, 1);
  f.Gauge("rdma_process_remote_numa_thread_ratio",
          {{"pid", "4242"}, {"comm", comm}, {"device", "mlx5_0"}}, 0.75);
  std::vector<Finding> numa;
  for (Finding& finding : RunChecks(f.Build(0, testing::AllRan()), nullptr, {})) {
    if (finding.id == "host.numa_placement") numa.push_back(std::move(finding));
  }
  return numa;
}

TEST(FixLine, AHostileCommIsQuotedInTheNumaFixOrTheFixIsDropped) {
  const std::string prefix = "numactl --cpunodebind=1 --membind=1 -- ";
  for (const std::string comm : {"$(touch /tmp/pwned)", "`reboot`", "a'b\"c", "x;id"}) {
    const auto numa = NumaFindings(comm);
    ASSERT_EQ(numa.size(), 1U) << comm;
    ASSERT_EQ(numa[0].fix.rfind(prefix, 0), 0U) << numa[0].fix;
    // The shell reads the rest back as the one word the comm is, and runs nothing.
    EXPECT_EQ(ThroughShell(numa[0].fix.substr(prefix.size())), comm) << numa[0].fix;
  }
  for (const std::string comm : {"\x1b[1m'$(id)\n\"", "a\nreboot", "-rf"}) {
    const auto numa = NumaFindings(comm);
    ASSERT_EQ(numa.size(), 1U);
    EXPECT_EQ(numa[0].fix, "") << "a comm that cannot be quoted safely gets no fix";
    // Its text report carries no raw control character.
    const std::string text = RenderText(numa, {.host = "h"}, false);
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    EXPECT_EQ(RenderJson(numa, {.host = "h"}).find('\x1b'), std::string::npos);
    EXPECT_EQ(RenderHtml(numa, {.host = "h"}).find('\x1b'), std::string::npos);
  }
}

TEST(Report, RemoteFixesAreCommentsNamingTheirHost) {
  auto numa = NumaFindings("trainer");
  const ReportContext remote{.host = "node7", .fixes_display_only = true};
  const std::string text = RenderText(numa, remote, false);
  EXPECT_NE(text.find("fix:      # on node7, not here: numactl"), std::string::npos) << text;
  EXPECT_NE(RenderJson(numa, remote).find("\"fixes_display_only\": true"), std::string::npos);
  EXPECT_NE(RenderHtml(numa, remote).find("<em>on node7, not here:</em>"), std::string::npos);
  const std::string local = RenderText(numa, {.host = "node7"}, false);
  EXPECT_NE(local.find("fix:      numactl"), std::string::npos) << local;
}

}  // namespace
}  // namespace rdmascope::doctor

namespace rdmascope::doctor {
namespace {

Finding Made(const std::string& id, const std::string& area, Severity severity) {
  Finding finding;
  finding.id = id;
  finding.area = area;
  finding.severity = severity;
  finding.observed = id + " seen";
  return finding;
}

// Item 6 of issue 37: on a host without RDMA the report opened with 40 skips before its one
// warning. The areas come worst first; skips are folded.
TEST(Report, WorstAreasFirstAndSkipsFolded) {
  std::vector<Finding> findings = {
      Made("links.port_state", "links", Severity::kSkip),
      Made("links.active_mtu", "links", Severity::kSkip),
      Made("roce.netdev_mtu", "roce", Severity::kOk),
      Made("host.probes", "host", Severity::kWarn),
      Made("host.collectors", "host", Severity::kOk),
  };
  SortFindings(findings);
  const std::string text = RenderText(findings, {.host = "h"}, false);
  EXPECT_LT(text.find("== Host and exporter =="), text.find("== RoCE")) << text;
  EXPECT_EQ(text.find("== Links"), std::string::npos) << text;  // only skips: folded
  EXPECT_NE(text.find("2 skipped (2 checks"), std::string::npos) << text;
  const std::string html = RenderHtml(findings, {.host = "h"});
  EXPECT_LT(html.find("<h2>Host and exporter</h2>"), html.find("<h2>RoCE")) << html;
  EXPECT_EQ(html.find("<h2>Links"), std::string::npos);
  const size_t details = html.find("<details><summary>2 skipped");
  ASSERT_NE(details, std::string::npos) << html;
  EXPECT_GT(html.find("links.port_state"), details);
  // JSON keeps SortFindings' order (schema_version 1 unchanged).
  const std::string json = RenderJson(findings, {.host = "h"});
  EXPECT_LT(json.find("links.port_state"), json.find("host.probes"));
}

}  // namespace
}  // namespace rdmascope::doctor

namespace rdmascope {
namespace {

// A /proc of one process listening on 127.0.0.1:9879 (socket inode 4242).
struct FakeProc {
  std::filesystem::path root;
  explicit FakeProc(const std::string& uid, const std::string& exe) {
    root = std::filesystem::temp_directory_path() /
           ("rdmascope-fakeproc-" + std::to_string(getpid()) + "-" + uid);
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root / "net");
    std::filesystem::create_directories(root / "100" / "fd");
    std::ofstream(root / "net" / "tcp")
        << "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
           "timeout inode\n"
           "   0: 0100007F:2697 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0  "
           "      0 4242 1 0000000000000000 100 0 0 10 0\n";
    std::ofstream(root / "net" / "tcp6") << "  sl  local_address ...\n";
    std::ofstream(root / "100" / "status")
        << "Name:\tx\nUid:\t" << uid << "\t" << uid << "\t" << uid << "\t" << uid << "\n";
    std::filesystem::create_symlink("socket:[4242]", root / "100" / "fd" / "3");
    std::filesystem::create_symlink(exe, root / "100" / "exe");
  }
  ~FakeProc() { std::filesystem::remove_all(root); }
};

TEST(LocalExporter, TrustsOnlyRootsRdmascope) {
  {
    FakeProc proc("0", "/usr/local/bin/rdmascope");
    EXPECT_TRUE(VerifyLocalExporter(9879, proc.root));
    const auto other_port = VerifyLocalExporter(9880, proc.root);
    ASSERT_FALSE(other_port);
    EXPECT_NE(other_port.error().find("nothing listens"), std::string::npos);
  }
  {
    FakeProc proc("1000", "/usr/local/bin/rdmascope");
    const auto trusted = VerifyLocalExporter(9879, proc.root);
    ASSERT_FALSE(trusted);
    EXPECT_NE(trusted.error().find("is not root"), std::string::npos) << trusted.error();
  }
  {
    FakeProc proc("0", "/usr/bin/python3.11");
    const auto trusted = VerifyLocalExporter(9879, proc.root);
    ASSERT_FALSE(trusted);
    EXPECT_NE(trusted.error().find("not rdmascope"), std::string::npos) << trusted.error();
  }
}

}  // namespace
}  // namespace rdmascope
