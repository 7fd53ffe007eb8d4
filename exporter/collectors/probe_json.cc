#include "collectors/probe_json.h"

#include <cmath>

namespace rdmascope::probe_json {
namespace {

[[noreturn]] void Refuse(std::string_view what, std::string_view why) {
  throw Malformed(std::string(what) + ": " + std::string(why));
}

}  // namespace

const nlohmann::json& Member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) Refuse(key, "its parent is not an object");
  const auto it = object.find(key);
  if (it == object.end()) Refuse(key, "missing");
  return *it;
}

const nlohmann::json& Object(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json& value = Member(object, key);
  if (!value.is_object()) Refuse(key, "not an object");
  if (value.size() > kMaxEntries) Refuse(key, "too many entries");
  return value;
}

const nlohmann::json& Array(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json& value = Member(object, key);
  if (!value.is_array()) Refuse(key, "not an array");
  if (value.size() > kMaxEntries) Refuse(key, "too many entries");
  return value;
}

// nlohmann reads a non-negative integer as number_unsigned, a negative one as number_integer,
// and one beyond 2^64 - 1 as a float: only the first is a count.
uint64_t U64(const nlohmann::json& value, std::string_view what) {
  if (!value.is_number_unsigned()) Refuse(what, "not an integer from 0 to 2^64-1");
  return value.get<uint64_t>();
}

uint32_t U32(const nlohmann::json& value, std::string_view what) {
  const uint64_t wide = U64(value, what);
  if (wide > UINT32_MAX) Refuse(what, "above 2^32-1");
  return static_cast<uint32_t>(wide);
}

int64_t Gauge(const nlohmann::json& value, std::string_view what) {
  int64_t number = 0;
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(kMaxGauge)) Refuse(what, "out of range");
    number = static_cast<int64_t>(value.get<uint64_t>());
  } else if (value.is_number_integer()) {
    number = value.get<int64_t>();
  } else {
    Refuse(what, "not an integer");
  }
  if (number > kMaxGauge || number < -kMaxGauge) Refuse(what, "out of range");
  return number;
}

double NonNegative(const nlohmann::json& value, std::string_view what) {
  if (!value.is_number()) Refuse(what, "not a number");
  const double number = value.get<double>();
  if (!std::isfinite(number) || number < 0) Refuse(what, "not a finite number >= 0");
  return number;
}

bool Bool(const nlohmann::json& value, std::string_view what) {
  if (!value.is_boolean()) Refuse(what, "not true or false");
  return value.get<bool>();
}

std::string String(const nlohmann::json& value, std::string_view what) {
  if (!value.is_string()) Refuse(what, "not a string");
  const auto& text = value.get_ref<const std::string&>();
  if (text.size() > kMaxString) Refuse(what, "longer than 256 bytes");
  return text;
}

std::string Message(const nlohmann::json& value, std::string_view what) {
  if (!value.is_string()) Refuse(what, "not a string");
  const auto& text = value.get_ref<const std::string&>();
  if (text.empty() || text.size() > kMaxMessage) Refuse(what, "empty or longer than 4096 bytes");
  return text;
}

std::string Key(const std::string& key, std::string_view what) {
  if (key.size() > kMaxString) Refuse(what, "longer than 256 bytes");
  return key;
}

nlohmann::json Parse(std::string_view text, std::string_view probe) {
  if (text.size() > kMaxBytes) Refuse("file", "larger than 8 MiB");
  // Depth is bounded too: the files are three levels deep, and a deeply nested document
  // would only cost the parser's (heap) stack.
  bool too_deep = false;
  const nlohmann::json::parser_callback_t limit =
      [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > 8) too_deep = true;
        return !too_deep;
      };
  nlohmann::json body = nlohmann::json::parse(text, limit, false);
  if (too_deep) Refuse("file", "nested deeper than 8 levels");
  if (body.is_discarded()) Refuse("file", "not JSON");
  if (!body.is_object()) Refuse("file", "not a JSON object");
  const uint64_t version = U64(Member(body, "version"), "version");
  if (version == 0 || version > kVersion) {
    Refuse("version",
           std::to_string(version) + " (this rdmascope reads " + std::to_string(kVersion) + ")");
  }
  if (String(Member(body, "probe"), "probe") != probe) Refuse("probe", "not " + std::string(probe));
  return body;
}

std::string Dump(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace rdmascope::probe_json
