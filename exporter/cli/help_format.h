// How every subcommand's --help reads: node_exporter's `--[no-]collector.NAME` for a flag with a
// negated name (CLI11 would print `--collector.NAME,--no-collector.NAME{false}`), the value as
// `--flag=DEFAULT` (or `=TYPE` without one; CLI11 would print `--flag INT:INT in [1 - 64]=4`)
// with a range moved to the description, long descriptions wrapped under their option at
// kHelpWidth columns, and subcommand descriptions wrapped the same way. help2man turns this text
// into the man page (packaging/debian).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace rdmascope {

inline constexpr std::size_t kHelpWidth = 100;

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter();
  std::string make_option(const CLI::Option* opt, bool is_positional) const override;
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
  std::string make_option_opts(const CLI::Option* opt) const override;
  std::string make_option_desc(const CLI::Option* opt) const override;
  std::string make_subcommand(const CLI::App* sub) const override;
  std::string make_description(const CLI::App* app) const override;
};

// Installs HelpFormatter on `app`; call it before adding subcommands, which inherit it.
void UseHelpFormatter(CLI::App& app);

// `text` broken at spaces into lines of at most `width` columns (a longer word stays whole),
// each line after the first (and the first when `indent_first`) indented by `indent`.
std::string WrapText(const std::string& text, std::size_t indent, std::size_t width,
                     bool indent_first);

}  // namespace rdmascope
