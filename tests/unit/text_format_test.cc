// The exposition writer (http/text_format) against prometheus::TextSerializer, byte for byte:
// over every golden exposition of the fixtures (parsed back into families) and over random
// families with every value and escape the format has. And gzip (http/gzip) round trips.
#include "http/text_format.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <zlib.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http/gzip.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::string Reference(const std::vector<MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

// --- A small parser of the text format, enough for the goldens (which TextSerializer wrote).

double ParseValue(const std::string& text) {
  if (text == "Nan") return std::numeric_limits<double>::quiet_NaN();
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  return std::stod(text);
}

struct Sample {
  std::string name;
  std::vector<prometheus::ClientMetric::Label> labels;
  std::string value;
  int64_t timestamp_ms = 0;
};

Sample ParseSample(const std::string& line) {
  Sample sample;
  size_t i = line.find_first_of("{ ");
  sample.name = line.substr(0, i);
  if (line[i] == '{') {
    ++i;
    while (line[i] != '}') {
      const size_t eq = line.find('=', i);
      prometheus::ClientMetric::Label label;
      label.name = line.substr(i, eq - i);
      i = eq + 2;  // ="
      for (; line[i] != '"'; ++i) {
        if (line[i] == '\\') {
          ++i;
          label.value += line[i] == 'n' ? '\n' : line[i];
        } else {
          label.value += line[i];
        }
      }
      ++i;  // closing quote
      if (line[i] == ',') ++i;
      sample.labels.push_back(std::move(label));
    }
    ++i;  // }
  }
  std::istringstream rest(line.substr(i + 1));
  rest >> sample.value;
  rest >> sample.timestamp_ms;
  return sample;
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.ends_with(suffix);
}

std::vector<MetricFamily> ParseExposition(const std::string& text) {
  std::vector<MetricFamily> families;
  std::istringstream lines(text);
  std::string line;
  auto family_named = [&](const std::string& name) -> MetricFamily& {
    if (families.empty() || families.back().name != name) {
      families.emplace_back();
      families.back().name = name;
    }
    return families.back();
  };
  while (std::getline(lines, line)) {
    if (line.starts_with("# HELP ")) {
      const size_t space = line.find(' ', 7);
      family_named(line.substr(7, space - 7)).help = line.substr(space + 1);
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      const size_t space = line.find(' ', 7);
      MetricFamily& family = family_named(line.substr(7, space - 7));
      const std::string type = line.substr(space + 1);
      family.type = type == "counter"     ? MetricType::Counter
                    : type == "gauge"     ? MetricType::Gauge
                    : type == "summary"   ? MetricType::Summary
                    : type == "histogram" ? MetricType::Histogram
                                          : MetricType::Untyped;
      continue;
    }
    if (line.empty() || families.empty()) continue;
    Sample sample = ParseSample(line);
    MetricFamily& family = families.back();
    if (family.type == MetricType::Histogram || family.type == MetricType::Summary) {
      if (sample.name == family.name + "_count") {  // TextSerializer's first line of each
        family.metric.emplace_back();
        family.metric.back().label = sample.labels;
        family.metric.back().timestamp_ms = sample.timestamp_ms;
        (family.type == MetricType::Histogram ? family.metric.back().histogram.sample_count
                                              : family.metric.back().summary.sample_count) =
            std::stoull(sample.value);
      } else if (EndsWith(sample.name, "_sum")) {
        (family.type == MetricType::Histogram ? family.metric.back().histogram.sample_sum
                                              : family.metric.back().summary.sample_sum) =
            ParseValue(sample.value);
      } else if (family.type == MetricType::Histogram) {
        family.metric.back().histogram.bucket.push_back(
            {std::stoull(sample.value), ParseValue(sample.labels.back().value)});
      } else {
        family.metric.back().summary.quantile.push_back(
            {ParseValue(sample.labels.back().value), ParseValue(sample.value)});
      }
      continue;
    }
    ClientMetric metric;
    metric.label = sample.labels;
    metric.timestamp_ms = sample.timestamp_ms;
    const double value = ParseValue(sample.value);
    metric.counter.value = metric.gauge.value = metric.untyped.value = value;
    family.metric.push_back(std::move(metric));
  }
  return families;
}

