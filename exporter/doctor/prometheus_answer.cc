#include "doctor/prometheus_answer.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

namespace rdmascope::doctor {
namespace {

using Json = nlohmann::json;

std::optional<double> ParseValue(std::string_view text) {
  // Prometheus writes "NaN", "+Inf", "-Inf" and Go's float formatting.
  if (text == "NaN") return std::nan("");
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Where the parser is in {"status", "data": {"resultType", "result": [{"metric": {...},
// "value": [t, "v"]} or "values": [[t, "v"], ...]]}}; anything else is kOther and skipped.
enum class Frame { kTop, kData, kResult, kSeries, kMetric, kPoints, kPoint, kWarnings, kOther };

// A partial answer's warnings kept, each cut to a length a report can print: they are the
// server's bytes, and a hostile one could send many.
constexpr size_t kMaxWarnings = 8;
constexpr size_t kMaxWarningBytes = 512;

class AnswerReader : public nlohmann::json_sax<Json> {
 public:
  AnswerReader(const std::function<void(AnswerSeries&&)>& each, std::vector<std::string>* warnings)
      : each_(each), warnings_(warnings) {}

  bool start_object(std::size_t) override {
    Frame frame = Frame::kOther;
    if (frames_.empty()) {
      frame = Frame::kTop;
      top_is_object_ = true;
    } else if (frames_.back() == Frame::kTop && key_ == "data") {
      frame = Frame::kData;
    } else if (frames_.back() == Frame::kResult) {
      frame = Frame::kSeries;
      series_ = {};
    } else if (frames_.back() == Frame::kSeries && key_ == "metric") {
      frame = Frame::kMetric;
    }
    return Push(frame);
  }

  bool end_object() override {
    if (frames_.back() == Frame::kSeries && !series_.points.empty()) each_(std::move(series_));
    frames_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    Frame frame = Frame::kOther;
    if (frames_.empty()) {
      frame = Frame::kOther;
    } else if (frames_.back() == Frame::kTop && key_ == "warnings") {
      frame = Frame::kWarnings;  // Prometheus: ["..."]; Thanos and Mimir: partial responses
    } else if (frames_.back() == Frame::kData && key_ == "result") {
      frame = Frame::kResult;
      has_result_ = true;
    } else if (frames_.back() == Frame::kSeries && key_ == "value") {
      frame = Frame::kPoint;
    } else if (frames_.back() == Frame::kSeries && key_ == "values") {
      frame = Frame::kPoints;
    } else if (frames_.back() == Frame::kPoints) {
      frame = Frame::kPoint;
    }
    if (frame == Frame::kPoint) {
      point_index_ = 0;
      point_time_.reset();
    }
    return Push(frame);
  }

  bool end_array() override {
    frames_.pop_back();
    return true;
  }

  bool key(string_t& key) override {
    key_ = key;
    return true;
  }

  bool string(string_t& text) override {
    if (frames_.empty()) return true;
    switch (frames_.back()) {
      case Frame::kTop:
        if (key_ == "status") status_ = text;
        if (key_ == "errorType") error_type_ = text;
        if (key_ == "error") error_ = text;
        break;
      case Frame::kData:
        if (key_ == "resultType") result_type_ = text;
        break;
      case Frame::kWarnings:
        if (warnings_ != nullptr && warnings_->size() < kMaxWarnings) {
          warnings_->push_back(text.substr(0, kMaxWarningBytes));
        }
        break;
      case Frame::kMetric:
        if (key_ == "__name__") {
          series_.name = std::move(text);
        } else if (key_ == "instance") {
          series_.instance = std::move(text);
        } else {
          // Prometheus writes labels sorted by name: each lands at the end.
          series_.labels.emplace_hint(series_.labels.end(), key_, std::move(text));
        }
        break;
      case Frame::kPoint:
        if (point_index_++ == 1 && point_time_) {
          if (const auto value = ParseValue(text))
            series_.points.emplace_back(*point_time_, *value);
        }
        break;
      default:
        break;
    }
    return true;
  }

  bool number_integer(number_integer_t value) override {
    return Number(static_cast<double>(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    return Number(static_cast<double>(value));
  }
  bool number_float(number_float_t value, const string_t&) override { return Number(value); }
  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool binary(binary_t&) override { return Scalar(); }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    parse_error_ = "not JSON at byte " + std::to_string(position);
    return false;
  }

  std::expected<void, std::string> Outcome(ResultType expected) const {
    if (!parse_error_.empty() || !top_is_object_) {
      return std::unexpected(
          "not a Prometheus API answer (" +
          (parse_error_.empty() ? std::string("not a JSON object") : parse_error_) + ")");
    }
    if (status_ != "success") {
      return std::unexpected("Prometheus answered " +
                             (error_type_.empty() ? std::string("an error") : error_type_) +
                             (error_.empty() ? "" : ": " + error_));
    }
    const char* wanted = expected == ResultType::kVector ? "vector" : "matrix";
    if (result_type_ != wanted || !has_result_) {
      return std::unexpected(
          std::string("Prometheus answered something other than ") +
          (expected == ResultType::kVector ? "an instant vector" : "a range matrix"));
    }
    return {};
  }

 private:
  bool Push(Frame frame) {
    // A nested answer deeper than the API's four levels is not one: no unbounded stack.
    if (frames_.size() >= 64) {
      parse_error_ = "nested deeper than the API's answers are";
      return false;
    }
    frames_.push_back(frame);
    return true;
  }

  bool Number(double value) {
    if (!frames_.empty() && frames_.back() == Frame::kPoint && point_index_++ == 0) {
      point_time_ = value;
    }
    return true;
  }

  bool Scalar() {
    if (!frames_.empty() && frames_.back() == Frame::kPoint) ++point_index_;
    return true;
  }

  const std::function<void(AnswerSeries&&)>& each_;
  std::vector<std::string>* warnings_;
  std::vector<Frame> frames_;
  std::string key_;
  AnswerSeries series_;
  size_t point_index_ = 0;
  std::optional<double> point_time_;
  bool top_is_object_ = false;
  bool has_result_ = false;
  std::string status_, error_type_, error_, result_type_, parse_error_;
};

}  // namespace

std::expected<void, std::string> ReadQueryAnswer(std::string_view body, ResultType expected,
                                                 const std::function<void(AnswerSeries&&)>& each,
                                                 std::vector<std::string>* warnings) {
  AnswerReader reader(each, warnings);
  Json::sax_parse(body.begin(), body.end(), &reader);
  return reader.Outcome(expected);
}

}  // namespace rdmascope::doctor
