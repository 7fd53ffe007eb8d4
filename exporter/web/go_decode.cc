#include "web/go_decode.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <utility>

namespace rdmascope::web {
namespace {

using Error = std::unexpected<std::string>;

// What yaml.v2's resolve() makes of a plain scalar (resolve.go), as far as numbers go.
struct Resolved {
  enum Kind { kNull, kBool, kInt, kUintTooBig, kFloat, kString } kind = kString;
  int64_t integer = 0;
  double real = 0;
};

std::string_view TagName(Resolved::Kind kind) {
  switch (kind) {
    case Resolved::kNull:
      return "!!null";
    case Resolved::kBool:
      return "!!bool";
    case Resolved::kInt:
    case Resolved::kUintTooBig:
      return "!!int";
    case Resolved::kFloat:
      return "!!float";
    case Resolved::kString:
      break;
  }
  return "!!str";
}

int DigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

// Go's strconv.ParseUint(s, 0, 64) (underscores already removed): the base from a 0x, 0o, 0b
// or 0 prefix, at least one digit, no sign. nullopt on a syntax error; `overflow` on a range one.
std::optional<uint64_t> GoParseUint(std::string_view s, bool& overflow) {
  overflow = false;
  if (s.empty()) return std::nullopt;
  int base = 10;
  if (s[0] == '0') {
    const char prefix = s.size() >= 3 ? static_cast<char>(s[1] | 0x20) : '\0';
    if (prefix == 'b' || prefix == 'o' || prefix == 'x') {
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      s.remove_prefix(2);
    } else {
      base = 8;
      s.remove_prefix(1);
    }
  }
  uint64_t value = 0;
  for (const char c : s) {
    const int digit = DigitValue(c);
    if (digit >= base) return std::nullopt;
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / base) {
      overflow = true;  // Go keeps scanning for syntax errors; either way it is not a uint
    }
    value = value * base + digit;
  }
  if (overflow) return std::nullopt;
  return value;
}

// Go's strconv.ParseInt(s, 0, 64).
std::optional<int64_t> GoParseInt(std::string_view s) {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  bool overflow = false;
  const auto magnitude = GoParseUint(s, overflow);
  if (!magnitude) return std::nullopt;
  constexpr uint64_t kCutoff = uint64_t{1} << 63;
  if (negative) {
    if (*magnitude > kCutoff) return std::nullopt;
    return static_cast<int64_t>(0 - *magnitude);
  }
  if (*magnitude >= kCutoff) return std::nullopt;
  return static_cast<int64_t>(*magnitude);
}

// Go's strconv.ParseFloat for the forms yaml.v2 lets reach it; nullopt when out of range
// (Go's ErrRange: ±Inf).
std::optional<double> ParseFloat(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || std::isinf(value)) return std::nullopt;
  return value;
}

Resolved Resolve(std::string_view in) {
  Resolved out;
  static const std::map<std::string_view, Resolved::Kind> kWords = [] {
    std::map<std::string_view, Resolved::Kind> words;
    for (const char* word :
         {"y", "Y", "yes", "Yes", "YES", "true",  "True",  "TRUE",  "on",  "On",  "ON",
          "n", "N", "no",  "No",  "NO",  "false", "False", "FALSE", "off", "Off", "OFF"}) {
      words.emplace(word, Resolved::kBool);
    }
    for (const char* word : {"", "~", "null", "Null", "NULL"}) words.emplace(word, Resolved::kNull);
    return words;
  }();
  if (const auto word = kWords.find(in); word != kWords.end()) {
    out.kind = word->second;
    return out;
  }
  for (const auto& [words, value] :
       {std::pair{std::string_view(".nan .NaN .NAN"), std::nan("")},
        std::pair{std::string_view(".inf .Inf .INF +.inf +.Inf +.INF"), HUGE_VAL},
        std::pair{std::string_view("-.inf -.Inf -.INF"), -HUGE_VAL}}) {
    for (size_t at = 0; at < words.size();) {
      const size_t space = std::min(words.find(' ', at), words.size());
      if (words.substr(at, space - at) == in) {
        out.kind = Resolved::kFloat;
        out.real = value;
        return out;
      }
      at = space + 1;
    }
  }
  const char first = in.front();
  static const std::regex kFloat(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (first == '.') {
    static const std::regex kDotFloat(R"(^\.[0-9]+([eE][-+]?[0-9]+)?$)");
    const std::string text(in);
    if (std::regex_match(text, kDotFloat)) {
      if (auto value = ParseFloat(text)) {
        out.kind = Resolved::kFloat;
        out.real = *value;
      }
    }
    return out;
  }
  if (!(first == '+' || first == '-' || (first >= '0' && first <= '9'))) return out;
  // Dates (2001-12-14) resolve to timestamps there: no int either, so they fall through.
  std::string plain;
  for (const char c : in) {
    if (c != '_') plain += c;
  }
  if (auto value = GoParseInt(plain)) {
    out.kind = Resolved::kInt;
    out.integer = *value;
    return out;
  }
  bool overflow = false;
  if (GoParseUint(plain, overflow)) {
    out.kind = Resolved::kUintTooBig;  // above int64's range: no Go int holds it
    return out;
  }
  if (std::regex_match(plain, kFloat)) {
    if (auto value = ParseFloat(plain)) {
      out.kind = Resolved::kFloat;
      out.real = *value;
    }
  }
  // (yaml.v2 then tries "0b" + a signed binary number, a form no one writes: left out.)
  return out;
}

std::string CannotUnmarshal(Resolved::Kind kind, std::string_view text, std::string_view into) {
  return "cannot unmarshal " + std::string(TagName(kind)) + " `" + std::string(text) + "` into " +
         std::string(into);
}

// yaml.v2's decoder into an int64-kind field (decode.go, case reflect.Int...).
std::expected<int64_t, std::string> ToInt(const Resolved& resolved, std::string_view text,
                                          std::string_view into) {
  switch (resolved.kind) {
    case Resolved::kNull:
      return 0;
    case Resolved::kInt:
      return resolved.integer;
    case Resolved::kFloat: {
      // `resolved <= math.MaxInt64` (i.e. 2^63 as a float64), then Go's int64(f), which on
      // amd64 gives math.MinInt64 for anything out of range.
      const double f = resolved.real;
      constexpr double kTwo63 = 9223372036854775808.0;
      if (std::isnan(f) || f > kTwo63) break;
      if (f >= kTwo63 || f < -kTwo63) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(f);  // toward zero, as Go
    }
    default:
      break;
  }
  return Error(CannotUnmarshal(resolved.kind, text, into));
}

}  // namespace

