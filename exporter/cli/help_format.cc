#include "cli/help_format.h"

#include <algorithm>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

namespace rdmascope {
namespace {

// Names and descriptions: the description starts at this column, or on the next line when the
// name (with its type and default) reaches it.
constexpr std::size_t kDescriptionColumn = 32;

std::string Layout(const std::string& head, const std::string& description) {
  std::string out = head;
  if (description.empty()) return out + "\n";
  if (out.size() + 2 > kDescriptionColumn) {
    out += "\n" + std::string(kDescriptionColumn, ' ');
  } else {
    out.resize(kDescriptionColumn, ' ');
  }
  return out + WrapText(description, kDescriptionColumn, kHelpWidth, false) + "\n";
}

// CLI11's type name is "TYPE" or "TYPE:CHECK" ("INT:INT in [1 - 64]", "TEXT:FILE",
// "TEXT:{raw,label,sum}").
std::pair<std::string, std::string> TypeAndCheck(const CLI::Option* opt) {
  const std::string name = opt->get_type_name();
  const auto colon = name.find(':');
  if (colon == std::string::npos) return {name, ""};
  return {name.substr(0, colon), name.substr(colon + 1)};
}

// "1 - 64" of a CLI::Range check ("INT in [1 - 64]"), else "".
std::string RangeOf(const std::string& check) {
  const auto open = check.find(" in [");
  if (open == std::string::npos || check.back() != ']') return "";
  return check.substr(open + 5, check.size() - open - 6);
}

}  // namespace

std::string WrapText(const std::string& text, std::size_t indent, std::size_t width,
                     bool indent_first) {
  std::string out = indent_first ? std::string(indent, ' ') : "";
  std::size_t column = indent;
  std::istringstream paragraphs(text);
  std::string paragraph;
  bool first_paragraph = true;
  // Explicit newlines in a description start a new line; words are split on spaces.
  while (std::getline(paragraphs, paragraph)) {
    if (!first_paragraph) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    }
    first_paragraph = false;
    std::istringstream words(paragraph);
    std::string word;
    bool line_start = true;
    while (words >> word) {
      if (!line_start && column + 1 + word.size() > width) {
        out += "\n" + std::string(indent, ' ');
        column = indent;
        line_start = true;
      }
      if (!line_start) {
        out += ' ';
        ++column;
      }
      out += word;
      column += word.size();
      line_start = false;
    }
  }
  return out;
}

HelpFormatter::HelpFormatter() { column_width(kDescriptionColumn); }

std::string HelpFormatter::make_option(const CLI::Option* opt, bool is_positional) const {
  // A positional has no `=`: it is listed with its type, as CLI11 does.
  const std::string opts =
      is_positional ? CLI::Formatter::make_option_opts(opt) : make_option_opts(opt);
  return Layout("  " + make_option_name(opt, is_positional) + opts, make_option_desc(opt));
}

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
  if (is_positional) return opt->get_name(true, false);
  // A flag and its negation (`--x,!--no-x`): one entry, as node_exporter prints it.
  const std::vector<std::string>& names = opt->get_lnames();
  if (names.size() == 2 && opt->get_snames().empty() && names[1] == "no-" + names[0]) {
    return "--[no-]" + names[0];
  }
  std::string joined;
  for (const std::string& name : opt->get_snames()) joined += (joined.empty() ? "-" : ", -") + name;
  for (const std::string& name : names) joined += (joined.empty() ? "--" : ", --") + name;
  return joined;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  if (opt->get_expected_max() == 0) return "";  // a flag
  const auto [type, check] = TypeAndCheck(opt);
  // The default when there is one, else what to give: a file, one of a set, or the type.
  std::string value = opt->get_default_str();
  if (value.empty()) value = check.empty() || !RangeOf(check).empty() ? type : check;
  const bool repeatable = opt->get_expected_max() == CLI::detail::expected_max_vector_size;
  return "=" + value + (repeatable ? " ..." : "");
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
  const std::string range = RangeOf(TypeAndCheck(opt).second);
  const std::string& description = opt->get_description();
  std::string compact = range;  // "0-7": the description may give the range itself
  std::erase(compact, ' ');
  if (range.empty() || description.find(compact) != std::string::npos) return description;
  return description + " (" + compact + ")";
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
  return Layout("  " + sub->get_display_name(), sub->get_description());
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
  const std::string description = app->get_description();
  return description.empty() ? "" : WrapText(description, 0, kHelpWidth, false) + "\n";
}

void UseHelpFormatter(CLI::App& app) { app.formatter(std::make_shared<HelpFormatter>()); }

}  // namespace rdmascope
