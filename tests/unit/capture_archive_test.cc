// A capture in memory (core/capture_tree.h): a directory capture's samples cached as trees, and
// the same capture as a .tar.gz. Every Reader method answers alike from the files, from the
// cache and from the archive; hostile archives are refused with a message that says why.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "collectors/rdma.h"
#include "core/capture.h"
#include "core/capture_tree.h"
#include "core/metric_set.h"
#include "unit/fixture_tree.h"

namespace rdmascope::capture {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::WriteText;

std::string Index(int samples, int version = 1) {
  std::string list;
  for (int i = 1; i <= samples; ++i) {
    list += std::string(i > 1 ? "," : "") + "{\"name\":\"000" + std::to_string(i) + "\"}";
  }
  return "{\"format_version\":" + std::to_string(version) + ",\"samples\":[" + list + "]}";
}

// A capture with every kind of name the format has: files, .errno, .link, empty directories,
// a directory refused as a whole, nested counters; sample 2 listed but absent.
fs::path MakeCapture(const fs::path& root) {
  WriteText(root / "index.json", Index(3));
  const fs::path s1 = root / "samples/0001";
  WriteText(s1 / "sys/class/net/eth0/mtu", "1500\n");
  WriteText(s1 / "sys/class/net/eth0/speed.errno", "EINVAL\n");
  WriteText(s1 / "sys/class/net/eth0/device.link", "../../../devices/pci0000:00/0000:00:01.0");
  WriteText(s1 / "sys/class/net/eth0/big", std::string(5000, 'x'));
  WriteText(s1 / "sys/class/net/eth0/errno_garbage.errno", "NOT_AN_ERRNO\n");
  fs::create_directories(s1 / "sys/class/net/eth1");  // listed, nothing read beneath
  WriteText(s1 / "sys/class/infiniband.errno", "EACCES\n");
  for (int i = 0; i < 20; ++i) {
    WriteText(
        s1 / "sys/class/infiniband_verbs/mlx5_0/ports/1/hw_counters" / ("c" + std::to_string(i)),
        std::to_string(i * 7) + "\n");
  }
  WriteText(s1 / "sys/class/infiniband_verbs/mlx5_0/ports/1/hw_counters/np_cnp_sent.errno",
            "EOPNOTSUPP\n");
  WriteText(s1 / "ethtool/eth0/coalesce.errno", "EOPNOTSUPP\n");
  WriteText(s1 / "ethtool/eth0/statistics", "NIC statistics:\n     rx_packets: 12\n");
  WriteText(s1 / "netlink/rdma/get.bin", std::string("\x10\0\0\0\x01\x14", 6));
  WriteText(root / "samples/0003/proc/meminfo", "MemTotal: 1 kB\n");
  return root;
}

const std::vector<std::string> kNames = {"sys",
                                         "sys/class",
                                         "sys/class/net",
                                         "sys/class/net/eth0",
                                         "sys/class/net/eth0/mtu",
                                         "sys/class/net/eth0/speed",
                                         "sys/class/net/eth0/device",
                                         "sys/class/net/eth0/big",
                                         "sys/class/net/eth0/errno_garbage",
                                         "sys/class/net/eth0/absent",
                                         "sys/class/net/eth1",
                                         "sys/class/net/eth0/mtu/below",
                                         "sys/class/infiniband",
                                         "sys/class/infiniband/mlx5_0",
                                         "sys/class/infiniband_verbs/mlx5_0/ports/1/hw_counters",
                                         "ethtool/eth0/coalesce",
                                         "ethtool/eth0/statistics",
                                         "netlink/rdma/get.bin",
                                         "proc/meminfo",
                                         "../x",
                                         "/abs",
                                         "a//b",
                                         "sys/class/net/eth0/device.link"};

// Everything the Reader answers about kNames, in samples 0 to 4, as one text.
std::string Answers(const Reader& reader) {
  std::string out;
  const auto error = [](int e) { return "E" + std::to_string(e); };
  for (size_t sample = 0; sample <= 4; ++sample) {
    for (const std::string& rel : kNames) {
      out += std::to_string(sample) + " " + rel + ":";
      for (const size_t max : {size_t{4096}, size_t{2}}) {
        const auto bytes = reader.ReadFile(sample, rel, max);
        out += " read=" + (bytes ? *bytes : error(bytes.error()));
      }
      const auto names = reader.List(sample, rel);
      out += " list=";
      if (names) {
        for (const std::string& name : *names) out += name + ",";
      } else {
        out += error(names.error());
      }
      const auto link = reader.ReadLink(sample, rel);
      out += " link=" + (link ? *link : error(link.error()));
      out += " exists=" + std::to_string(reader.Exists(sample, rel));
      out += " dir=" + std::to_string(reader.CheckDirectory(sample, rel));
      auto dir = reader.OpenDirectory(sample, rel);
      out += " open=" + (dir ? std::string("ok") : error(dir.error()));
      if (dir) {
        const auto listed = reader.ListAt(*dir);
        out += " listat=";
        if (listed) {
          for (const std::string& name : *listed) {
            out += name + ",";
            const auto at = reader.ReadFileAt(*dir, name, 4096);
            out += "[" + (at ? *at : error(at.error())) + "]";
          }
        }
        for (const char* name : {"absent", "..", "a/b", "speed", "np_cnp_sent"}) {
          const auto at = reader.ReadFileAt(*dir, name, 4096);
          out += std::string(" ") + name + "=" + (at ? *at : error(at.error()));
        }
      }
      out += "\n";
    }
  }
  return out;
}

TEST(CaptureCache, TreeAnswersAsTheFilesDo) {
  TempDir dir;
  const fs::path root = MakeCapture(dir.path() / "cap");
  const Reader files = Reader::Open(root, Limits{.cache_bytes = 0}).value();
  const Reader cached = Reader::Open(root).value();
  const std::string expected = Answers(files);
  EXPECT_EQ(Answers(cached), expected);
  EXPECT_EQ(files.cached_bytes(), 0U);  // no budget: every read from the files
  EXPECT_GT(cached.cached_bytes(), 5000U);
  // Served from memory now: the capture's files gone, the same answers.
  fs::remove_all(root / "samples");
  EXPECT_EQ(Answers(cached), expected);
}

TEST(CaptureCache, SampleOverTheBudgetIsReadFromItsFiles) {
  TempDir dir;
  const fs::path root = MakeCapture(dir.path() / "cap");
  // Room for sample 3 (one small file), not for sample 1.
  const Reader reader = Reader::Open(root, Limits{.cache_bytes = 2048}).value();
  EXPECT_EQ(reader.ReadFile(3, "proc/meminfo", 4096).value(), "MemTotal: 1 kB\n");
  const uint64_t small = reader.cached_bytes();
  EXPECT_GT(small, 0U);
  EXPECT_LE(small, 2048U);
  EXPECT_EQ(reader.ReadFile(1, "sys/class/net/eth0/mtu", 4096).value(), "1500\n");
  EXPECT_EQ(reader.cached_bytes(), small);
  WriteText(root / "samples/0001/sys/class/net/eth0/mtu", "9000\n");  // read from the file
  EXPECT_EQ(reader.ReadFile(1, "sys/class/net/eth0/mtu", 4096).value(), "9000\n");
}

TEST(CaptureCache, ScrapesAtOnceSeeOneTree) {
  TempDir dir;
  const fs::path root = MakeCapture(dir.path() / "cap");
  const Reader files = Reader::Open(root, Limits{.cache_bytes = 0}).value();
  const std::string expected = Answers(files);
  const Reader reader = Reader::Open(root).value();
  std::vector<std::string> seen(4);
  std::vector<std::thread> threads;
  for (std::string& out : seen) threads.emplace_back([&] { out = Answers(reader); });
  for (std::thread& thread : threads) thread.join();
  for (const std::string& out : seen) EXPECT_EQ(out, expected);
}

// What --replay names is opened without blocking and read only as a directory or a regular
// file: a FIFO (a user's, in a shared directory) is refused at once, as is a symbolic link to
// one or a device.
TEST(CaptureArchive, AFifoOrDeviceNamedAsTheCaptureIsRefusedAtOnce) {
  TempDir dir;
  const fs::path fifo = dir.path() / "capture.tar.gz";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto from_fifo = Reader::Open(fifo);
  ASSERT_FALSE(from_fifo);
  EXPECT_NE(from_fifo.error().find("neither a capture directory nor a .tar.gz"), std::string::npos)
      << from_fifo.error();
  fs::create_symlink(fifo, dir.path() / "link.tar.gz");
  EXPECT_FALSE(Reader::Open(dir.path() / "link.tar.gz"));
  EXPECT_FALSE(Reader::Open("/dev/null"));
  // A regular file that is neither: refused by its content, whatever its name.
  std::ofstream(dir.path() / "x.tar.gz") << "not gzip";
  EXPECT_FALSE(Reader::Open(dir.path() / "x.tar.gz"));
}

TEST(CaptureArchive, RoundTripAnswersAsTheDirectory) {
  TempDir dir;
  const fs::path root = MakeCapture(dir.path() / "cap");
  ASSERT_TRUE(WriteArchive(root, dir.path() / "cap.tar.gz", "cap").has_value());
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() / "cap.tar.gz").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  const Reader files = Reader::Open(root, Limits{.cache_bytes = 0}).value();
  // By its content, not its name.
  fs::rename(dir.path() / "cap.tar.gz", dir.path() / "capture.data");
  auto archive = Reader::Open(dir.path() / "capture.data");
  ASSERT_TRUE(archive.has_value()) << archive.error();
  EXPECT_TRUE(archive->archive());
  EXPECT_EQ(archive->index_text(), files.index_text());
  EXPECT_EQ(Answers(*archive), Answers(files));
}

