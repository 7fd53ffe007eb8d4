#include "core/metric_set.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <string>
#include <vector>

namespace rdmascope {
namespace {

constexpr MetricDesc kGauge{"test_gauge", "help", prometheus::MetricType::Gauge};
constexpr MetricDesc kGaugeAsCounter{"test_gauge", "help", prometheus::MetricType::Counter};

TEST(MetricSet, GroupsInFirstUseOrderAndRejectsDuplicates) {
  MetricSet set;
  EXPECT_TRUE(set.Add(kGauge, {{"a", "1"}}, 1));
  EXPECT_TRUE(set.Add(kGauge, {{"a", "2"}}, 2));
  EXPECT_FALSE(set.Add(kGauge, {{"a", "1"}}, 3));
  EXPECT_FALSE(set.Add(kGaugeAsCounter, {{"a", "9"}}, 3));
  EXPECT_EQ(set.dropped_duplicates(), 2U);
  const auto families = set.Take();
  ASSERT_EQ(families.size(), 1U);
  ASSERT_EQ(families[0].metric.size(), 2U);
  EXPECT_EQ(families[0].metric[0].gauge.value, 1);
}

// Enough series to grow the duplicate table several times; a duplicate is refused whenever it
// comes, and label sets that only split the same characters differently are distinct.
TEST(MetricSet, DuplicatesAreFoundAmongManySeries) {
  MetricSet set;
  std::vector<std::string> values;
  for (int i = 0; i < 1000; ++i) values.push_back("eth" + std::to_string(i));
  for (const std::string& value : values) EXPECT_TRUE(set.Add(kGauge, {{"device", value}}, 1));
  for (const std::string& value : values) EXPECT_FALSE(set.Add(kGauge, {{"device", value}}, 2));
  EXPECT_TRUE(set.Add(kGauge, {{"a", "bc"}}, 1));
  EXPECT_TRUE(set.Add(kGauge, {{"ab", "c"}}, 1));
  EXPECT_TRUE(set.Add(kGauge, {{"device", "eth1"}, {"queue", "0"}}, 1));
  EXPECT_FALSE(set.Add(kGauge, {{"device", "eth1"}, {"queue", "0"}}, 1));
  // Prometheus sorts labels: in another order they are the same series.
  EXPECT_FALSE(set.Add(kGauge, {{"queue", "0"}, {"device", "eth1"}}, 1));
  // And an empty label value is no label.
  EXPECT_FALSE(set.Add(kGauge, {{"device", "eth1"}, {"x", ""}, {"queue", "0"}}, 1));
  EXPECT_TRUE(set.Add(kGauge, {{"device", "eth1"}, {"x", "1"}, {"queue", "0"}}, 1));
  EXPECT_TRUE(set.Add(kGauge, {{"device", "eth1"}, {"device", "eth1"}, {"queue", "0"}}, 1))
      << "a repeated label is not the set {device, x, queue} nor {device, queue}";
  EXPECT_EQ(set.dropped_duplicates(), 1003U);
  const auto families = set.Take();
  ASSERT_EQ(families.size(), 1U);
  EXPECT_EQ(families[0].metric.size(), 1005U);
  // After Take() the set starts over: the same series are new again.
  EXPECT_TRUE(set.Add(kGauge, {{"device", values[0]}}, 1));
}

// Families added to in turn, under names from one reused buffer, and a set moved halfway.
TEST(MetricSet, InterleavedFamiliesKeepTheirOwnSeries) {
  MetricSet set;
  std::string name = "family_a";
  const auto desc = [&] { return MetricDesc{name, "help", prometheus::MetricType::Gauge}; };
  EXPECT_TRUE(set.Add(desc(), {{"x", "1"}}, 1));
  name = "family_b";
  EXPECT_TRUE(set.Add(desc(), {{"x", "1"}}, 2));
  name = "family_a";
  EXPECT_FALSE(set.Add(desc(), {{"x", "1"}}, 3));
  MetricSet moved = std::move(set);
  name = "family_b";
  EXPECT_FALSE(moved.Add(desc(), {{"x", "1"}}, 4));
  EXPECT_TRUE(moved.Add(desc(), {{"x", "2"}}, 5));
  EXPECT_TRUE(set.Add(desc(), {{"x", "1"}}, 6)) << "the moved-from set starts empty";
  const auto families = moved.Take();
  ASSERT_EQ(families.size(), 2U);
  EXPECT_EQ(families[0].name, "family_a");
  EXPECT_EQ(families[0].metric.size(), 1U);
  EXPECT_EQ(families[1].name, "family_b");
  ASSERT_EQ(families[1].metric.size(), 2U);
  EXPECT_EQ(families[1].metric[1].gauge.value, 5);
  EXPECT_EQ(moved.dropped_duplicates(), 2U);
}

TEST(MetricSet, LabelValuesAreEscapedAndValidUtf8) {
  MetricSet set;
  set.Add(kGauge, {{"device", "a\"b\\c\nd\xff"}}, 1);
  const std::string text = prometheus::TextSerializer().Serialize(set.Take());
  EXPECT_NE(text.find(R"(device="a\"b\\c\nd)"
                      "\xEF\xBF\xBD"
                      R"("})"),
            std::string::npos)
      << text;
}

TEST(SanitizeUtf8, KeepsValidReplacesInvalid) {
  EXPECT_EQ(SanitizeUtf8("plain"), "plain");
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(SanitizeUtf8("\xC3"), "\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace rdmascope
