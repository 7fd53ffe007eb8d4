// The link collector (collectors/link*): the staggered schedule on a fake clock, static pages
// cached between their hourly reads, the series and values of three modules (the decoder's
// fixtures, unit/module_eeprom_fixtures.h) and of ports without a module source, the
// background refresher (a scrape never reads a module), capture -> replay, hostile pages.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "collectors/link.h"
#include "collectors/link_schedule.h"
#include "core/capture.h"
#include "core/redact.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"
#include "unit/module_eeprom_fixtures.h"

namespace rdmascope {
namespace {

using namespace std::chrono_literals;
using testing::FakeModule;
using TimePoint = std::chrono::steady_clock::time_point;

// A clock the test moves.
struct FakeClock {
  TimePoint now = TimePoint() + 1000h;
  ModuleReads::Clock Function() {
    return [this] { return now; };
  }
};

// Modules by interface; an interface without one answers `missing` (EIO: an empty cage;
// EOPNOTSUPP: a driver without module access).
struct FakeHost {
  std::map<std::string, FakeModule> modules;
  std::map<std::string, int> missing;
  std::atomic<int> reads{0};
  ModuleReads::Read Function() {
    return [this](std::string_view netdev, const sys::ModulePageKey& key, uint8_t offset,
                  uint8_t length) -> std::expected<std::string, int> {
      ++reads;
      const std::string name(netdev);
      if (const auto it = missing.find(name); it != missing.end()) {
        return std::unexpected(it->second);
      }
      const auto it = modules.find(name);
      if (it == modules.end()) return std::unexpected(EIO);
      std::string bytes(length, '\0');
      if (!it->second.Reader()(key, offset, length, reinterpret_cast<uint8_t*>(bytes.data()))) {
        return std::unexpected(EIO);
      }
      return bytes;
    };
  }
};

class FakePorts : public LinkPortSource {
 public:
  explicit FakePorts(std::vector<LinkPort> ports) : ports_(std::move(ports)) {}
  std::vector<LinkPort> Read() const override { return ports_; }