TEST(CaptureArchive, RecordedRdmaHostReplaysFromTheArchiveAsLive) {
  TempDir root;
  testing::MaterialiseTree(testing::FixturePath("sysfs/rdma_hosts.tree"), root.path() / "sys");
  const auto collect = [&] {
    RdmaCollector collector(RdmaOptions{}, root.path() / "sys", nullptr);
    MetricSet out;
    collector.Collect(out);
    return testing::Serialise(out.Take());
  };
  const Layout layout(root.path() / "sys", root.path() / "proc");
  TempDir out;
  std::string live;
  {
    auto writer = Writer::Create(out.path() / "cap", false).value();
    auto session = Session::Recording(layout, writer.get());
    Install(session.get());
    ASSERT_TRUE(writer->BeginSample(1).has_value());
    live = collect();
    ASSERT_TRUE(writer->CommitSample().has_value());
    ASSERT_TRUE(writer->WriteIndex("test", {}).has_value());
    Install(nullptr);
  }
  ASSERT_TRUE(WriteArchive(out.path() / "cap", out.path() / "cap.tar.gz", "cap").has_value());
  fs::remove_all(out.path() / "cap");
  fs::remove_all(root.path() / "sys");  // nothing can come from the host
  auto session = Session::Replaying(layout, Reader::Open(out.path() / "cap.tar.gz").value());
  Install(session.get());
  const std::string replayed = collect();
  Install(nullptr);
  EXPECT_NE(live.find("rdma_port_"), std::string::npos);
  EXPECT_EQ(replayed, live);
}

