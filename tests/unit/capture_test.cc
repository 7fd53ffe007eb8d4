// The capture format (core/capture.h, sys/ethtool_capture.h, sys/netlink_capture.h): the
// reader against hostile captures, and record -> replay round trips through the real readers
// (sysfs files, SysfsDir, Ethtool, RDMA and DCB netlink) with the existing fakes.
#include "core/capture.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/rtnetlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>

#include "collectors/host_tuning.h"
#include "collectors/rdma.h"
#include "core/capture_index.h"
#include "core/metric_set.h"
#include "core/sysfs.h"
#include "core/sysfs_dir.h"
#include "sys/dcb_netlink.h"
#include "sys/ethtool_capture.h"
#include "sys/ethtool_ioctl.h"
#include "sys/netlink_capture.h"
#include "sys/rdma_netlink.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope::capture {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::WriteText;

// A hand-made capture of `samples` samples, sample directories made.
struct HandCapture {
  TempDir dir;
  explicit HandCapture(int samples = 1, int version = 1) {
    std::string list;
    for (int i = 1; i <= samples; ++i) {
      list += std::string(i > 1 ? "," : "") + "{\"name\":\"000" + std::to_string(i) + "\"}";
      fs::create_directories(dir.path() / "samples" / ("000" + std::to_string(i)));
    }
    WriteText(dir.path() / "index.json",
              "{\"format_version\":" + std::to_string(version) + ",\"samples\":[" + list + "]}");
  }
  fs::path sample(int n = 1) const { return dir.path() / "samples" / ("000" + std::to_string(n)); }
  Reader Open() const {
    auto reader = Reader::Open(dir.path());
    EXPECT_TRUE(reader.has_value()) << (reader ? "" : reader.error());
    return std::move(*reader);
  }
};

using Installed = testing::InstalledSession;

TEST(CaptureReader, ReadsFilesAndStoredErrnos) {
  HandCapture capture;
  WriteText(capture.sample() / "sys/class/net/eth0/mtu", "1500\n");
  WriteText(capture.sample() / "ethtool/eth0/coalesce.errno", "EOPNOTSUPP\n");
  const Reader reader = capture.Open();
  EXPECT_EQ(reader.ReadFile(1, "sys/class/net/eth0/mtu", 4096).value(), "1500\n");
  EXPECT_EQ(reader.ReadFile(1, "ethtool/eth0/coalesce", 4096).error(), EOPNOTSUPP);
  // Missing: an errno, never a made-up value.
  EXPECT_EQ(reader.ReadFile(1, "sys/class/net/eth0/speed", 4096).error(), ENOENT);
  EXPECT_EQ(reader.List(1, "sys/class/net/eth0").value(), std::vector<std::string>{"mtu"});
  EXPECT_EQ(reader.List(1, "ethtool/eth0").value(), std::vector<std::string>{"coalesce"});
}

TEST(CaptureReader, NewerFormatVersionIsRefusedWithAClearMessage) {
  HandCapture capture(1, kFormatVersion + 1);
  const auto reader = Reader::Open(capture.dir.path());
  ASSERT_FALSE(reader.has_value());
  EXPECT_NE(reader.error().find("capture format version 2 is newer than this rdmascope reads (1)"),
            std::string::npos)
      << reader.error();
}