 private:
  std::vector<LinkPort> ports_;
};

// The host of the golden file: mlx5_0 port 1 on eth2 (QSFP-DD), mlx5_0 port 2 on eth3
// (QSFP28), rxe0 on veth0 (EOPNOTSUPP, no PMA counters), mlx5_1 a native InfiniBand port (PMA
// counters, up at 4X NDR), eth4 an SFP with no RDMA port, eth5 an empty cage.
std::vector<LinkPort> GoldenPorts() {
  return {{.device = "mlx5_0", .port = "1", .netdev = "eth2"},
          {.device = "mlx5_0", .port = "2", .netdev = "eth3"},
          {.device = "mlx5_1",
           .port = "1",
           .native_ib = true,
           .ib_counters = true,
           .ib_rate = IbLinkRate{.width_lanes = 4, .lane_bits_per_second = 100e9}},
          {.device = "rxe0", .port = "1", .netdev = "veth0", .ib_counters = false},
          {.netdev = "eth4"},
          {.netdev = "eth5"}};
}

void FillGoldenHost(FakeHost& host) {
  host.modules.emplace("eth2", testing::QsfpDd());
  host.modules.emplace("eth3", testing::Qsfp28());
  host.modules.emplace("eth4", testing::InternallyCalibratedSfp());
  // The SFP with a valid TX power table (A2h 24..31): 2 mW / 0.1 mW / 1.5 mW / 0.2 mW.
  host.modules.at("eth4").Put(0x51, 0, 24, {0x4E, 0x20, 0x03, 0xE8, 0x3A, 0x98, 0x07, 0xD0});
  host.missing["veth0"] = EOPNOTSUPP;
  host.missing["eth5"] = EIO;
}

std::string Scrape(const Collector& collector, CollectResult* result = nullptr) {
  MetricSet set;
  const CollectResult r = collector.Collect(set);
  if (result != nullptr) *result = r;
  return testing::Serialise(set.Take());
}

// The value of one series of an exposition; NaN when it is not there.
double Value(const std::string& text, const std::string& series) {
  const size_t at = text.find(series + " ");
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return std::nan("");
  return std::stod(text.substr(at + series.size() + 1));
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

LinkOptions Synchronous() {
  return {.refresh_interval = 0s, .static_refresh_interval = 0s, .max_netdevs = 64};
}

// ---- the schedule

TEST(LinkSchedule, StaggeredSlotsFirstSightAtOnceThenOneIntervalApart) {
  const TimePoint epoch = TimePoint() + 100s;
  LinkSchedule schedule(30s, epoch);
  schedule.SetModules({"a", "b", "c", "d"});
  // 30 s over 4 modules: slots 0, 7.5, 15, 22.5 s.
  EXPECT_EQ(schedule.SlotOf("a"), 0s);
  EXPECT_EQ(schedule.SlotOf("b"), 7500ms);
  EXPECT_EQ(schedule.SlotOf("d"), 22500ms);
  // Never read: due at once, all of them.
  for (const char* name : {"a", "b", "c", "d"}) EXPECT_TRUE(schedule.Due(name, epoch)) << name;
  EXPECT_EQ(schedule.NextDue(), TimePoint::min());
  for (const char* name : {"a", "b", "c", "d"}) schedule.Done(name, epoch + 1s);
  // Each one's first slot at least 15 s after the read (epoch + 16 s): a at 30 s, b at 37.5
  // (its 7.5 is too soon), c at 45 (15 is too soon), d at 22.5.
  EXPECT_FALSE(schedule.Due("a", epoch + 29s));
  EXPECT_TRUE(schedule.Due("a", epoch + 30s));
  EXPECT_FALSE(schedule.Due("b", epoch + 37499ms));
  EXPECT_TRUE(schedule.Due("b", epoch + 37500ms));
  EXPECT_FALSE(schedule.Due("c", epoch + 44s));
  EXPECT_TRUE(schedule.Due("c", epoch + 45s));
  EXPECT_FALSE(schedule.Due("d", epoch + 22499ms));
  EXPECT_TRUE(schedule.Due("d", epoch + 22500ms));
  EXPECT_EQ(schedule.NextDue(), epoch + 22500ms);
  // Stable: read at its slot, the next read is one interval later, to the tick.
  schedule.Done("b", epoch + 37500ms);
  EXPECT_FALSE(schedule.Due("b", epoch + 67499ms));
  EXPECT_TRUE(schedule.Due("b", epoch + 67500ms));
  // Deferred (a driver without module access): not before the time given.
  schedule.Defer("a", epoch + 1h);
  EXPECT_FALSE(schedule.Due("a", epoch + 59min));
  EXPECT_TRUE(schedule.Due("a", epoch + 1h));
  // A module set of 2: slots 0 and 15 s; a forgotten name is never due.
  schedule.SetModules({"b", "e"});
  EXPECT_EQ(schedule.SlotOf("e"), 15s);
  EXPECT_FALSE(schedule.Due("a", epoch + 2h));
  EXPECT_TRUE(schedule.Due("e", epoch));
}

TEST(LinkSchedule, IntervalZeroIsDueAtEveryPass) {
  LinkSchedule schedule(0s, TimePoint());
  schedule.SetModules({"a"});
  schedule.Done("a", TimePoint() + 5s);
  EXPECT_TRUE(schedule.Due("a", TimePoint() + 5s));
}

// ---- module reads: staggered, static pages cached

TEST(LinkModules, StaticPagesOnFirstSightAndHourlyDynamicOnesAtEachSlot) {
  FakeClock clock;
  FakeHost host;
  host.modules.emplace("eth2", testing::QsfpDd());
  host.modules.emplace("eth3", testing::Qsfp28());
  ModuleReads reads({.dynamic = 30s, .static_pages = 1h}, host.Function(), clock.Function());
  reads.SetNetdevs({"eth2", "eth3"});
  EXPECT_EQ(reads.Pass(), 2U);  // first sight: both at once
  const int whole = host.reads;
  ASSERT_TRUE(reads.states().at("eth2").reading);
  EXPECT_EQ(reads.states().at("eth2").reading->vendor, "ACME");
  EXPECT_EQ(reads.Pass(), 0U);  // nothing due
  // The module changes: its identity and temperature (CMIS lower page 14: 50 C).
  host.modules.at("eth2").Text(0x50, 0, 129, 16, "OTHER");
  host.modules.at("eth2").Put(0x50, 0, 14, {0x32, 0x00});
  // eth2's slot is 0, eth3's 15 s: each is next read at its first slot 15 s or more after the
  // first read, eth3 at +15 s, eth2 at +30 s.
  clock.now += 15s;
  EXPECT_EQ(reads.Pass(), 1U);
  const int before = host.reads;
  clock.now += 15s;
  EXPECT_EQ(reads.Pass(), 1U);
  const int dynamic = host.reads - before;
  EXPECT_EQ(reads.states().at("eth2").reading->temperature_celsius, 50);
  EXPECT_EQ(reads.states().at("eth2").reading->vendor, "ACME");  // static: from the cache
  // CMIS: byte 0 (the module still there, of the same type), lower page 1..3, 14..17, 39..41
  // and page 11h; not 85..88 or pages 00h, 01h and 02h.
  EXPECT_EQ(dynamic, 5);
  EXPECT_LT(dynamic, whole);
  clock.now += 15s;
  EXPECT_EQ(reads.Pass(), 1U);  // eth3 again at +45 s, one interval after its last read
  // An hour after the first read the static pages are read again.
  clock.now += 1h;
  reads.Pass();
  EXPECT_EQ(reads.states().at("eth2").reading->vendor, "OTHER");
}

TEST(LinkModules, AModuleGoneLeavesNoReadingAndTheNextOneIsReadWhole) {
  FakeClock clock;
  FakeHost host;
  host.modules.emplace("eth2", testing::QsfpDd());
  ModuleReads reads({.dynamic = 30s, .static_pages = 1h}, host.Function(), clock.Function());
  reads.SetNetdevs({"eth2"});
  reads.Pass();
  EXPECT_TRUE(reads.states().at("eth2").available);
  host.modules.erase("eth2");  // pulled: EIO
  clock.now += 30s;
  reads.Pass();
  const ModuleState& gone = reads.states().at("eth2");
  EXPECT_FALSE(gone.available);
  EXPECT_FALSE(gone.reading);  // nothing of the last reading stays
  EXPECT_FALSE(gone.read_seconds);
  EXPECT_EQ(gone.errors.at("eio"), 1U);
  // Another module in the cage, read within the hour: its identity, not the cached one's.
  host.modules.emplace("eth2", testing::Qsfp28());
  clock.now += 30s;
  reads.Pass();
  ASSERT_TRUE(reads.states().at("eth2").reading);
  EXPECT_EQ(reads.states().at("eth2").reading->part_number, "QSFP-100G-SR4");
}

TEST(LinkModules, ADriverWithoutModuleAccessIsAskedAgainHourlyAndNotCounted) {
  FakeClock clock;
  FakeHost host;
  host.missing["veth0"] = EOPNOTSUPP;
  host.missing["eth9"] = EPERM;
  ModuleReads reads({.dynamic = 30s, .static_pages = 1h}, host.Function(), clock.Function());
  reads.SetNetdevs({"veth0", "eth9"});
  EXPECT_EQ(reads.Pass(), 2U);
  EXPECT_FALSE(reads.states().at("veth0").available);
  EXPECT_TRUE(reads.states().at("veth0").errors.empty());
  EXPECT_NE(reads.states().at("veth0").why.find("EOPNOTSUPP"), std::string::npos);
  EXPECT_NE(reads.states().at("eth9").why.find("CAP_NET_ADMIN"), std::string::npos);
  EXPECT_EQ(reads.states().at("eth9").errors.at("eperm"), 1U);
  clock.now += 59min;
  EXPECT_EQ(reads.Pass(), 0U);
  clock.now += 1min;
  EXPECT_EQ(reads.Pass(), 2U);
}

// A collector being destroyed stops its pass after the module it reads (each read of a hung
// module is bounded by the netlink timeout; 64 of them would hold shutdown).
TEST(LinkModules, APassStopsWhenAsked) {
  FakeClock clock;
  FakeHost host;
  host.modules.emplace("eth2", testing::QsfpDd());
  host.modules.emplace("eth3", testing::Qsfp28());
  ModuleReads reads({.dynamic = 30s, .static_pages = 1h}, host.Function(), clock.Function());
  reads.SetNetdevs({"eth2", "eth3"});
  int asked = 0;
  EXPECT_EQ(reads.Pass([&] { return ++asked > 1; }), 1U);
  EXPECT_TRUE(reads.states().contains("eth2"));
  EXPECT_FALSE(reads.states().contains("eth3"));
  EXPECT_EQ(reads.Pass(), 1U);  // the next pass reads the rest, still due
}

TEST(LinkModules, DynamicRangesByMemoryMap) {
  const sys::ModulePageKey lower{0x50, 0, 0};
  EXPECT_TRUE(IsDynamicRange(0x03, {0x51, 0, 0}, 96, 10));
  EXPECT_FALSE(IsDynamicRange(0x03, {0x51, 0, 0}, 0, 40));   // thresholds
  EXPECT_FALSE(IsDynamicRange(0x03, {0x51, 0, 0}, 56, 36));  // calibration
  EXPECT_FALSE(IsDynamicRange(0x03, lower, 1, 95));          // A0h identity
  EXPECT_TRUE(IsDynamicRange(0x11, lower, 22, 6));
  EXPECT_TRUE(IsDynamicRange(0x11, lower, 34, 24));
  EXPECT_FALSE(IsDynamicRange(0x11, lower, 1, 2));
  EXPECT_FALSE(IsDynamicRange(0x11, {0x50, 3, 0}, 128, 72));
  EXPECT_TRUE(IsDynamicRange(0x18, lower, 1, 3));   // byte 3: module state
  EXPECT_TRUE(IsDynamicRange(0x18, lower, 39, 3));  // byte 41: fault cause
  EXPECT_FALSE(IsDynamicRange(0x18, lower, 85, 4));
  EXPECT_TRUE(IsDynamicRange(0x18, {0x50, 0x11, 1}, 154, 48));
  EXPECT_FALSE(IsDynamicRange(0x18, {0x50, 2, 0}, 128, 72));
  EXPECT_TRUE(IsDynamicRange(0x42, lower, 1, 1));  // unknown map: nothing cached
}

// ---- series

TEST(LinkCollector, SeriesOfThreeModulesAndOfPortsWithoutOne) {
  FakeClock clock;
  FakeHost host;
  FillGoldenHost(host);
  LinkCollector collector(Synchronous(), std::make_unique<FakePorts>(GoldenPorts()),
                          host.Function(), clock.Function());
  CollectResult result;
  const std::string text = Scrape(collector, &result);
  EXPECT_FALSE(result.no_data);
  EXPECT_EQ(result.detail, "6 ports, 3 modules read");
  EXPECT_TRUE(testing::MatchesGolden(text, "link.prom"));
  const std::string eth2 = R"(device="mlx5_0",port="1",netdev="eth2")";
  // Values worked by hand in unit/module_eeprom_fixtures.h.
  EXPECT_TRUE(Has(text, "rdma_link_source_available{" + eth2 + R"(,source="module"} 1)"));
  EXPECT_TRUE(Has(text, "rdma_link_module_temperature_celsius{" + eth2 + "} 45.5"));
  EXPECT_NEAR(Value(text, "rdma_link_module_lane_rx_power_watts{" + eth2 + R"(,lane="1"})"), 0.8e-3,
              1e-15);
  EXPECT_TRUE(Has(text, "rdma_link_module_lane_tx_bias_amperes{" + eth2 + R"(,lane="4"} 0.016)"));
  EXPECT_FALSE(Has(text, "rdma_link_module_lane_rx_power_watts{" + eth2 + R"(,lane="5"} 0)"));
  EXPECT_TRUE(Has(text, "rdma_link_module_state{" + eth2 + "} 3"));
  // Host interface 400GAUI-8 C2M; the QSFP28's extended code 100GBASE-SR4; the SFP's 10.3 GBd.
  EXPECT_TRUE(Has(text, "rdma_link_module_max_speed_bits_per_second{" + eth2 + "} 400000000000"));
  EXPECT_TRUE(Has(text, R"(rdma_link_module_max_speed_bits_per_second{device="mlx5_0",port="2",)"
                        R"(netdev="eth3"} 100000000000)"));
  EXPECT_TRUE(Has(text, R"(rdma_link_module_max_speed_bits_per_second{device="",port="",)"
                        R"(netdev="eth4"} 10000000000)"));
  EXPECT_TRUE(
      Has(text, "rdma_link_module_state_info{" + eth2 + R"(,state="ready",fault_cause="none"} 1)"));
  EXPECT_TRUE(Has(text, "rdma_link_module_temperature_threshold_celsius{" + eth2 +
                            R"(,level="alarm",bound="high"} 75)"));
  // The QSFP-DD's RX power table is all zero: said invalid, and no threshold series.
  EXPECT_TRUE(
      Has(text, "rdma_link_module_thresholds_valid{" + eth2 + R"(,quantity="rx_power"} 0)"));
  EXPECT_EQ(text.find("rdma_link_module_rx_power_threshold_watts{" + eth2), std::string::npos);
  // No module source: 0, and no other series of the port.
  EXPECT_TRUE(Has(
      text,
      R"(rdma_link_source_available{device="rxe0",port="1",netdev="veth0",source="module"} 0)"));
  EXPECT_TRUE(Has(
      text, R"(rdma_link_source_available{device="mlx5_1",port="1",netdev="",source="module"} 0)"));
  EXPECT_TRUE(Has(
      text, R"(rdma_link_source_available{device="",port="",netdev="eth5",source="module"} 0)"));
  EXPECT_EQ(text.find(R"(netdev="veth0",reason)"), std::string::npos);  // EOPNOTSUPP: no error
  EXPECT_TRUE(
      Has(text,
          R"(rdma_link_module_read_errors_total{device="",port="",netdev="eth5",reason="eio"} 1)"));
  EXPECT_EQ(text.find(R"(rdma_link_module_temperature_celsius{device="",port="",netdev="eth5")"),
            std::string::npos);
  EXPECT_TRUE(Has(
      text,
      R"(rdma_link_module_lane_rx_power_watts{device="",port="",netdev="eth4",lane="1"} 0.0004)"));
}

TEST(LinkCollector, OverTheBoundListedNotRead) {
  FakeClock clock;
  FakeHost host;
  FillGoldenHost(host);
  std::vector<LinkPort> ports = GoldenPorts();
  ports[1].over_limit = true;
  LinkCollector collector(Synchronous(), std::make_unique<FakePorts>(ports), host.Function(),
                          clock.Function());
  const std::string text = Scrape(collector);
  EXPECT_TRUE(Has(
      text,
      R"(rdma_link_source_available{device="mlx5_0",port="2",netdev="eth3",source="module"} 0)"));
  EXPECT_EQ(text.find(R"(netdev="eth3"})"), std::string::npos);
}

// ---- the background refresher

TEST(LinkCollector, ScrapesServeTheRefreshersReadingAndNeverReadAModule) {
  FakeHost host;
  FillGoldenHost(host);
  // Real clock; an hour between reads, so only the first pass reads.
  LinkCollector collector({.refresh_interval = 1h, .static_refresh_interval = 1h},
                          std::make_unique<FakePorts>(GoldenPorts()), host.Function());
  CollectResult result;
  Scrape(collector, &result);  // starts the refresher; nothing read yet is no data, not zeros
  ASSERT_TRUE(collector.WaitForPasses(1, 10s));
  const int reads = host.reads;
  EXPECT_GT(reads, 0);
  std::string text;
  for (int i = 0; i < 20; ++i) text = Scrape(collector, &result);
  EXPECT_EQ(host.reads, reads);  // the scrapes read nothing
  EXPECT_EQ(result.detail, "6 ports, 3 modules read");
  // Synchronous and background readings map alike.
  FakeClock clock;
  LinkCollector synchronous(Synchronous(), std::make_unique<FakePorts>(GoldenPorts()),
                            host.Function(), clock.Function());
  auto strip = [](const std::string& s) {
    std::string out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) {
      if (line.find("read_duration") == std::string::npos) out += line + "\n";
    }
    return out;
  };
  EXPECT_EQ(strip(text), strip(Scrape(synchronous)));
}

// ---- capture and replay

using Installed = testing::InstalledSession;

std::string RecordOrReplay(const LinkCollector& collector) {
  std::string text = Scrape(collector);
  // How long a read took is this run's, not the module's.
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("rdma_link_module_read_duration_seconds") == std::string::npos) {
      out += line + "\n";
    }
  }
  return out;
}

