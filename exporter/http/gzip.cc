#include "http/gzip.h"

#include <algorithm>
#include <cctype>

namespace rdmascope {
namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// "q=0", "q=0.0", "q=0.000" refuse the coding (RFC 9110 12.4.2); any other weight accepts it.
bool RefusedByWeight(std::string_view parameters) {
  while (!parameters.empty()) {
    const auto semicolon = parameters.find(';');
    const std::string_view parameter = Trim(parameters.substr(0, semicolon));
    if (parameter.size() >= 2 && (parameter[0] == 'q' || parameter[0] == 'Q') &&
        parameter[1] == '=') {
      const std::string_view weight = parameter.substr(2);
      return !weight.empty() && weight.find_first_not_of("0.") == std::string_view::npos;
    }
    if (semicolon == std::string_view::npos) break;
    parameters.remove_prefix(semicolon + 1);
  }
  return false;
}

}  // namespace

bool AcceptsGzip(std::string_view accept_encoding) {
  while (!accept_encoding.empty()) {
    const auto comma = accept_encoding.find(',');
    const std::string_view item = accept_encoding.substr(0, comma);
    const auto semicolon = item.find(';');
    const std::string_view coding = Trim(item.substr(0, semicolon));
    if ((EqualsIgnoreCase(coding, "gzip") || coding == "*") &&
        !(semicolon != std::string_view::npos && RefusedByWeight(item.substr(semicolon + 1)))) {
      return true;
    }
    if (comma == std::string_view::npos) break;
    accept_encoding.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace rdmascope