TEST(TextFormat, SameBytesAsTextSerializerOnEveryGolden) {
  size_t goldens = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::FixturePath("golden"))) {
    if (entry.path().extension() != ".prom") continue;
    ++goldens;
    const std::string text = testing::ReadText(entry.path());
    const std::vector<MetricFamily> families = ParseExposition(text);
    ASSERT_FALSE(families.empty()) << entry.path();
    const std::string reference = Reference(families);
    EXPECT_EQ(reference, text) << entry.path() << ": the parser above lost something";
    EXPECT_EQ(WriteTextFormat(families), reference) << entry.path();
  }
  EXPECT_GE(goldens, 10U);
}

// --- Random families: every type, value and escape.

class RandomFamilies {
 public:
  explicit RandomFamilies(uint32_t seed) : random_(seed) {}

  double Value() {
    static const double kSpecial[] = {
        std::numeric_limits<double>::quiet_NaN(),
        std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(),
        -0.0,
        0.0,
        1e-300,
        9007199254740993.0,  // 2^53 + 1 (rounds to 2^53)
        9007199254740992.0,
        18446744073709551615.0,
        std::numeric_limits<double>::min(),
        std::numeric_limits<double>::denorm_min(),
        std::numeric_limits<double>::max(),
        std::numeric_limits<double>::lowest(),
        std::numeric_limits<double>::epsilon(),
        0.1,
        1.0 / 3,
        1e15,
        1e16,
        1e17,
        123456789012345678.0,
        0.0001,
        0.00001,
        5e-324,
        2.5,
        -1.5e-7,
    };
    switch (Pick(4)) {
      case 0:
        return kSpecial[Pick(std::size(kSpecial))];
      case 1:  // an integer, as counters mostly are
        return static_cast<double>(random_() >> Pick(64));
      case 2:  // any bit pattern
        return std::bit_cast<double>(random_());
      default:
        return std::uniform_real_distribution<double>(-1e6, 1e6)(random_);
    }
  }

  std::string Text(bool escapes) {
    static const std::string kPieces[] = {"a", "Z", "0", "_", " ", "\xC3\xA9",
                                          "{", "}", ",", "=", "#", "\t"};
    static const std::string kEscapes[] = {"\\", "\"", "\n", "\\n", "\\\""};
    std::string text;
    for (size_t n = Pick(8); n > 0; --n) {
      text += escapes && Pick(3) == 0 ? kEscapes[Pick(std::size(kEscapes))]
                                      : kPieces[Pick(std::size(kPieces))];
    }
    return text;
  }

  MetricFamily Family(size_t index) {
    MetricFamily family;
    family.name = "family_" + std::to_string(index);
    family.help = Pick(5) == 0 ? "" : Text(false);
    family.type = static_cast<MetricType>(Pick(5));
    for (size_t n = Pick(6); n > 0; --n) {
      ClientMetric metric;
      for (size_t l = Pick(4); l > 0; --l) {
        metric.label.push_back({"l" + std::to_string(l), Pick(4) == 0 ? "" : Text(true)});
      }
      if (Pick(6) == 0) metric.timestamp_ms = static_cast<int64_t>(random_()) >> Pick(64);
      metric.counter.value = Value();
      metric.gauge.value = Value();
      metric.untyped.value = Value();
      metric.histogram.sample_count = random_() >> Pick(64);
      metric.histogram.sample_sum = Value();
      for (size_t b = Pick(5); b > 0; --b) {
        metric.histogram.bucket.push_back({random_() >> Pick(64), Value()});
      }
      if (Pick(2) == 0) {
        metric.histogram.bucket.push_back(
            {metric.histogram.sample_count, std::numeric_limits<double>::infinity()});
      }
      metric.summary.sample_count = random_() >> Pick(64);
      metric.summary.sample_sum = Value();
      for (size_t q = Pick(4); q > 0; --q) {
        metric.summary.quantile.push_back({Value(), Value()});
      }
      family.metric.push_back(std::move(metric));
    }
    return family;
  }