std::vector<std::string> Record(FakeHost& host, const std::filesystem::path& dir, int samples,
                                std::shared_ptr<const redact::Redactor> redactor = nullptr) {
  auto writer = capture::Writer::Create(dir, false).value();
  if (redactor) writer->SetRedactor(redactor, true);
  std::vector<std::string> scrapes;
  {
    Installed session(capture::Session::Recording(capture::Layout("/sys", "/proc"), writer.get()));
    FakeClock clock;
    LinkCollector collector(Synchronous(), std::make_unique<FakePorts>(GoldenPorts()),
                            host.Function(), clock.Function());
    for (int n = 1; n <= samples; ++n) {
      EXPECT_TRUE(writer->BeginSample(n).has_value());
      scrapes.push_back(RecordOrReplay(collector));
      EXPECT_TRUE(writer->CommitSample().has_value());
      // Between the samples the QSFP-DD warms up by 1 C (lower page 14: 46.5 C).
      host.modules.at("eth2").Put(0x50, 0, 14, {0x2E, 0x80});
    }
    EXPECT_TRUE(writer->WriteIndex("test", {"link"}).has_value());
  }
  return scrapes;
}

// Replays samples 1..samples in order, each by one collection of one collector; with `from`,
// a fresh collector whose first collection is sample `from` (doctor and check start anywhere:
// each sample must hold every page it replays).
std::vector<std::string> Replay(const std::filesystem::path& dir, int samples, int from = 1) {
  auto session = capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                             capture::Reader::Open(dir).value());
  capture::Session* replaying = session.get();
  Installed installed(std::move(session));
  FakeClock clock;
  LinkCollector collector(
      Synchronous(), std::make_unique<FakePorts>(GoldenPorts()),
      [](std::string_view, const sys::ModulePageKey&, uint8_t,
         uint8_t) -> std::expected<std::string, int> {
        ADD_FAILURE() << "a module read reached the host under replay";
        return std::unexpected(EIO);
      },
      clock.Function());
  for (int n = 1; n < from; ++n) replaying->NextSample();
  std::vector<std::string> scrapes;
  for (int n = from; n <= samples; ++n) {
    replaying->NextSample();  // collection n replays sample n
    scrapes.push_back(RecordOrReplay(collector));
  }
  return scrapes;
}

