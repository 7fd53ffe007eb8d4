#include "core/metric_set.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

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
