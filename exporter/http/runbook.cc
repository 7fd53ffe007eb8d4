#include "http/runbook.h"

#include <cmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <vector>

namespace rdmascope {
namespace {

// The code point of the UTF-8 sequence at text[i] and its length; a malformed sequence is one
// byte of code point 0 (dropped by the caller). cmark validates the document's UTF-8, so this
// only guards direct callers.
std::pair<uint32_t, size_t> DecodeUtf8(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  const size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  if (length == 0 || i + length > text.size()) return {0, 1};
  uint32_t code = lead & (0x7FU >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {0, 1};
    code = (code << 6) | (byte(i + k) & 0x3FU);
  }
  return {code, length};
}

// Punctuation and symbols beyond ASCII that github-slugger drops (not letters, marks or
// digits): the blocks a heading is likely to hold, not the whole Unicode table.
bool DroppedBeyondAscii(uint32_t code) {
  // Latin-1 signs but ª µ º (letters), and × ÷.
  if (code < 0xC0) return code != 0xAA && code != 0xB5 && code != 0xBA;
  return code == 0xD7 || code == 0xF7 ||
         (code >= 0x2000 && code <= 0x206F) ||  // General Punctuation: dashes, quotes, ...
         (code >= 0x20A0 && code <= 0x20CF) ||  // currency signs
         (code >= 0x2190 && code <= 0x2BFF) ||  // arrows, maths, technical, shapes, dingbats
         (code >= 0x1F000 && code <= 0x1FAFF);  // emoji and pictographs
}

// What GitHub's slug is computed from: the heading's rendered text (code spans' content and
// link text included, images and raw HTML not).
void AppendText(cmark_node* node, std::string& out) {
  for (cmark_node* child = cmark_node_first_child(node); child != nullptr;
       child = cmark_node_next(child)) {
    switch (cmark_node_get_type(child)) {
      case CMARK_NODE_TEXT:
      case CMARK_NODE_CODE:
        out += cmark_node_get_literal(child);
        break;
      case CMARK_NODE_IMAGE:
      case CMARK_NODE_HTML_INLINE:
        break;
      default:
        AppendText(child, out);
    }
  }
}

// A link target that names another file of the source tree ("doctor.md#x", "../README.md"):
// it resolves on GitHub, not on the exporter. In-page fragments, URLs with a scheme and
// absolute paths (the exporter's own, such as /debug/mr/stacks) are left alone.
bool NamesAnotherFile(std::string_view url) {
  if (url.empty() || url.front() == '#' || url.front() == '/') return false;
  const size_t colon = url.find(':');
  if (colon == std::string_view::npos) return true;
  for (size_t i = 0; i < colon; ++i) {
    const char c = url[i];
    const bool scheme_char =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
    if (!scheme_char) return true;  // "a/b:c" is a path
  }
  return false;
}

cmark_node* NewLiteral(cmark_node_type type, const std::string& literal) {
  cmark_node* node = cmark_node_new(type);
  cmark_node_set_literal(node, literal.c_str());
  return node;
}

// "[the checks](doctor.md#x)" becomes "the checks (`docs/doctor.md#x`)": the reader still
// learns where to look, and the page has no dead link.
void ReplaceFileLink(cmark_node* link) {
  std::string path = cmark_node_get_url(link);
  path = path.starts_with("../") ? path.substr(3) : "docs/" + path;
  while (cmark_node* child = cmark_node_first_child(link)) cmark_node_insert_before(link, child);
  cmark_node_insert_before(link, NewLiteral(CMARK_NODE_TEXT, " ("));
  cmark_node_insert_before(link, NewLiteral(CMARK_NODE_CODE, path));
  cmark_node_insert_before(link, NewLiteral(CMARK_NODE_TEXT, ")"));
  cmark_node_free(link);  // unlinks it
}

struct NodeDeleter {
  void operator()(cmark_node* node) const { cmark_node_free(node); }
};
struct IterDeleter {
  void operator()(cmark_iter* iter) const { cmark_iter_free(iter); }
};

}  // namespace

std::string GithubSlug(std::string_view heading_text) {
  std::string slug;
  for (size_t i = 0; i < heading_text.size();) {
    const char c = heading_text[i];
    if (static_cast<unsigned char>(c) < 0x80) {
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
        slug += c;
      } else if (c >= 'A' && c <= 'Z') {
        slug += static_cast<char>(c - 'A' + 'a');
      } else if (c == ' ') {
        slug += '-';
      }
      ++i;
      continue;
    }
    auto [code, length] = DecodeUtf8(heading_text, i);
    if (code != 0 && !DroppedBeyondAscii(code)) {
      if (code >= 0xC0 && code <= 0xDE) {
        // Latin-1 capitals: their small letters are 0x20 above, and two bytes long as well.
        slug += static_cast<char>(heading_text[i]);
        slug += static_cast<char>(heading_text[i + 1] + 0x20);
      } else {
        slug.append(heading_text.substr(i, length));
      }
    }
    i += length;
  }
  return slug;
}