TEST(LinkCollector, CaptureThenReplayGivesEqualSeries) {
  testing::TempDir dir;
  FakeHost host;
  FillGoldenHost(host);
  const auto recorded = Record(host, dir.path() / "cap", 2);
  const auto replayed = Replay(dir.path() / "cap", 2);
  ASSERT_EQ(recorded.size(), 2U);
  EXPECT_NE(recorded[0], recorded[1]);  // the temperature moved
  EXPECT_EQ(replayed, recorded);
  // The second sample alone, by a collector that never saw the first: it holds every page
  // (its counters count this process's reads: one, not two).
  const auto without_counters = [](const std::string& text) {
    std::string out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (line.find("_total") == std::string::npos) out += line + "\n";
    }
    return out;
  };
  const auto alone = Replay(dir.path() / "cap", 2, 2);
  ASSERT_EQ(alone.size(), 1U);
  EXPECT_EQ(without_counters(alone[0]), without_counters(recorded[1]));
  EXPECT_NE(replayed[1].find("rdma_link_module_temperature_celsius{device=\"mlx5_0\",port=\"1\","
                             "netdev=\"eth2\"} 46.5"),
            std::string::npos);
}

TEST(LinkCollector, ARedactedCaptureReplaysTheHashedSerial) {
  testing::TempDir dir;
  FakeHost host;
  FillGoldenHost(host);
  auto redactor = std::make_shared<const redact::Redactor>(
      redact::Redactor::WithKey("0123456789abcdef-fleet-key").value());
  const auto recorded = Record(host, dir.path() / "cap", 1, redactor);
  const auto replayed = Replay(dir.path() / "cap", 1);
  EXPECT_NE(recorded[0].find(R"(serial="DD0001")"), std::string::npos);
  EXPECT_EQ(replayed[0].find(R"(serial="DD0001")"), std::string::npos);
  EXPECT_NE(replayed[0].find(R"(vendor="ACME")"), std::string::npos);
}