// Hand-made archives, each entry as given: hostile ones included.
struct Entry {
  std::string name;
  mode_t type = AE_IFREG;
  std::string data;
  int64_t size = -1;  // of zeros instead of data, when >= 0
  std::string link;   // symlink target or hard link
};

fs::path MakeArchive(const fs::path& path, const std::vector<Entry>& entries) {
  archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  EXPECT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const Entry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_filetype(entry, e.type);
    archive_entry_set_perm(entry, 0600);
    if (e.type == AE_IFLNK) archive_entry_set_symlink(entry, e.link.c_str());
    if (e.type == AE_IFREG && !e.link.empty()) archive_entry_set_hardlink(entry, e.link.c_str());
    const int64_t size = e.size >= 0 ? e.size : static_cast<int64_t>(e.data.size());
    if (e.type == AE_IFREG && e.link.empty()) archive_entry_set_size(entry, size);
    EXPECT_EQ(archive_write_header(a, entry), ARCHIVE_OK) << archive_error_string(a);
    if (e.size >= 0) {
      const std::string zeros(1 << 16, '\0');
      for (int64_t left = e.size; left > 0; left -= static_cast<int64_t>(zeros.size())) {
        archive_write_data(a, zeros.data(), std::min<size_t>(zeros.size(), left));
      }
    } else if (!e.data.empty()) {
      archive_write_data(a, e.data.data(), e.data.size());
    }
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
  return path;
}

std::string Refusal(const fs::path& path, const Limits& limits = {}) {
  const auto reader = Reader::Open(path, limits);
  EXPECT_FALSE(reader.has_value());
  return reader ? "" : reader.error();
}

const Entry kIndex{.name = "index.json", .data = Index(1)};