std::string HeadingSlugger::Next(std::string_view heading_text) {
  const std::string original = GithubSlug(heading_text);
  std::string slug = original;
  while (occurrences_.contains(slug)) {
    slug = original + "-" + std::to_string(++occurrences_[original]);
  }
  occurrences_[slug] = 0;
  return slug;
}

std::string RenderRunbookBody(std::string_view markdown) {
  std::unique_ptr<cmark_node, NodeDeleter> document(
      cmark_parse_document(markdown.data(), markdown.size(), CMARK_OPT_VALIDATE_UTF8));
  if (!document) throw std::runtime_error("cmark could not parse the runbook");

  // Slugs from the headings as written, before any link in them is rewritten.
  std::vector<std::string> ids;
  std::vector<cmark_node*> file_links;
  HeadingSlugger slugger;
  {
    std::unique_ptr<cmark_iter, IterDeleter> iter(cmark_iter_new(document.get()));
    for (cmark_event_type event; (event = cmark_iter_next(iter.get())) != CMARK_EVENT_DONE;) {
      if (event != CMARK_EVENT_ENTER) continue;
      cmark_node* node = cmark_iter_get_node(iter.get());
      const cmark_node_type type = cmark_node_get_type(node);
      if (type == CMARK_NODE_HEADING) {
        std::string text;
        AppendText(node, text);
        ids.push_back(slugger.Next(text));
      } else if ((type == CMARK_NODE_LINK || type == CMARK_NODE_IMAGE) &&
                 NamesAnotherFile(cmark_node_get_url(node))) {
        file_links.push_back(node);
      }
    }
  }
  // After the walk: the iterator must not meet nodes it has been handed back freed.
  for (cmark_node* link : file_links) ReplaceFileLink(link);

  // Safe mode (cmark's default since 0.29; CMARK_OPT_SAFE kept for older libraries).
  std::unique_ptr<char, decltype(&std::free)> rendered(
      cmark_render_html(document.get(), CMARK_OPT_SAFE), &std::free);
  if (!rendered) throw std::runtime_error("cmark could not render the runbook");
  const std::string_view html = rendered.get();

  // cmark writes each heading's start tag as exactly "<hN>", in document order; text, code and
  // attributes are escaped and raw HTML omitted, so no other "<hN>" can appear. The k-th one is
  // the k-th heading of the walk above.
  std::string out;
  out.reserve(html.size() + ids.size() * 32);
  size_t done = 0;
  size_t heading = 0;
  for (size_t at = html.find("<h"); at != std::string_view::npos; at = html.find("<h", at + 1)) {
    if (at + 3 >= html.size() || html[at + 2] < '1' || html[at + 2] > '6' || html[at + 3] != '>')
      continue;
    if (heading == ids.size()) throw std::runtime_error("cmark wrote more headings than it parsed");
    out.append(html.substr(done, at + 3 - done));
    if (!ids[heading].empty()) out += " id=\"" + ids[heading] + "\"";
    ++heading;
    done = at + 3;
  }
  if (heading != ids.size()) throw std::runtime_error("cmark wrote fewer headings than it parsed");
  out.append(html.substr(done));
  return out;
}

}  // namespace rdmascope
