// docs/runbook.md as the HTML served at /runbook. Rendered when the binary is built
// (runbook_gen.cc, run by CMake), so `serve` carries the page matching its own rules and never
// links libcmark; this code is linked by the generator and the unit tests only.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace rdmascope {

// GitHub's anchor for a heading's text (github-slugger, what the rules' runbook_url fragments
// were written against): lowercase; every character that is not a letter, digit, space, '-'
// or '_' dropped; each space a '-'. ASCII exactly; beyond it, Latin-1 capitals are lowercased,
// the common punctuation and symbol blocks (Latin-1 signs, General Punctuation, currency,
// arrows to dingbats, emoji) dropped and everything else kept as written.
std::string GithubSlug(std::string_view heading_text);

// Slugs of one document in order: a slug already given gets "-1", "-2"... as on GitHub (where
// "a-1" may itself be a heading's slug, so the counter skips taken ones).
class HeadingSlugger {
 public:
  std::string Next(std::string_view heading_text);

 private:
  std::map<std::string, int, std::less<>> occurrences_;
};

// The body of the page: CommonMark rendered by cmark in its safe mode (raw HTML omitted,
// javascript:/vbscript:/file: and non-image data: URLs dropped), every heading given the id of
// its GitHub slug, and links that cannot resolve on an exporter (relative ones, to other files
// of docs/) replaced by their text and the file they name. Throws std::runtime_error if cmark
// fails.
std::string RenderRunbookBody(std::string_view markdown);

}  // namespace rdmascope
