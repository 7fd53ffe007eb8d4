#include "core/capture_index.h"

#include <ctime>
#include <nlohmann/json.hpp>

namespace rdmascope::capture {
namespace {

// Exactly `digits` decimal digits at text[at...]; nullopt otherwise.
std::optional<int> Digits(std::string_view text, size_t at, size_t digits) {
  if (at + digits > text.size()) return std::nullopt;
  int value = 0;
  for (size_t i = at; i < at + digits; ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

std::string StringField(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::optional<int64_t> ParseUtcMillis(std::string_view text) {
  // 2026-12-06T15:00:00Z: 20 characters; with .fff, 24.
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z') {
    return std::nullopt;
  }
  const auto year = Digits(text, 0, 4), month = Digits(text, 5, 2), day = Digits(text, 8, 2),
             hour = Digits(text, 11, 2), minute = Digits(text, 14, 2), second = Digits(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *month < 1 || *month > 12 ||
      *day < 1 || *day > 31 || *hour > 23 || *minute > 59 || *second > 60) {
    return std::nullopt;
  }
  int64_t millis = 0;
  const std::string_view rest = text.substr(19, text.size() - 20);
  if (!rest.empty()) {
    if (rest.front() != '.' || rest.size() < 2 || rest.size() > 10) return std::nullopt;
    int64_t scale = 100;
    for (const char c : rest.substr(1)) {
      if (c < '0' || c > '9') return std::nullopt;
      millis += (c - '0') * scale;
      scale /= 10;
    }
  }
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = *second;
  const std::time_t seconds = timegm(&tm);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<int64_t>(seconds) * 1000 + millis;
}

std::optional<std::vector<double>> SecondsSinceFirst(const std::vector<std::string>& times) {
  std::vector<double> seconds;
  std::optional<int64_t> first;
  for (const std::string& time : times) {
    const auto millis = ParseUtcMillis(time);
    if (!millis) return std::nullopt;
    if (!first) first = millis;
    seconds.push_back(static_cast<double>(*millis - *first) / 1000);
  }
  return seconds;
}

std::expected<IndexFacts, std::string> ReadIndexFacts(std::string_view index_text) {
  const nlohmann::json json = nlohmann::json::parse(index_text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return std::unexpected("index.json is not a JSON object");
  }
  IndexFacts facts;
  facts.hostname = StringField(json, "hostname");
  if (const auto kernel = json.find("kernel"); kernel != json.end() && kernel->is_object()) {
    facts.kernel_release = StringField(*kernel, "release");
  }
  if (const auto redacted = json.find("redacted");
      redacted != json.end() && redacted->is_boolean()) {
    facts.redacted = redacted->get<bool>();
  }
  if (const auto redaction = json.find("redaction");
      redaction != json.end() && redaction->is_object()) {
    facts.redaction_key = StringField(*redaction, "key");
    facts.redaction_key_id = StringField(*redaction, "key_id");
  }
  if (const auto collectors = json.find("collectors_replayed");
      collectors != json.end() && collectors->is_array()) {
    for (const nlohmann::json& name : *collectors) {
      if (name.is_string()) facts.collectors.push_back(name.get<std::string>());
    }
  }
  const auto samples = json.find("samples");
  if (samples == json.end() || !samples->is_array() || samples->empty()) {
    return std::unexpected("index.json lists no samples");
  }
  for (const nlohmann::json& sample : *samples) {
    const std::string time = sample.is_object() ? StringField(sample, "time") : std::string();
    if (!ParseUtcMillis(time)) {
      return std::unexpected("index.json: sample " + std::to_string(facts.sample_times.size() + 1) +
                             " has no time like 2026-12-06T15:00:00.123Z");
    }
    facts.sample_times.push_back(time);
  }
  facts.sample_seconds = *SecondsSinceFirst(facts.sample_times);
  return facts;
}

}  // namespace rdmascope::capture