// A field this reader does not know (the matrix captures' "origin", the next slice's additions)
// is ignored by the Reader and by the index facts doctor --replay reads: no new format version.
TEST(CaptureReader, UnknownIndexFieldsAreIgnored) {
  HandCapture capture;
  WriteText(capture.dir.path() / "index.json",
            R"({"format_version":1,"hostname":"matrix-rxe",)"
            R"("origin":{"kind":"synthetic","from":"sw/rxe/rxe_verbs.c rxe_query_port"},)"
            R"("not_yet":[1,{"deep":null}],"redacted":"a list one day",)"
            R"("samples":[{"name":"0001","time":"2026-12-06T12:00:00.000Z","extra":true}]})");
  WriteText(capture.sample() / "sys/class/infiniband/rxe0/ports/1/state", "4: ACTIVE\n");
  const Reader reader = capture.Open();
  EXPECT_EQ(reader.sample_count(), 1u);
  EXPECT_EQ(reader.ReadFile(1, "sys/class/infiniband/rxe0/ports/1/state", 4096).value(),
            "4: ACTIVE\n");
  const auto facts = ReadIndexFacts(reader.index_text());
  ASSERT_TRUE(facts.has_value()) << facts.error();
  EXPECT_EQ(facts->hostname, "matrix-rxe");
  EXPECT_FALSE(facts->redacted);  // a "redacted" that is not a boolean is not read as one
  EXPECT_EQ(facts->sample_times, std::vector<std::string>{"2026-12-06T12:00:00.000Z"});
}

TEST(CaptureReader, TruncatedOrMissingIndexIsRefused) {
  HandCapture capture;
  WriteText(capture.dir.path() / "index.json", "{\"format_version\":1,\"samples\":[{\"na");
  auto reader = Reader::Open(capture.dir.path());
  ASSERT_FALSE(reader.has_value());
  EXPECT_NE(reader.error().find("not a JSON object"), std::string::npos) << reader.error();
  fs::remove(capture.dir.path() / "index.json");
  const auto missing = Reader::Open(capture.dir.path());
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().find("no readable index.json"), std::string::npos) << missing.error();
}

TEST(CaptureReader, MissingSampleIsENOENT) {
  HandCapture capture(2);
  WriteText(capture.sample(1) / "proc/meminfo", "x");
  fs::remove_all(capture.sample(2));  // the index lists it, the directory is gone
  const Reader reader = capture.Open();
  EXPECT_EQ(reader.ReadFile(2, "proc/meminfo", 4096).error(), ENOENT);
  EXPECT_EQ(reader.ReadFile(3, "proc/meminfo", 4096).error(), ENOENT);  // beyond the index
  EXPECT_EQ(reader.ReadFile(0, "proc/meminfo", 4096).error(), ENOENT);
  EXPECT_EQ(reader.List(2, "proc").error(), ENOENT);
}

TEST(CaptureReader, TruncatedEthtoolTextIsRefused) {
  HandCapture capture;
  WriteText(capture.sample() / "ethtool/eth0/statistics",
            "NIC statistics:\n     rx_packets: 12\n     tx_pack");
  const Reader reader = capture.Open();
  const auto text = reader.ReadFile(1, "ethtool/eth0/statistics", 4096);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(sys::ParseEthtoolStats(*text).error(), EBADMSG);
  // And through Ethtool, as replay reads it: the stats are refused, not half-read.
  Installed session(Session::Replaying(Layout("/sys", "/proc"), capture.Open()));
  auto ethtool = sys::Ethtool::Open();
  ASSERT_TRUE(ethtool.has_value());
  EXPECT_EQ(ethtool->GetStats("eth0").error(), EBADMSG);
}

TEST(CaptureReader, SymlinksOutOfTheCaptureAreNeverFollowed) {
  HandCapture capture;
  TempDir outside;
  WriteText(outside.path() / "secret", "do not read");
  fs::create_directories(capture.sample() / "sys/class/net/eth0");
  fs::create_symlink(outside.path() / "secret", capture.sample() / "sys/class/net/eth0/mtu");
  // Seven levels up from eth0/ is the capture's parent, where `outside` also is.
  fs::create_symlink("../../../../../../../" + outside.path().filename().string() + "/secret",
                     capture.sample() / "sys/class/net/eth0/speed");
  fs::create_symlink("../../../../../../../../../../../../../../etc/passwd",
                     capture.sample() / "sys/class/net/eth0/carrier");
  fs::create_symlink(outside.path(), capture.sample() / "sys/class/net/eth1");  // a directory
  const Reader reader = capture.Open();
  for (const char* rel : {"sys/class/net/eth0/mtu", "sys/class/net/eth0/speed",
                          "sys/class/net/eth0/carrier", "sys/class/net/eth1/secret"}) {
    const auto read = reader.ReadFile(1, rel, 4096);
    ASSERT_FALSE(read.has_value()) << rel << " read " << *read;
    EXPECT_TRUE(read.error() == EXDEV || read.error() == ELOOP) << rel << ": " << read.error();
  }
  EXPECT_FALSE(reader.List(1, "sys/class/net/eth1").has_value());
  // A relative path naming ".." is refused before any open.
  EXPECT_EQ(reader.ReadFile(1, "../../secret", 4096).error(), ENOENT);
}

