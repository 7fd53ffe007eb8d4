// The `fix` lines doctor prints are command lines a person pastes into a root shell, and the
// values in them (netdev, device and process names, paths, pids) come from the host, where a
// tenant may choose them: a process can name itself `$(reboot)` (prctl PR_SET_NAME), a
// container its interfaces. Every such value goes through here: a word made only of
// characters no shell treats specially is printed as it is; any other is single-quoted (POSIX
// sh: nothing is special between single quotes but the closing quote, written '\''); a value
// that cannot be pasted safely at all (a control character, invalid UTF-8, a leading '-'
// that a command would read as an option, empty) makes the whole fix empty: no fix rather
// than a wrong one.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace rdmascope::doctor {

// `value` as one shell word, or nullopt when it cannot be pasted safely (above).
std::optional<std::string> ShellQuote(std::string_view value);

// One piece of a fix line: text doctor wrote itself (a string literal, a number it
// formatted), or a value from the host, marked with HostValue() and quoted.
struct FixPart {
  FixPart(const char* literal) : text(literal) {}         // NOLINT: literals read naturally
  FixPart(const std::string& written) : text(written) {}  // NOLINT
  std::string_view text;
  bool from_host = false;
};
inline FixPart HostValue(const std::string& value) {
  FixPart part(value);
  part.from_host = true;
  return part;
}

// The parts joined, every HostValue() value quoted; empty when one of them cannot be.
std::string FixLine(std::initializer_list<FixPart> parts);

// Space-separated host values ("26:3 48:6"), each quoted, joined by single spaces; empty when
// one cannot be.
std::string QuotedWords(std::string_view text);

// Whether `text` holds a byte a terminal acts on: C0 controls (ESC among them), DEL, or a C1
// control (U+0080..U+009F, UTF-8 C2 80..C2 9F).
bool HasControlCharacters(std::string_view text);

}  // namespace rdmascope::doctor