// ---- hostile pages

TEST(LinkCollector, HostileHalvesInACaptureNeverCrash) {
  testing::TempDir dir;
  FakeHost host;
  FillGoldenHost(host);
  Record(host, dir.path() / "cap", 1);
  const auto module = dir.path() / "cap/samples/0001/ethtool";
  std::mt19937 random(40);
  // eth2: every half garbage of the right size; eth3: every half cut short; eth4: an errno
  // file that names no errno.
  for (const auto& entry : std::filesystem::directory_iterator(module / "eth2/module")) {
    std::string garbage(128, '\0');
    for (char& c : garbage) c = static_cast<char>(random());
    std::ofstream(entry.path(), std::ios::binary | std::ios::trunc) << garbage;
  }
  for (const auto& entry : std::filesystem::directory_iterator(module / "eth3/module")) {
    std::ofstream(entry.path(), std::ios::binary | std::ios::trunc) << std::string(3, 'x');
  }
  for (const auto& entry : std::filesystem::directory_iterator(module / "eth4/module")) {
    std::filesystem::remove(entry.path());
  }
  std::ofstream(module / "eth4/module/i2c-0x50.page-0x00.bank-0.lower.errno") << "NOT AN ERRNO\n";
  const std::string text = Replay(dir.path() / "cap", 1)[0];
  // Short halves are refused: no reading, never a page of zeros.
  EXPECT_TRUE(Has(
      text,
      R"(rdma_link_source_available{device="mlx5_0",port="2",netdev="eth3",source="module"} 0)"));
  EXPECT_TRUE(Has(
      text, R"(rdma_link_source_available{device="",port="",netdev="eth4",source="module"} 0)"));
  EXPECT_EQ(text.find(R"(rdma_link_module_temperature_celsius{device="mlx5_0",port="2")"),
            std::string::npos);
}