TEST(CaptureReader, FifoAndDevicesAreRefusedWithoutBlocking) {
  HandCapture capture;
  fs::create_directories(capture.sample() / "proc");
  ASSERT_EQ(::mkfifo((capture.sample() / "proc/meminfo").c_str(), 0600), 0);
  fs::create_directories(capture.sample() / "sys");
  fs::create_symlink("/dev/zero", capture.sample() / "sys/zero");
  const Reader reader = capture.Open();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.ReadFile(1, "proc/meminfo", 4096).error(), EINVAL);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(reader.ReadFile(1, "sys/zero", 4096).has_value());
}

TEST(CaptureReader, TenGibibyteSparseFileIsNotRead) {
  HandCapture capture;
  const fs::path big = capture.sample() / "proc/stat";
  fs::create_directories(big.parent_path());
  const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{10} << 30), 0);
  ::close(fd);
  const Reader reader = capture.Open();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.ReadFile(1, "proc/stat", 4 << 20).error(), EFBIG);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(CaptureReader, NetlinkReplyCutShortIsRefused) {
  HandCapture capture;
  // One RDMA_NLDEV_CMD_GET message whose header claims 100 bytes, 40 of them present.
  alignas(8) char bytes[40] = {};
  nlmsghdr header{};
  header.nlmsg_len = 100;
  header.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);
  std::memcpy(bytes, &header, sizeof header);
  WriteText(capture.sample() / "netlink/rdma/get.bin", std::string_view(bytes, sizeof bytes));
  Installed session(Session::Replaying(Layout("/sys", "/proc"), capture.Open()));
  auto netlink = sys::RdmaNetlink::Open();
  ASSERT_TRUE(netlink.has_value());
  EXPECT_EQ(netlink->DumpPorts().error(), EBADMSG);
}

TEST(CaptureSession, OneSamplePerCollectionTheLastRepeating) {
  HandCapture capture(2);
  WriteText(capture.sample(1) / "proc/loadavg", "first");
  WriteText(capture.sample(2) / "proc/loadavg", "second");
  Installed session(Session::Replaying(Layout("/sys", "/proc"), capture.Open()));
  // Before any collection (the collectors being built): sample 1.
  EXPECT_EQ(sysfs::ReadFile("/proc/loadavg", 64).value_or(""), "first");
  std::vector<std::string> seen;
  for (int scrape = 0; scrape < 3; ++scrape) {
    session->NextSample();
    seen.push_back(sysfs::ReadFile("/proc/loadavg", 64).value_or(""));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"first", "second", "second"}));
}

TEST(CaptureLayout, HostPathsMirrorUnderSysProcAndTheirOwnName) {
  const Layout layout("/host/sys", "/host/proc/");
  EXPECT_EQ(layout.Relative("/host/sys/class/net/eth0/mtu").value(), "sys/class/net/eth0/mtu");
  EXPECT_EQ(layout.Relative("/host/proc/meminfo").value(), "proc/meminfo");
  EXPECT_EQ(layout.Relative("/run/rdmascope/x").value(), "run/rdmascope/x");
  EXPECT_FALSE(layout.Relative("/host/sys/../../etc/passwd").has_value());
  EXPECT_FALSE(layout.Relative("relative/path").has_value());
  EXPECT_EQ(ErrnoName(EOPNOTSUPP), "EOPNOTSUPP");
  EXPECT_EQ(ErrnoFromName(ErrnoName(EPERM)), EPERM);
  EXPECT_EQ(ErrnoFromName("EOPNOTSUPP\n"), EOPNOTSUPP);
  EXPECT_FALSE(ErrnoFromName("banana").has_value());
}

