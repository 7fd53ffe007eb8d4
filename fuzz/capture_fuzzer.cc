// The capture reader (core/capture.h, docs/capture.md) on a hostile capture: index.json, then
// one file of sample 0001 read and parsed as replay parses it (the ethtool tool's text, a
// netlink reply with its headers rewritten, its review JSON, a libpfm4 encoding, a CRI or
// PodResources answer, the facts beside a preload stats file). Input: a selector
// byte (which file, and whether it is stored as an .errno), the index text, a NUL, the file's
// bytes. Or, when it starts with gzip's magic, a whole capture as a .tar.gz (core/capture_tree.h),
// opened by content as `--replay` opens it, every Reader method asked of its first samples.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "collectors/occupancy_facts.h"
#include "core/capture.h"
#include "core/capture_index.h"
#include "fuzz_input.h"
#include "fuzz_tree.h"
#include "sys/ethtool_capture.h"
#include "sys/grpc_capture.h"
#include "sys/libpfm_capture.h"
#include "sys/netlink_capture.h"
#include "sys/rdma_netlink.h"

namespace {

constexpr const char* kFiles[] = {"ethtool/eth0/statistics",      "ethtool/eth0/driver",
                                  "ethtool/eth0/coalesce",        "ethtool/eth0/priv-flags",
                                  "netlink/rdma/get.bin",         "sys/class/net/eth0/mtu",
                                  "perf/libpfm/cycles",           "grpc/cri.json",
                                  "grpc/podresources.json",       "run/rdmascope.stat.json",
                                  "run/rdmascope/a.occ.stat.json"};

std::filesystem::path Root() {
  static const std::filesystem::path root = [] {
    std::string dir = (std::filesystem::temp_directory_path() / "rdmascope-fuzz-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) std::abort();
    static std::string to_remove;
    to_remove = dir;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return std::filesystem::path(dir);
  }();
  return root;
}

void Archive(const uint8_t* data, size_t size) {
  using namespace rdmascope;
  const std::filesystem::path path = Root() / "capture.tar.gz";
  fuzz::WriteFile(path, std::string_view(reinterpret_cast<const char*>(data), size));
  // Bounds small enough for the fuzzer's memory limit: a bomb stops at them.
  auto reader = capture::Reader::Open(
      path, capture::Limits{.archive_bytes = 8 << 20, .archive_entries = 10000});
  if (!reader) return;
  for (size_t sample = 1; sample <= std::min<size_t>(reader->sample_count(), 2); ++sample) {
    for (const char* rel : {"sys/class/net/eth0", "sys/class/net/eth0/mtu", "ethtool/eth0",
                            "ethtool/eth0/statistics", "sys/class/net/eth0/device"}) {
      (void)reader->ReadFile(sample, rel, 4096);
      (void)reader->List(sample, rel);
      (void)reader->ReadLink(sample, rel);
      (void)reader->Exists(sample, rel);
      (void)reader->CheckDirectory(sample, rel);
      if (auto dir = reader->OpenDirectory(sample, rel)) {
        if (auto names = reader->ListAt(*dir)) {
          for (const std::string& name : *names) (void)reader->ReadFileAt(*dir, name, 4096);
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rdmascope;
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    Archive(data, size);
    return 0;
  }
  fuzz::Input input(data, size);
  const uint8_t selector = input.Byte();
  const std::string_view rest = input.RestText();
  const size_t nul = rest.find('\0');
  const std::string_view index = rest.substr(0, nul);
  const std::string_view payload = nul == std::string_view::npos ? "" : rest.substr(nul + 1);
  const std::string rel = kFiles[(selector & 0x7f) % std::size(kFiles)];
  const bool as_errno = (selector & 0x80) != 0;

  const std::filesystem::path root = Root();
  std::error_code ec;
  std::filesystem::remove_all(root / "samples", ec);
  fuzz::WriteFile(root / "index.json", index);
  fuzz::WriteFile(root / "samples/0001" / (rel + (as_errno ? ".errno" : "")), payload);

  auto reader = capture::Reader::Open(root);
  if (!reader) return 0;
  // What doctor --replay reads of the index: every sample time it accepts is one it can read.
  if (const auto facts = capture::ReadIndexFacts(reader->index_text())) {
    if (facts->sample_seconds.size() != facts->sample_times.size()) std::abort();
    for (const std::string& time : facts->sample_times) {
      if (!capture::ParseUtcMillis(time)) std::abort();
    }
  }
  for (size_t sample = 1; sample <= std::min<size_t>(reader->sample_count(), 2); ++sample) {
    (void)reader->List(sample, "ethtool/eth0");
    (void)reader->Exists(sample, rel);
    auto bytes = reader->ReadFile(sample, rel, 1 << 20);
    if (!bytes) continue;
    (void)sys::ParseEthtoolStats(*bytes);
    (void)sys::ParseDriverInfo(*bytes);
    (void)sys::ParseCoalesce(*bytes);
    (void)sys::ParsePrivateFlags(*bytes);
    (void)sys::DecodeNetlinkJson(*bytes, selector & 1 ? 4 : 0);
    sys::RewriteNetlinkHeaders(*bytes, 7, 0);
    std::vector<sys::RdmaDeviceResources> devices;
    (void)sys::ParseDeviceReply(bytes->data(), bytes->size(), 7, devices);
    // An encoding the replay accepts is one its own text gives back exactly.
    if (const auto answer = sys::ParseLibpfmAnswer(*bytes)) {
      const auto again = sys::ParseLibpfmAnswer(sys::FormatLibpfmAnswer(*answer));
      if (!again || again->has_value() != answer->has_value()) std::abort();
      if (answer->has_value() && std::memcmp(&**again, &**answer, sizeof(perf_event_attr)) != 0) {
        std::abort();
      }
    }
    // Facts the replay accepts give back the same stat when written again.
    const auto same = [](const struct stat& st) {
      const auto again = occupancy_facts::ParseStat(occupancy_facts::StatJson(st), "again");
      if (!again || again->st_mode != st.st_mode || again->st_uid != st.st_uid ||
          again->st_dev != st.st_dev || again->st_ino != st.st_ino ||
          again->st_size != st.st_size) {
        std::abort();
      }
    };
    if (const auto facts = occupancy_facts::ParseNameFacts(*bytes)) {
      same(facts->lstat);
      if (facts->stat) same(*facts->stat);
    }
    if (const auto facts = occupancy_facts::ParseDirectoryFacts(*bytes)) same(facts->st);
    // A gRPC answer the replay accepts is one its own text gives back: the same endpoint and
    // as many containers or devices (or the same error).
    if (const auto cri = sys::ParseCriAnswer(*bytes)) {
      const auto again = sys::ParseCriAnswer(sys::FormatCriAnswer(cri->endpoint, cri->answer));
      if (!again || again->endpoint != cri->endpoint ||
          again->answer.has_value() != cri->answer.has_value() ||
          (cri->answer && again->answer->size() != cri->answer->size())) {
        std::abort();
      }
    }
    if (const auto pods = sys::ParsePodResourcesAnswer(*bytes)) {
      const auto again =
          sys::ParsePodResourcesAnswer(sys::FormatPodResourcesAnswer(pods->endpoint, pods->answer));
      if (!again || again->endpoint != pods->endpoint ||
          again->answer.has_value() != pods->answer.has_value() ||
          (pods->answer && again->answer->size() != pods->answer->size())) {
        std::abort();
      }
    }
  }
  return 0;
}