 private:
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(random_); }

  std::mt19937_64 random_;
};

TEST(TextFormat, SameBytesAsTextSerializerOnRandomFamilies) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    RandomFamilies random(seed);
    std::vector<MetricFamily> families;
    for (size_t i = 0; i < 20; ++i) families.push_back(random.Family(i));
    const std::string reference = Reference(families);
    ASSERT_EQ(WriteTextFormat(families), reference) << "seed " << seed;
    // The reservation changes nothing but the allocation.
    ASSERT_EQ(WriteTextFormat(families, reference.size()), reference) << "seed " << seed;
  }
}

TEST(TextFormat, SameBytesAsTextSerializerOnEachValue) {
  RandomFamilies random(7);
  MetricFamily family;
  family.name = "v";
  family.type = MetricType::Gauge;
  for (int i = 0; i < 100000; ++i) {
    ClientMetric metric;
    metric.gauge.value = random.Value();
    family.metric.push_back(metric);
  }
  EXPECT_EQ(WriteTextFormat({family}), Reference({family}));
}

TEST(TextFormat, EmptyAndAppend) {
  EXPECT_EQ(WriteTextFormat({}), "");
  MetricFamily family;
  family.name = "x";
  family.type = MetricType::Counter;
  family.metric.emplace_back();
  std::string out = "prefix\n";
  AppendTextFormat(out, {family});
  EXPECT_EQ(out, "prefix\n# TYPE x counter\nx 0\n");
}

// The one difference from TextSerializer, on purpose: it writes HELP raw, so a newline in it
// would end the comment and start a line Prometheus cannot parse.
TEST(TextFormat, HelpEscapesBackslashAndNewline) {
  MetricFamily family;
  family.name = "x";
  family.help = "a\\b\nc \"quoted\"";
  family.type = MetricType::Gauge;
  EXPECT_EQ(WriteTextFormat({family}), "# HELP x a\\\\b\\nc \"quoted\"\n# TYPE x gauge\n");
}

// --- gzip

std::string Gunzip(const std::string& compressed) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 16 + MAX_WBITS), Z_OK);  // 16: gzip, not zlib
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[65536];
  int status = Z_OK;
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof buffer;
    status = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - stream.avail_out);
  }
  EXPECT_EQ(status, Z_STREAM_END);
  EXPECT_EQ(stream.avail_in, 0U);  // nothing after the gzip member
  inflateEnd(&stream);
  return out;
}

std::string Exposition(size_t bytes) {
  RandomFamilies random(3);
  std::vector<MetricFamily> families;
  std::string text;
  for (size_t i = 0; text.size() < bytes; ++i) text += WriteTextFormat({random.Family(i)});
  text.resize(bytes);
  return text;
}

TEST(Gzip, RoundTripsEveryBodySize) {
  for (const size_t bytes : {size_t{0}, size_t{1}, size_t{58} << 10, size_t{2} << 20}) {
    const std::string body = Exposition(bytes);
    // Twice on this thread (the second call reuses the reset deflate state), and at each level.
    for (const int level : {kGzipLevel, kGzipLevel, 1, 6, 9, kGzipLevel}) {
      const auto compressed = GzipCompress(body, level);
      ASSERT_TRUE(compressed.has_value()) << bytes << " B at level " << level;
      EXPECT_EQ(Gunzip(*compressed), body) << bytes << " B at level " << level;
      if (bytes >= 1024) {
        EXPECT_LT(compressed->size(), body.size() / 2);
      }
    }
  }
}

TEST(Gzip, EachThreadHasItsOwnState) {
  const std::string body = Exposition(200 << 10);
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) results[t] = GzipCompress(body).value_or("");
    });
  }
  for (auto& thread : threads) thread.join();
  for (const std::string& result : results) EXPECT_EQ(Gunzip(result), body);
}

}  // namespace
}  // namespace rdmascope