TEST(CaptureWriter, RefusesANonEmptyOutputOrASymlink) {
  TempDir dir;
  WriteText(dir.path() / "out/notes.txt", "mine");
  auto writer = Writer::Create(dir.path() / "out", false);
  ASSERT_FALSE(writer.has_value());
  EXPECT_NE(writer.error().find("not empty"), std::string::npos);
  fs::create_symlink(dir.path() / "out", dir.path() / "link");
  writer = Writer::Create(dir.path() / "link", true);
  ASSERT_FALSE(writer.has_value());
  EXPECT_NE(writer.error().find("symbolic link"), std::string::npos);
  // --force keeps what is not a capture.
  writer = Writer::Create(dir.path() / "out", true);
  ASSERT_TRUE(writer.has_value()) << writer.error();
  EXPECT_TRUE(fs::exists(dir.path() / "out/notes.txt"));
}

TEST(CaptureWriter, SampleAppearsOnlyWhenWholeWithPrivateModes) {
  TempDir dir;
  auto writer = Writer::Create(dir.path() / "cap", false);
  ASSERT_TRUE(writer.has_value());
  ASSERT_TRUE((*writer)->BeginSample(1).has_value());
  (*writer)->File("sys/class/net/eth0/mtu", "1500\n");
  (*writer)->Listing("sys/class/net", {"eth0", "lo"});
  EXPECT_FALSE(fs::exists(dir.path() / "cap/samples/0001"));
  ASSERT_TRUE((*writer)->CommitSample().has_value());
  ASSERT_TRUE((*writer)->WriteIndex("test", {"ethtool"}).has_value());
  const fs::path sample = dir.path() / "cap/samples/0001";
  EXPECT_TRUE(fs::is_directory(sample / "sys/class/net/lo"));  // listed, nothing read under it
  struct stat st {};
  ASSERT_EQ(::stat((sample / "sys/class/net/eth0/mtu").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  ASSERT_EQ(::stat(sample.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  const Reader reader = Reader::Open(dir.path() / "cap").value();
  EXPECT_EQ(reader.List(1, "sys/class/net").value(), (std::vector<std::string>{"eth0", "lo"}));
  // The marker keeps `lo` where empty directories are dropped (git), and is never listed.
  EXPECT_TRUE(fs::is_regular_file(sample / "sys/class/net/lo" / kListedMarker));
  EXPECT_FALSE(fs::exists(sample / "sys/class/net/eth0" / kListedMarker));
  EXPECT_EQ(reader.List(1, "sys/class/net/lo").value(), std::vector<std::string>{});
  EXPECT_EQ(reader.CheckDirectory(1, "sys/class/net/lo"), 0);
}

// --redact: the files as core/redact's rules make them, the index's host name hashed; the
// replay reads the redacted values where the host's were.
TEST(CaptureWriter, RedactedFilesAndIndex) {
  TempDir dir;
  auto writer = Writer::Create(dir.path() / "cap", false).value();
  auto redactor = std::make_shared<const redact::Redactor>(
      redact::Redactor::WithKey("0123456789abcdef-fleet-key").value());
  writer->SetRedactor(redactor, /*key_file=*/true);
  ASSERT_TRUE(writer->BeginSample(1).has_value());
  writer->File("sys/class/infiniband/mlx5_0/node_guid", "0002:c903:0042:1234\n");
  writer->File("sys/class/infiniband/mlx5_0/fw_ver", "22.36.1010\n");
  ASSERT_TRUE(writer->CommitSample().has_value());
  ASSERT_TRUE(writer->WriteIndex("test", {}).has_value());
  const Reader reader = Reader::Open(dir.path() / "cap").value();
  EXPECT_EQ(reader.ReadFile(1, "sys/class/infiniband/mlx5_0/node_guid", 64).value(),
            redactor->GuidText("0002:c903:0042:1234") + "\n");
  EXPECT_EQ(reader.ReadFile(1, "sys/class/infiniband/mlx5_0/fw_ver", 64).value(), "22.36.1010\n");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(reader.index_text().find(std::string("\"") + host + "\""), std::string::npos);
  EXPECT_NE(reader.index_text().find(redactor->Name("host", host)), std::string::npos);
  EXPECT_NE(reader.index_text().find("\"redacted\": true"), std::string::npos)
      << reader.index_text();
  // The key is named, not told: its id is a keyed hash, the same for every capture it made.
  const auto facts = capture::ReadIndexFacts(reader.index_text());
  ASSERT_TRUE(facts) << facts.error();
  EXPECT_EQ(facts->redaction_key, "file");
  EXPECT_EQ(facts->redaction_key_id, redactor->Token(capture::kRedactionKeyIdKind, "", 16));
  EXPECT_EQ(facts->redaction_key_id.size(), 16U);
  EXPECT_NE(facts->redaction_key_id, redact::Redactor::WithKey("0123456789abcdef-other-key")
                                         .value()
                                         .Token(capture::kRedactionKeyIdKind, "", 16));
  EXPECT_EQ(reader.index_text().find("fleet-key"), std::string::npos);
}

// ---- round trips: what the real readers return live, then replayed, is the same.

// Records one pass of `read` over the host rooted at sysfs/procfs, then replays it: returns
// (live, replayed).
template <typename Read>
std::pair<std::string, std::string> RoundTrip(const fs::path& sysfs, const fs::path& procfs,
                                              Read&& read) {
  TempDir out;
  auto writer = Writer::Create(out.path() / "cap", false).value();
  std::string live;
  {
    Installed session(Session::Recording(Layout(sysfs, procfs), writer.get()));
    EXPECT_TRUE(writer->BeginSample(1).has_value());
    live = read();
    EXPECT_TRUE(writer->CommitSample().has_value());
    EXPECT_TRUE(writer->WriteIndex("test", {}).has_value());
  }
  // Replayed from the capture with the host tree gone: nothing can come from it.
  TempDir elsewhere;
  fs::rename(sysfs, elsewhere.path() / "sys");
  std::string replayed;
  {
    Installed session(
        Session::Replaying(Layout(sysfs, procfs), Reader::Open(out.path() / "cap").value()));
    replayed = read();
  }
  fs::rename(elsewhere.path() / "sys", sysfs);
  return {live, replayed};
}

TEST(CaptureRoundTrip, RdmaCollectorFromSysfsFilesAndSysfsDir) {
  TempDir root;
  testing::MaterialiseTree(testing::FixturePath("sysfs/rdma_hosts.tree"), root.path() / "sys");
  const auto [live, replayed] = RoundTrip(root.path() / "sys", root.path() / "proc", [&] {
    RdmaCollector collector(RdmaOptions{}, root.path() / "sys", nullptr);
    MetricSet out;
    collector.Collect(out);
    return testing::Serialise(out.Take());
  });
  EXPECT_GT(live.size(), 1000U);  // the fixture's devices, ports and counters
  EXPECT_NE(live.find("rdma_port_"), std::string::npos);
  EXPECT_EQ(live, replayed);
}

TEST(CaptureRoundTrip, HostTuningFromSysfsAndProcfs) {
  TempDir root;
  testing::MaterialiseTree(testing::FixturePath("sysfs/host_tuning.tree"), root.path());
  WriteText(root.path() / "proc/meminfo", "HugePages_Total:       4\nHugepagesize:    2048 kB\n");
  const auto [live, replayed] = RoundTrip(root.path() / "sys", root.path() / "proc", [&] {
    HostTuningCollector collector(root.path() / "sys", root.path() / "proc");
    MetricSet out;
    collector.Collect(out);
    return testing::Serialise(out.Take());
  });
  EXPECT_NE(live.find("rdma_host_"), std::string::npos);
  EXPECT_EQ(live, replayed);
}

// A driver: 3 stats, driver info, private flags; coalescing unsupported.
int FakeDriver(std::string_view, void* command) {
  static const char* const kNames[] = {"rx_packets", "tx_packets", "rx_crc_errors_phy"};
  uint32_t cmd;
  std::memcpy(&cmd, command, sizeof cmd);
  switch (cmd) {
    case ETHTOOL_GSSET_INFO: {
      auto* info = static_cast<ethtool_sset_info*>(command);
      const uint32_t n = (info->sset_mask & (1ULL << ETH_SS_STATS)) ? 3 : 2;
      std::memcpy(static_cast<char*>(command) + sizeof(ethtool_sset_info), &n, sizeof n);
      return 0;
    }
    case ETHTOOL_GSTRINGS: {
      auto* strings = static_cast<ethtool_gstrings*>(command);
      const bool stats = strings->string_set == ETH_SS_STATS;
      static const char* const kFlags[] = {"rx_cqe_compress", "tx_cqe_moder"};
      strings->len = stats ? 3 : 2;
      for (uint32_t i = 0; i < strings->len; ++i) {
        char* slot = reinterpret_cast<char*>(strings->data) + i * ETH_GSTRING_LEN;
        std::memset(slot, 0, ETH_GSTRING_LEN);
        std::strcpy(slot, stats ? kNames[i] : kFlags[i]);
      }
      return 0;
    }
    case ETHTOOL_GSTATS: {
      auto* stats = static_cast<ethtool_stats*>(command);
      stats->n_stats = 3;
      stats->data[0] = 1000;
      stats->data[1] = 2000;
      stats->data[2] = 18446744073709551615ULL;
      return 0;
    }
    case ETHTOOL_GDRVINFO: {
      auto* info = static_cast<ethtool_drvinfo*>(command);
      std::strcpy(info->driver, "mlx5_core");
      std::strcpy(info->version, "24.10");
      std::strcpy(info->fw_version, "28.39.1002 (MT_0000000838)");
      std::strcpy(info->bus_info, "0000:03:00.0");
      return 0;
    }
    case ETHTOOL_GPFLAGS:
      static_cast<ethtool_value*>(command)->data = 1;  // rx_cqe_compress on
      return 0;
    default:
      return EOPNOTSUPP;
  }
}

std::string EthtoolReading(const sys::Ethtool& ethtool) {
  std::string text;
  const auto stats = ethtool.GetStats("eth9");
  text += stats ? sys::FormatEthtoolStats(*stats) : "stats " + ErrnoName(stats.error());
  const auto info = ethtool.GetDriverInfo("eth9");
  text += info ? sys::FormatDriverInfo(*info) : "info " + ErrnoName(info.error());
  const auto flags = ethtool.GetPrivateFlags("eth9");
  text += flags ? sys::FormatPrivateFlags("eth9", *flags) : "flags " + ErrnoName(flags.error());
  const auto coalesce = ethtool.GetCoalesce("eth9");
  text +=
      coalesce ? sys::FormatCoalesce("eth9", *coalesce) : "coalesce " + ErrnoName(coalesce.error());
  const auto mtu = ethtool.GetMtu("eth9");
  text += mtu ? "mtu " + std::to_string(*mtu) : "mtu " + ErrnoName(mtu.error());
  return text;
}

TEST(CaptureRoundTrip, EthtoolIoctlsAsTheToolsText) {
  TempDir out;
  auto writer = Writer::Create(out.path() / "cap", false).value();
  std::string live;
  {
    Installed session(Session::Recording(Layout("/sys", "/proc"), writer.get()));
    ASSERT_TRUE(writer->BeginSample(1).has_value());
    const auto ethtool =
        sys::Ethtool::WithIoctl(FakeDriver, [](std::string_view, unsigned long, int& value) {
          value = 9000;
          return 0;
        });
    live = EthtoolReading(ethtool);
    ASSERT_TRUE(writer->CommitSample().has_value());
    ASSERT_TRUE(writer->WriteIndex("test", {"ethtool"}).has_value());
  }
  const fs::path sample = out.path() / "cap/samples/0001/ethtool/eth9";
  EXPECT_EQ(testing::ReadText(sample / "coalesce.errno"), "EOPNOTSUPP\n");
  EXPECT_EQ(testing::ReadText(sample / "statistics"),
            "NIC statistics:\n     rx_packets: 1000\n     tx_packets: 2000\n"
            "     rx_crc_errors_phy: 18446744073709551615\n");
  const std::string index = testing::ReadText(out.path() / "cap/index.json");
  EXPECT_NE(index.find("\"firmware_version\": \"28.39.1002 (MT_0000000838)\""), std::string::npos);
  EXPECT_NE(index.find("\"source\": \"ethtool -c eth9\""), std::string::npos) << index;

  Installed session(
      Session::Replaying(Layout("/sys", "/proc"), Reader::Open(out.path() / "cap").value()));
  auto ethtool = sys::Ethtool::Open();
  ASSERT_TRUE(ethtool.has_value());
  EXPECT_EQ(EthtoolReading(*ethtool), live);
  EXPECT_NE(live.find("coalesce EOPNOTSUPP"), std::string::npos);
  EXPECT_NE(live.find("rx_cqe_compress: on"), std::string::npos);
}

TEST(CaptureRoundTrip, EthtoolTextAsTheToolPrintsIt) {
  // `ethtool -i` and `ethtool -c` print more lines than rdmascope records: they are skipped.
  const auto info = sys::ParseDriverInfo(
      "driver: ice\nversion: 6.1.0\nfirmware-version: 4.40 0x8001c967 1.3534.0\n"
      "expansion-rom-version: \nbus-info: 0000:5e:00.0\nsupports-statistics: yes\n");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->bus_info, "0000:5e:00.0");
  EXPECT_EQ(info->firmware_version, "4.40 0x8001c967 1.3534.0");
  const auto coalesce = sys::ParseCoalesce(
      "Coalesce parameters for ens1f0:\nAdaptive RX: on  TX: n/a\nstats-block-usecs: n/a\n"
      "rx-usecs: 50\nrx-frames: n/a\ntx-usecs: 50\n");
  ASSERT_TRUE(coalesce.has_value());
  EXPECT_TRUE(coalesce->adaptive_rx);
  EXPECT_FALSE(coalesce->adaptive_tx);
  EXPECT_EQ(coalesce->rx_usecs, 50U);
  EXPECT_EQ(sys::ParsePrivateFlags("Private flags for x:\nrx_cqe_moder   : maybe\n").error(),
            EBADMSG);
}

// An RDMA netlink dump as the kernel sends it (one device, its port), sequence number 4242.
std::string PortDumpReply(uint16_t command) {
  alignas(8) char buf[4096] = {};
  size_t used = 0;
  const auto message = [&](uint16_t type) {
    nlmsghdr* m = mnl_nlmsg_put_header(buf + used);
    m->nlmsg_type = type;
    m->nlmsg_flags = NLM_F_MULTI;
    m->nlmsg_seq = 4242;
    return m;
  };
  nlmsghdr* m = message(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, command));
  mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, 3);
  mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0");
  if (command == RDMA_NLDEV_CMD_PORT_GET) {
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
    mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_NDEV_NAME, "ens1f0np0");
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_NDEV_INDEX, 7);
  }
  used += m->nlmsg_len;
  m = message(NLMSG_DONE);
  mnl_nlmsg_put_extra_header(m, sizeof(int));
  used += m->nlmsg_len;
  return std::string(buf, used);
}