TEST(CaptureArchive, LinksDevicesAndEscapingNamesAreRefused) {
  TempDir dir;
  const auto refused = [&](const Entry& entry, std::string_view why) {
    const fs::path path = MakeArchive(dir.path() / "x.tar.gz", {kIndex, entry});
    const std::string error = Refusal(path);
    EXPECT_NE(error.find(why), std::string::npos) << entry.name << ": " << error;
    fs::remove(path);
  };
  refused({.name = "samples/0001/sys/x", .type = AE_IFLNK, .link = "/etc/passwd"},
          "a symbolic link");
  refused({.name = "samples/0001/sys/x", .link = "index.json"}, "a hard link");
  refused({.name = "samples/0001/fifo", .type = AE_IFIFO}, "a FIFO");
  refused({.name = "samples/0001/dev", .type = AE_IFCHR}, "a device");
  refused({.name = "../x", .data = "x"}, "a name with \"..\"");
  refused({.name = "samples/0001/../../x", .data = "x"}, "a name with \"..\"");
  refused({.name = "/etc/x", .data = "x"}, "an absolute name");
  refused({.name = "index.json", .data = "{}"}, "appears twice");
  refused({.name = "index.json/x", .data = "{}"}, "is beneath a file");
}

TEST(CaptureArchive, TruncatedGzipIsAClearError) {
  TempDir dir;
  std::vector<Entry> entries{kIndex};
  // Incompressible bytes: the cut lands inside the data, not in gzip's padding.
  std::string noise(200000, '\0');
  uint32_t x = 12345;
  for (char& c : noise) c = static_cast<char>((x = x * 1103515245 + 12345) >> 24);
  entries.push_back({.name = "samples/0001/proc/meminfo", .data = noise});
  const fs::path path = MakeArchive(dir.path() / "x.tar.gz", entries);
  ASSERT_TRUE(Reader::Open(path).has_value());
  fs::resize_file(path, fs::file_size(path) / 2);
  EXPECT_NE(Refusal(path).find("truncated or damaged"), std::string::npos) << Refusal(path);
  fs::resize_file(path, 10);  // the gzip header and little more
  EXPECT_NE(Refusal(path).find("truncated or damaged"), std::string::npos) << Refusal(path);
}

TEST(CaptureArchive, GzipBombStopsAtTheBound) {
  TempDir dir;
  // 64 MiB of zeros compress to about 64 KiB: with bounds of 4 MiB a file and 8 MiB in all,
  // refused on the file; then four files of 3 MiB, each within its bound, on their sum.
  const fs::path one = MakeArchive(dir.path() / "one.tar.gz",
                                   {kIndex, {.name = "samples/0001/z", .size = 64 << 20}});
  EXPECT_LT(fs::file_size(one), 1U << 20);
  const Limits limits{.archive_bytes = 8 << 20, .archive_file_bytes = 4 << 20};
  EXPECT_NE(Refusal(one, limits).find("more than a capture's file"), std::string::npos);
  std::vector<Entry> many{kIndex};
  for (int i = 0; i < 4; ++i) {
    many.push_back({.name = "samples/0001/z" + std::to_string(i), .size = 3 << 20});
  }
  const fs::path sum = MakeArchive(dir.path() / "sum.tar.gz", many);
  EXPECT_NE(Refusal(sum, limits).find("uncompressed: refused"), std::string::npos)
      << Refusal(sum, limits);
  EXPECT_TRUE(Reader::Open(sum).has_value());  // within the default bounds
  const Limits few{.archive_entries = 3};
  EXPECT_NE(Refusal(sum, few).find("more than 3 entries"), std::string::npos);
}

TEST(CaptureArchive, NewerFormatInsideAndNotAnArchive) {
  TempDir dir;
  const fs::path newer =
      MakeArchive(dir.path() / "newer.tar.gz", {{.name = "cap/index.json", .data = Index(1, 2)}});
  EXPECT_NE(Refusal(newer).find("capture format version 2 is newer"), std::string::npos)
      << Refusal(newer);
  const fs::path none = MakeArchive(dir.path() / "none.tar.gz", {{.name = "a", .data = "b"}});
  EXPECT_NE(Refusal(none).find("no readable index.json"), std::string::npos) << Refusal(none);
  WriteText(dir.path() / "plain", "index.json");
  EXPECT_NE(Refusal(dir.path() / "plain").find("a gzip'd tar"), std::string::npos);
  WriteText(dir.path() / "gzip-not-tar", "\x1f\x8b garbage");
  EXPECT_NE(Refusal(dir.path() / "gzip-not-tar").find("archive"), std::string::npos);
}

}  // namespace
}  // namespace rdmascope::capture
