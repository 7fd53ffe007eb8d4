#include "core/terminal_text.h"

#include <cstdio>

#include "core/metric_set.h"

namespace rdmascope {
namespace {

bool IsC1Second(unsigned char byte) { return byte >= 0x80 && byte <= 0x9f; }

}  // namespace

std::string EscapeControls(std::string_view text) {
  const std::string valid = SanitizeUtf8(text);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    const auto byte = static_cast<unsigned char>(valid[i]);
    char escaped[8];
    if (byte < 0x20 || byte == 0x7f) {
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else if (byte == 0xc2 && i + 1 < valid.size() &&
               IsC1Second(static_cast<unsigned char>(valid[i + 1]))) {
      // U+0080..U+009F is encoded C2 80..C2 9F.
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(valid[i + 1]));
      out += escaped;
      ++i;
    } else {
      out += valid[i];
    }
  }
  return out;
}

std::string EscapeJsonControls(std::string json) {
  bool any = false;
  for (size_t i = 0; i < json.size() && !any; ++i) {
    const auto byte = static_cast<unsigned char>(json[i]);
    any = byte == 0x7f || (byte == 0xc2 && i + 1 < json.size() &&
                           IsC1Second(static_cast<unsigned char>(json[i + 1])));
  }
  if (!any) return json;
  std::string out;
  out.reserve(json.size() + 16);
  for (size_t i = 0; i < json.size(); ++i) {
    const auto byte = static_cast<unsigned char>(json[i]);
    char escaped[8];
    if (byte == 0x7f) {
      out += "\\u007f";
    } else if (byte == 0xc2 && i + 1 < json.size() &&
               IsC1Second(static_cast<unsigned char>(json[i + 1]))) {
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(json[i + 1]));
      out += escaped;
      ++i;
    } else {
      out += json[i];
    }
  }
  return out;
}

}  // namespace rdmascope
