#include "http/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

namespace rdmascope {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// TextSerializer: `out << value` after out.precision(max_digits10 - 1) in the classic locale,
// i.e. printf("%.16g"); std::to_chars with a precision is specified as that printf.
void AppendDouble(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "Nan";
  } else if (std::isinf(value)) {
    out += value < 0 ? "-Inf" : "+Inf";
  } else {
    char buffer[64];
    const auto result =
        std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general,
                      std::numeric_limits<double>::max_digits10 - 1);
    out.append(buffer, result.ptr);
  }
}

template <typename Integer>
void AppendInteger(std::string& out, Integer value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

// Label values: backslash, double quote and newline escaped; HELP: backslash and newline.
template <bool kQuote>
void AppendEscaped(std::string& out, std::string_view text) {
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c != '\\' && c != '\n' && (!kQuote || c != '"')) continue;
    out.append(text.substr(start, i - start));
    out += '\\';
    out += c == '\n' ? 'n' : c;
    start = i + 1;
  }
  out.append(text.substr(start));
}

// An extra label ("le", "quantile") after the metric's own: a double, a fixed text, or none.
struct Extra {
  std::string_view name;
  double number = 0;
  std::string_view text;  // used if not empty, else `number`
};

void AppendHead(std::string& out, const MetricFamily& family, const ClientMetric& metric,
                std::string_view suffix, const Extra* extra = nullptr) {
  out += family.name;
  out += suffix;
  if (!metric.label.empty() || extra != nullptr) {
    out += '{';
    bool first = true;
    for (const auto& label : metric.label) {
      if (!first) out += ',';
      first = false;
      out += label.name;
      out += "=\"";
      AppendEscaped<true>(out, label.value);
      out += '"';
    }
    if (extra != nullptr) {
      if (!first) out += ',';
      out += extra->name;
      out += "=\"";
      if (extra->text.empty()) {
        AppendDouble(out, extra->number);
      } else {
        AppendEscaped<true>(out, extra->text);
      }
      out += '"';
    }
    out += '}';
  }
  out += ' ';
}

void AppendTail(std::string& out, const ClientMetric& metric) {
  if (metric.timestamp_ms != 0) {
    out += ' ';
    AppendInteger(out, metric.timestamp_ms);
  }
  out += '\n';
}

void AppendSample(std::string& out, const MetricFamily& family, const ClientMetric& metric,
                  double value) {
  AppendHead(out, family, metric, "");
  AppendDouble(out, value);
  AppendTail(out, metric);
}

// The _count and _sum lines of a summary or histogram, in TextSerializer's order.
void AppendCountAndSum(std::string& out, const MetricFamily& family, const ClientMetric& metric,
                       uint64_t count, double sum) {
  AppendHead(out, family, metric, "_count");
  AppendInteger(out, count);
  AppendTail(out, metric);
  AppendHead(out, family, metric, "_sum");
  AppendDouble(out, sum);
  AppendTail(out, metric);
}

void AppendSummary(std::string& out, const MetricFamily& family, const ClientMetric& metric) {
  const auto& summary = metric.summary;
  AppendCountAndSum(out, family, metric, summary.sample_count, summary.sample_sum);
  for (const auto& quantile : summary.quantile) {
    const Extra extra{"quantile", quantile.quantile, {}};
    AppendHead(out, family, metric, "", &extra);
    AppendDouble(out, quantile.value);
    AppendTail(out, metric);
  }
}

void AppendHistogram(std::string& out, const MetricFamily& family, const ClientMetric& metric) {
  const auto& histogram = metric.histogram;
  AppendCountAndSum(out, family, metric, histogram.sample_count, histogram.sample_sum);
  double last = -std::numeric_limits<double>::infinity();
  for (const auto& bucket : histogram.bucket) {
    const Extra extra{"le", bucket.upper_bound, {}};
    AppendHead(out, family, metric, "_bucket", &extra);
    last = bucket.upper_bound;
    AppendInteger(out, bucket.cumulative_count);
    AppendTail(out, metric);
  }
  // As TextSerializer: a +Inf bucket unless the last one is it.
  if (last != std::numeric_limits<double>::infinity()) {
    const Extra extra{"le", 0, "+Inf"};
    AppendHead(out, family, metric, "_bucket", &extra);
    AppendInteger(out, histogram.sample_count);
    AppendTail(out, metric);
  }
}

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Summary:
      return "summary";
    case MetricType::Untyped:
      return "untyped";
    case MetricType::Histogram:
      return "histogram";
  }
  return {};
}

void AppendFamily(std::string& out, const MetricFamily& family) {
  if (!family.help.empty()) {
    out += "# HELP ";
    out += family.name;
    out += ' ';
    AppendEscaped<false>(out, family.help);
    out += '\n';
  }
  const std::string_view type = TypeName(family.type);
  if (type.empty()) return;  // TextSerializer writes nothing for a type it does not know
  out += "# TYPE ";
  out += family.name;
  out += ' ';
  out += type;
  out += '\n';
  for (const ClientMetric& metric : family.metric) {
    switch (family.type) {
      case MetricType::Counter:
        AppendSample(out, family, metric, metric.counter.value);
        break;
      case MetricType::Gauge:
        AppendSample(out, family, metric, metric.gauge.value);
        break;
      case MetricType::Summary:
        AppendSummary(out, family, metric);
        break;
      case MetricType::Untyped:
        AppendSample(out, family, metric, metric.untyped.value);
        break;
      case MetricType::Histogram:
        AppendHistogram(out, family, metric);
        break;
    }
  }
}

}  // namespace

void AppendTextFormat(std::string& out, const std::vector<MetricFamily>& families) {
  for (const MetricFamily& family : families) AppendFamily(out, family);
}

std::string WriteTextFormat(const std::vector<MetricFamily>& families, size_t reserve) {
  std::string out;
  out.reserve(reserve);
  AppendTextFormat(out, families);
  return out;
}

}  // namespace rdmascope