TEST(CaptureRoundTrip, RdmaNetlinkRepliesWithTheirSequenceRewritten) {
  TempDir out;
  auto writer = Writer::Create(out.path() / "cap", false).value();
  {
    Installed session(Session::Recording(Layout("/sys", "/proc"), writer.get()));
    ASSERT_TRUE(writer->BeginSample(1).has_value());
    // As RunDump records them: the request, then each buffer received.
    std::vector<char> request;
    for (const auto& [len, reply] :
         {std::pair{sys::BuildDeviceDump(4242, request), PortDumpReply(RDMA_NLDEV_CMD_GET)}}) {
      sys::NetlinkRecording recording(sys::NetlinkFamily::kRdma, request.data(), len);
      recording.Received(reply.data(), reply.size());
      recording.Finish(0);
    }
    const size_t len = sys::BuildPortDump(3, 4243, request);
    sys::NetlinkRecording recording(sys::NetlinkFamily::kRdma, request.data(), len);
    const std::string reply = PortDumpReply(RDMA_NLDEV_CMD_PORT_GET);
    recording.Received(reply.data(), reply.size());
    recording.Finish(0);
    ASSERT_TRUE(writer->CommitSample().has_value());
    ASSERT_TRUE(writer->WriteIndex("test", {"resources"}).has_value());
  }
  const fs::path netlink = out.path() / "cap/samples/0001/netlink/rdma";
  EXPECT_TRUE(fs::exists(netlink / "get.bin"));
  EXPECT_TRUE(fs::exists(netlink / "port_get-dev3.bin"));
  EXPECT_NE(testing::ReadText(netlink / "port_get-dev3.json").find("\"string\": \"ens1f0np0\""),
            std::string::npos);

  Installed session(
      Session::Replaying(Layout("/sys", "/proc"), Reader::Open(out.path() / "cap").value()));
  auto rdma = sys::RdmaNetlink::Open();  // its sequence numbers start at 1, not 4242
  ASSERT_TRUE(rdma.has_value());
  const auto ports = rdma->DumpPorts();
  ASSERT_TRUE(ports.has_value()) << std::strerror(ports.error());
  ASSERT_EQ(ports->size(), 1U);
  EXPECT_EQ((*ports)[0].device, "mlx5_0");
  EXPECT_EQ((*ports)[0].netdev, "ens1f0np0");
}

