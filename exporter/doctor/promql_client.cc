#include "doctor/promql_client.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace rdmascope::doctor {
namespace {

std::string Seconds(double time) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", time);
  return text;
}

class HttpTransport final : public PromqlTransport {
 public:
  HttpTransport(HttpUrl url, HttpClientOptions client, std::chrono::milliseconds timeout)
      : url_(std::move(url)), client_(std::move(client)), timeout_(timeout) {}

  std::expected<PromqlReply, std::string> Get(const std::string& target) override {
    auto answer = HttpGet(url_, target, timeout_, client_, 1U << 30);
    if (!answer) return std::unexpected(answer.error().message);
    return PromqlReply{.status = answer->status, .body = std::move(answer->body)};
  }

 private:
  const HttpUrl url_;
  const HttpClientOptions client_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<PromqlTransport> HttpPromqlTransport(HttpUrl url, HttpClientOptions client,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<HttpTransport>(std::move(url), std::move(client), timeout);
}

std::string QueryTarget(const std::string& promql, double time, double start, double step) {
  return start > 0 ? "/api/v1/query_range?query=" + UrlEncode(promql) + "&start=" + Seconds(start) +
                         "&end=" + Seconds(time) + "&step=" + Seconds(step)
                   : "/api/v1/query?query=" + UrlEncode(promql) + "&time=" + Seconds(time);
}

std::string UrlEncode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::optional<double> ParseEvaluationTime(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text.find_first_not_of("0123456789.") == std::string::npos) {
    double seconds = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (error != std::errc() || end != text.data() + text.size() || seconds <= 0) {
      return std::nullopt;
    }
    return seconds;
  }
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  double fraction = 0;
  if (*rest == '.') {
    const char* digits = rest + 1;
    double scale = 0.1;
    for (rest = digits; std::isdigit(static_cast<unsigned char>(*rest)); ++rest, scale /= 10) {
      fraction += (*rest - '0') * scale;
    }
    if (rest == digits) return std::nullopt;
  }
  long offset = 0;
  if (*rest == 'Z' || *rest == 'z') {
    ++rest;
  } else if (*rest == '+' || *rest == '-') {
    int hours = 0, minutes = 0;
    if (std::sscanf(rest + 1, "%2d:%2d", &hours, &minutes) != 2 || std::strlen(rest) != 6 ||
        hours > 23 || minutes > 59) {
      return std::nullopt;
    }
    offset = (*rest == '+' ? 1 : -1) * (hours * 3600L + minutes * 60L);
    rest += 6;
  } else {
    return std::nullopt;  // RFC 3339 requires the offset
  }
  if (*rest != '\0') return std::nullopt;
  const std::time_t utc = timegm(&tm);
  if (utc <= 0) return std::nullopt;
  return static_cast<double>(utc - offset) + fraction;
}

std::string PrometheusMatchers(const std::string& selector, const std::string& job) {
  std::string matchers = selector;
  const size_t first = matchers.find_first_not_of(" \t");
  const size_t last = matchers.find_last_not_of(" \t");
  matchers = first == std::string::npos ? "" : matchers.substr(first, last - first + 1);
  if (matchers.starts_with("{") != matchers.ends_with("}")) {
    throw std::invalid_argument("--prometheus.selector " + selector + ": unbalanced braces");
  }
  if (matchers.starts_with("{")) matchers = matchers.substr(1, matchers.size() - 2);
  if (!job.empty()) {
    std::string quoted;
    for (const char c : job) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    matchers += (matchers.empty() ? "" : ",") + std::string("job=\"") + quoted + "\"";
  }
  return matchers;
}

}  // namespace rdmascope::doctor