TEST(LinkCollector, RandomModulesDecodeToFiniteSeriesOrNone) {
  std::mt19937 random(4040);
  for (int round = 0; round < 300; ++round) {
    FakeHost host;
    FakeModule module;
    // A known identifier half the time, so that the memory maps' paths run.
    static constexpr uint8_t kIds[] = {0x03, 0x0c, 0x0d, 0x11, 0x18, 0x19, 0x1e};
    static constexpr uint8_t kAddresses[] = {0x50, 0x51};
    static constexpr uint8_t kPages[] = {0x00, 0x01, 0x02, 0x03, 0x11};
    for (uint8_t i2c : kAddresses) {
      for (uint8_t page : kPages) {
        for (uint8_t bank = 0; bank < 4; ++bank) {
          if (random() % 4 == 0) continue;  // some pages missing
          auto& bytes = module.Page(i2c, page, bank);
          for (auto& b : bytes) b = static_cast<uint8_t>(random());
        }
      }
    }
    if (random() % 2 == 0) module.Put(0x50, 0, 0, {kIds[random() % std::size(kIds)]});
    host.modules.emplace("eth2", std::move(module));
    FakeClock clock;
    LinkCollector collector(Synchronous(),
                            std::make_unique<FakePorts>(std::vector<LinkPort>{
                                {.device = "mlx5_0", .port = "1", .netdev = "eth2"}}),
                            host.Function(), clock.Function());
    MetricSet set;
    collector.Collect(set);
    for (const auto& family : set.Take()) {
      for (const auto& metric : family.metric) {
        const double value = family.type == prometheus::MetricType::Counter ? metric.counter.value
                                                                            : metric.gauge.value;
        EXPECT_TRUE(std::isfinite(value)) << family.name << " round " << round;
      }
    }
  }
}

}  // namespace
}  // namespace rdmascope
