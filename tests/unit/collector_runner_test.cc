#include "core/collector_runner.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <thread>

namespace rdmascope {
namespace {

constexpr MetricDesc kValue{"test_value", "help", prometheus::MetricType::Gauge};

class Fixed : public Collector {
 public:
  CollectResult Collect(MetricSet& out) const override {
    out.Add(kValue, {{"from", "fixed"}}, 1);
    return {.detail = "one series"};
  }
};

class Throwing : public Collector {
 public:
  CollectResult Collect(MetricSet& out) const override {
    out.Add(kValue, {{"from", "throwing"}}, 2);  // partial data must not leak out
    throw std::runtime_error("device exploded");
  }
};

class ThrowingNonStd : public Collector {
 public:
  CollectResult Collect(MetricSet&) const override { throw 42; }
};

class Empty : public Collector {
 public:
  CollectResult Collect(MetricSet&) const override { return {.no_data = true, .detail = "none"}; }
};

std::shared_ptr<CollectorRunner> MakeRunner() {
  std::vector<NamedCollector> collectors;
  collectors.push_back({"fixed", std::make_unique<Fixed>()});
  collectors.push_back({"throwing", std::make_unique<Throwing>()});
  collectors.push_back({"weird", std::make_unique<ThrowingNonStd>()});
  collectors.push_back({"empty", std::make_unique<Empty>()});
  return std::make_shared<CollectorRunner>(std::move(collectors), BuildInfo{"1.2.3", "abc"},
                                           "/proc");
}

const prometheus::MetricFamily* Find(const std::vector<prometheus::MetricFamily>& families,
                                     const std::string& name) {
  for (const auto& family : families) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

double Labelled(const prometheus::MetricFamily& family, const std::string& collector) {
  for (const auto& metric : family.metric) {
    if (metric.label.at(0).value == collector) return metric.gauge.value;
  }
  return -1;
}

TEST(CollectorRunner, IsolatesFailuresAndReportsHealth) {
  const auto runner = MakeRunner();
  const auto families = runner->Collect();
  const auto* values = Find(families, "test_value");
  ASSERT_NE(values, nullptr);
  ASSERT_EQ(values->metric.size(), 1U) << "only the healthy collector's series";
  const auto* success = Find(families, "rdmascope_collector_success");
  ASSERT_NE(success, nullptr);
  EXPECT_EQ(Labelled(*success, "fixed"), 1);
  EXPECT_EQ(Labelled(*success, "throwing"), 0);
  EXPECT_EQ(Labelled(*success, "weird"), 0);
  EXPECT_EQ(Labelled(*success, "empty"), 1);
  EXPECT_EQ(Labelled(*Find(families, "rdmascope_collector_no_data"), "empty"), 1);
  ASSERT_NE(Find(families, "rdmascope_collector_duration_seconds"), nullptr);
  const auto* build = Find(families, "rdmascope_build_info");
  ASSERT_NE(build, nullptr);
  EXPECT_EQ(build->metric[0].label[0].value, "1.2.3");

  const auto states = runner->States();
  EXPECT_EQ(states[1].health, CollectorHealth::kFailed);
  EXPECT_EQ(states[1].detail, "device exploded");
  EXPECT_EQ(states[3].health, CollectorHealth::kNoData);
}

// Two collectors filling one family with different labels (as the mr and verbs collectors
// share rdmascope_probe_attached) give one family; a clash of types is dropped and counted.
class Sharing : public Collector {
 public:
  explicit Sharing(std::string from, prometheus::MetricType type) : from_(from), type_(type) {}
  CollectResult Collect(MetricSet& out) const override {
    out.Add({"test_value", "help", type_}, {{"from", from_}}, 3);
    return {};
  }

 private:
  std::string from_;
  prometheus::MetricType type_;
};

TEST(CollectorRunner, CollectorsSharingAFamilyGiveOneFamily) {
  std::vector<NamedCollector> collectors;
  collectors.push_back({"fixed", std::make_unique<Fixed>()});
  collectors.push_back(
      {"second", std::make_unique<Sharing>("second", prometheus::MetricType::Gauge)});
  collectors.push_back(
      {"clash", std::make_unique<Sharing>("clash", prometheus::MetricType::Counter)});
  collectors.push_back(
      {"again", std::make_unique<Sharing>("second", prometheus::MetricType::Gauge)});
  CollectorRunner runner(std::move(collectors), BuildInfo{"1", "a"}, "/proc");
  const auto families = runner.Collect();
  size_t named = 0;
  for (const auto& family : families) named += family.name == "test_value" ? 1 : 0;
  EXPECT_EQ(named, 1U);
  const auto* values = Find(families, "test_value");
  ASSERT_NE(values, nullptr);
  EXPECT_EQ(values->metric.size(), 2U) << "fixed and second; the counter named alike is dropped";
  const auto* dropped = Find(families, "rdmascope_collector_duplicate_series_dropped_total");
  ASSERT_NE(dropped, nullptr);
  std::map<std::string, double> dropped_by;
  for (const auto& metric : dropped->metric) {
    dropped_by[metric.label.at(0).value] = metric.counter.value;
  }
  EXPECT_EQ(dropped_by["clash"], 1) << "a family of another type";
  EXPECT_EQ(dropped_by["again"], 1) << "a series another collector already reported";
}

TEST(CollectorRunner, ConcurrentScrapesAreSafe) {
  const auto runner = MakeRunner();
  std::vector<std::thread> threads;
  std::atomic<int> complete{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (Find(runner->Collect(), "test_value") != nullptr) ++complete;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(complete.load(), 400);
}

}  // namespace
}  // namespace rdmascope