TEST(CaptureRoundTrip, DcbReplyAndAMissingOneIsAnErrno) {
  HandCapture capture;
  // DCB_CMD_IEEE_GET for eth0 answered by an NLMSG_ERROR EOPNOTSUPP (a driver without DCB).
  alignas(8) char buf[256] = {};
  nlmsghdr* m = mnl_nlmsg_put_header(buf);
  m->nlmsg_type = NLMSG_ERROR;
  m->nlmsg_seq = 99;
  auto* error = static_cast<nlmsgerr*>(mnl_nlmsg_put_extra_header(m, sizeof(nlmsgerr)));
  error->error = -EOPNOTSUPP;
  WriteText(capture.sample() / "netlink/dcb/ieee_get-eth0.bin",
            std::string_view(buf, m->nlmsg_len));
  Installed session(Session::Replaying(Layout("/sys", "/proc"), capture.Open()));
  auto dcb = sys::DcbNetlink::Open();
  ASSERT_TRUE(dcb.has_value());
  EXPECT_EQ(dcb->QueryPfc("eth0").error(), EOPNOTSUPP);
  EXPECT_EQ(dcb->QueryPfc("eth1").error(), ENOENT);  // not in the capture: never a made-up value
}

}  // namespace
}  // namespace rdmascope::capture
