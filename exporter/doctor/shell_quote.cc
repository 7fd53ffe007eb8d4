#include "doctor/shell_quote.h"

#include <algorithm>

#include "core/metric_set.h"

namespace rdmascope::doctor {
namespace {

// Characters POSIX sh gives no meaning in a word (XCU 2.2, 2.6): letters, digits and these.
// '=' only matters before the command name (an assignment), which a value never is here.
bool PlainWordCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_-./:=@%+,").find(c) != std::string_view::npos;
}

}  // namespace

bool HasControlCharacters(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) return true;
    if (byte == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return true;
    }
  }
  return false;
}

std::optional<std::string> ShellQuote(std::string_view value) {
  if (value.empty() || value.front() == '-' || HasControlCharacters(value)) return std::nullopt;
  // Invalid UTF-8 would reach the terminal as bytes a person cannot read back.
  if (SanitizeUtf8(value) != value) return std::nullopt;
  bool plain = true;
  for (const char c : value) plain = plain && PlainWordCharacter(c);
  if (plain) return std::string(value);
  std::string quoted = "'";
  for (const char c : value) {
    if (c == '\'') {
      quoted += "'\\''";  // close, an escaped quote, reopen
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string FixLine(std::initializer_list<FixPart> parts) {
  std::string line;
  for (const FixPart& part : parts) {
    if (!part.from_host) {
      line += part.text;
      continue;
    }
    const auto quoted = ShellQuote(part.text);
    if (!quoted) return "";
    line += *quoted;
  }
  return line;
}

std::string QuotedWords(std::string_view text) {
  std::string words;
  for (size_t at = 0; at < text.size();) {
    const size_t space = std::min(text.find(' ', at), text.size());
    if (space > at) {
      const auto quoted = ShellQuote(text.substr(at, space - at));
      if (!quoted) return "";
      words += (words.empty() ? "" : " ") + *quoted;
    }
    at = space + 1;
  }
  return words;
}

}  // namespace rdmascope::doctor