std::expected<int64_t, std::string> ParseGoDuration(std::string_view text) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  const auto invalid = [&] { return Error("time: invalid duration " + quoted); };
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return 0;
  if (s.empty()) return invalid();
  constexpr uint64_t kTwo63 = uint64_t{1} << 63;
  uint64_t total = 0;
  while (!s.empty()) {
    if (!(s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) return invalid();
    // [0-9]*
    uint64_t whole = 0;
    size_t i = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (whole > kTwo63 / 10) return invalid();
      whole = whole * 10 + static_cast<uint64_t>(s[i] - '0');
      if (whole > kTwo63) return invalid();
    }
    const bool before_point = i > 0;
    s.remove_prefix(i);
    // (\.[0-9]*)?
    uint64_t fraction = 0;
    double scale = 1;
    bool after_point = false;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      bool overflow = false;
      for (i = 0; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        if (overflow) continue;
        if (fraction > (kTwo63 - 1) / 10) {
          overflow = true;  // digits past int64's precision are dropped
          continue;
        }
        const uint64_t next = fraction * 10 + static_cast<uint64_t>(s[i] - '0');
        if (next > kTwo63) {
          overflow = true;
          continue;
        }
        fraction = next;
        scale *= 10;
      }
      after_point = i > 0;
      s.remove_prefix(i);
    }
    if (!before_point && !after_point) return invalid();  // ".s", "-.s"
    // The unit: everything up to the next digit or point.
    for (i = 0; i < s.size() && s[i] != '.' && !(s[i] >= '0' && s[i] <= '9'); ++i) {
    }
    if (i == 0) return Error("time: missing unit in duration " + quoted);
    const std::string_view unit_name = s.substr(0, i);
    s.remove_prefix(i);
    uint64_t unit = 0;
    if (unit_name == "ns") unit = 1;
    if (unit_name == "us" || unit_name == "\u00b5s" || unit_name == "\u03bcs") unit = 1000;
    if (unit_name == "ms") unit = 1000000;
    if (unit_name == "s") unit = 1000000000;
    if (unit_name == "m") unit = 60 * uint64_t{1000000000};
    if (unit_name == "h") unit = 3600 * uint64_t{1000000000};
    if (unit == 0) {
      return Error("time: unknown unit \"" + std::string(unit_name) + "\" in duration " + quoted);
    }
    if (whole > kTwo63 / unit) return invalid();
    whole *= unit;
    if (fraction > 0) {
      whole += static_cast<uint64_t>(static_cast<double>(fraction) *
                                     (static_cast<double>(unit) / scale));
      if (whole > kTwo63) return invalid();
    }
    total += whole;
    if (total > kTwo63) return invalid();
  }
  if (negative) return static_cast<int64_t>(0 - total);
  if (total > kTwo63 - 1) return invalid();
  return static_cast<int64_t>(total);
}

std::expected<int64_t, std::string> DecodeGoInt(const YamlScalar& scalar) {
  if (!scalar.plain) return Error(CannotUnmarshal(Resolved::kString, scalar.text, "int"));
  return ToInt(Resolve(scalar.text), scalar.text, "int");
}

std::expected<int64_t, std::string> DecodeGoDuration(const YamlScalar& scalar) {
  const Resolved resolved = scalar.plain ? Resolve(scalar.text) : Resolved{};
  if (resolved.kind != Resolved::kString) {
    return ToInt(resolved, scalar.text, "time.Duration");
  }
  auto duration = ParseGoDuration(scalar.text);
  if (!duration) {
    // yaml.v2 says only "cannot unmarshal"; Go's own reason is more use to a reader.
    return Error(CannotUnmarshal(Resolved::kString, scalar.text, "time.Duration") + " (" +
                 duration.error() + ")");
  }
  return duration;
}

}  // namespace rdmascope::web
