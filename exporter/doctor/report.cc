#include "doctor/report.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/html.h"
#include "core/terminal_text.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kAreas[] = {"fleet", "links", "roce", "nic", "queues", "memory", "host"};

int AreaRank(const std::string& area) {
  for (int i = 0; i < static_cast<int>(std::size(kAreas)); ++i) {
    if (area == kAreas[i]) return i;
  }
  return static_cast<int>(std::size(kAreas));
}

// Worst first; skipped checks last: they are what doctor could not see.
int SeverityRank(Severity severity) {
  switch (severity) {
    case Severity::kCrit:
      return 0;
    case Severity::kWarn:
      return 1;
    case Severity::kInfo:
      return 2;
    case Severity::kOk:
      return 3;
    case Severity::kSkip:
      return 4;
  }
  return 5;
}

const char* AreaTitle(const std::string& area) {
  if (area == "fleet") return "Fleet drift";
  if (area == "links") return "Links and ports";
  if (area == "roce") return "RoCE network configuration";
  if (area == "nic") return "NIC, PCIe and firmware";
  if (area == "queues") return "Queues";
  if (area == "memory") return "Memory registrations";
  if (area == "host") return "Host and exporter";
  return "Other";
}

constexpr Severity kSeverities[] = {Severity::kCrit, Severity::kWarn, Severity::kInfo,
                                    Severity::kOk, Severity::kSkip};

std::map<Severity, int> Count(const std::vector<Finding>& findings, const ReportContext& context) {
  std::map<Severity, int> count;
  for (Severity severity : kSeverities) count[severity] = 0;
  for (const Finding& finding : findings) ++count[finding.severity];
  for (const auto& [id, ok] : context.ok_by_check) count[Severity::kOk] += static_cast<int>(ok);
  return count;
}

std::string Thousands(size_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return digits;
}

// "12 ok findings counted (...)": what a fleet report says instead of listing them.
std::string OkCountedText(const ReportContext& context) {
  size_t total = 0;
  std::string checks;
  for (const auto& [id, ok] : context.ok_by_check) {
    total += ok;
    checks += (checks.empty() ? "" : ", ") + id + " " + Thousands(ok);
  }
  return Thousands(total) + " ok, counted (" + std::to_string(context.ok_by_check.size()) +
         " checks; --show-ok lists them): " + checks;
}

std::string QueryText(const ReportQuery& query) {
  return (query.start.empty() ? "at " + query.time
                              : "from " + query.start + " to " + query.time + " every " +
                                    std::to_string(static_cast<int>(query.step_seconds)) + "s") +
         ", " + Thousands(query.series) + " series, " + Thousands(query.bytes) + " bytes, " +
         std::to_string(static_cast<int>(query.seconds * 1000)) + " ms";
}

// Where a finding's runbook is: a fleet finding's host serves it (the alert rules' runbook_url
// points there too); on one host, the /runbook beside /doctor.html.
std::string RunbookLink(const Finding& finding) {
  const size_t hash = finding.runbook.find('#');
  const std::string anchor = hash == std::string::npos ? "" : finding.runbook.substr(hash);
  for (const auto& [key, value] : finding.scope) {
    if (key == "instance" && value.find_first_of("/\"<> ") == std::string::npos) {
      return "http://" + value + "/runbook" + anchor;
    }
  }
  return "/runbook" + anchor;
}

std::string ScopeText(const Scope& scope) {
  std::string text;
  for (const auto& [key, value] : scope) text += (text.empty() ? "" : " ") + key + "=" + value;
  return text;
}

const char* Colour(Severity severity) {
  switch (severity) {
    case Severity::kCrit:
      return "\033[1;31m";
    case Severity::kWarn:
      return "\033[33m";
    case Severity::kInfo:
      return "\033[36m";
    case Severity::kOk:
      return "\033[32m";
    case Severity::kSkip:
      return "\033[2m";
  }
  return "";
}

// For a person: "10 s", "3.9 s" (a window read from an exporter is the time between two of its
// collections, never round), "12 min", "2.5 h". JSON keeps the exact figure.
std::string Window(double seconds) {
  char buffer[32];
  if (seconds < 60) {
    std::snprintf(buffer, sizeof buffer, "%.1f", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buffer, sizeof buffer, "%.0f min", seconds / 60);
    return buffer;
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f", seconds / 3600);
  }
  std::string text = buffer;
  if (text.ends_with(".0")) text.resize(text.size() - 2);
  return text + (seconds < 60 ? " s" : " h");
}

// Where an exporter's window came from; a live window (or none) needs no words.
std::string WindowKindText(const std::string& kind) {
  if (kind == kWindowLookback) return " of the exporter's history";
  if (kind == kWindowSinceStart) return ", since the exporter started: younger than its lookback";
  if (kind == kWindowCapture) return " between the capture's first and last sample";
  return "";
}

// The areas of a report to print, worst first: by the worst severity of their findings (skip
// not counted), then in the areas' order; each area's findings in `findings`' order (worst
// first after SortFindings). Skipped findings only with `with_skipped`; an area with nothing
// else to print is left out.
using Section = std::pair<std::string, std::vector<const Finding*>>;
std::vector<Section> Sections(const std::vector<Finding>& findings, bool with_skipped) {
  std::vector<Section> sections;
  for (const Finding& finding : findings) {
    if (finding.severity == Severity::kSkip && !with_skipped) continue;
    auto section = std::find_if(sections.begin(), sections.end(),
                                [&](const Section& s) { return s.first == finding.area; });
    if (section == sections.end()) {
      sections.emplace_back(finding.area, std::vector<const Finding*>{});
      section = sections.end() - 1;
    }
    section->second.push_back(&finding);
  }
  const auto worst = [](const Section& section) {
    int rank = SeverityRank(Severity::kSkip);
    for (const Finding* finding : section.second) {
      rank = std::min(rank, SeverityRank(finding->severity));
    }
    return rank;
  };
  std::stable_sort(sections.begin(), sections.end(), [&](const Section& a, const Section& b) {
    return std::pair(worst(a), AreaRank(a.first)) < std::pair(worst(b), AreaRank(b.first));
  });
  return sections;
}

// Where a display-only fix applies: the finding's instance in a fleet report, else the host
// the report is of.
std::string FixHost(const Finding& finding, const ReportContext& context) {
  for (const auto& [key, value] : finding.scope) {
    if (key == "instance") return value;
  }
  return context.host;
}

}  // namespace

void CountOk(std::vector<Finding>& findings, ReportContext& context) {
  for (const Finding& finding : findings) {
    if (finding.severity == Severity::kOk) ++context.ok_by_check[finding.id];
  }
  std::erase_if(findings, [](const Finding& f) { return f.severity == Severity::kOk; });
}

void SortFindings(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    const auto key = [](const Finding& f) {
      return std::tuple(AreaRank(f.area), SeverityRank(f.severity), std::string_view(f.id));
    };
    return key(a) < key(b);
  });
}

std::string RenderJson(const std::vector<Finding>& findings, const ReportContext& context) {
  nlohmann::ordered_json out;
  out["schema_version"] = 1;
  out["host"] = context.host;
  out["generated"] = context.generated;
  out["window_seconds"] = context.window_seconds;
  // Absent only when re-rendering the report of an exporter older than the field.
  if (!context.window_kind.empty()) out["window_kind"] = context.window_kind;
  if (context.instances > 0) out["instances"] = context.instances;
  // Added within schema_version 1: only when true.
  if (context.fixes_display_only) out["fixes_display_only"] = true;
  if (!context.warnings.empty()) out["warnings"] = context.warnings;  // also added within 1
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Finding& finding : findings) {
    nlohmann::ordered_json item;
    item["id"] = finding.id;
    item["area"] = finding.area;
    item["severity"] = std::string(SeverityName(finding.severity));
    nlohmann::ordered_json scope = nlohmann::ordered_json::object();
    for (const auto& [key, value] : finding.scope) scope[key] = value;
    item["scope"] = std::move(scope);
    item["observed"] = finding.observed;
    item["expected"] = finding.expected;
    item["advice"] = finding.advice;
    item["fix"] = finding.fix;
    item["runbook"] = finding.runbook;
    list.push_back(std::move(item));
  }
  out["findings"] = std::move(list);
  nlohmann::ordered_json summary;
  const auto count = Count(findings, context);
  for (Severity severity : kSeverities) {
    summary[std::string(SeverityName(severity))] = count.at(severity);
  }
  out["summary"] = std::move(summary);
  if (!context.ok_by_check.empty()) out["ok_by_check"] = context.ok_by_check;
  if (!context.queries.empty()) {
    nlohmann::ordered_json queries = nlohmann::ordered_json::array();
    for (const ReportQuery& query : context.queries) {
      nlohmann::ordered_json item;
      item["promql"] = query.promql;
      item["time"] = query.time;
      if (!query.start.empty()) {
        item["start"] = query.start;
        item["step_seconds"] = query.step_seconds;
      }
      item["series"] = query.series;
      item["bytes"] = query.bytes;
      item["seconds"] = query.seconds;
      queries.push_back(std::move(item));
    }
    out["queries"] = std::move(queries);
  }
  // Label values from drivers may hold invalid UTF-8: replace rather than throw. The
  // encoder escapes C0 controls; DEL and C1 ones too, for whoever prints it to a terminal.
  return EscapeJsonControls(
      out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
}

std::expected<ParsedReport, std::string> ParseJson(const std::string& text) {
  const auto json = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return std::unexpected("not a JSON object");
  try {
    if (json.at("schema_version").get<int>() != 1) {
      return std::unexpected("schema_version " + json.at("schema_version").dump() +
                             ", this doctor reads 1");
    }
    ParsedReport report;
    report.context.host = json.at("host").get<std::string>();
    report.context.generated = json.at("generated").get<std::string>();
    report.context.window_seconds = json.at("window_seconds").get<double>();
    // Added within schema_version 1: an older exporter's report has none.
    report.context.window_kind = json.value("window_kind", std::string());
    if (const auto warnings = json.find("warnings"); warnings != json.end()) {
      for (const auto& warning : *warnings)
        report.context.warnings.push_back(warning.get<std::string>());
    }
    for (const auto& item : json.at("findings")) {
      Finding finding;
      finding.id = item.at("id").get<std::string>();
      finding.area = item.at("area").get<std::string>();
      const std::string severity = item.at("severity").get<std::string>();
      bool known = false;
      for (Severity candidate : kSeverities) {
        if (SeverityName(candidate) == severity) {
          finding.severity = candidate;
          known = true;
        }
      }
      if (!known) return std::unexpected("unknown severity " + severity);
      for (const auto& [key, value] : item.at("scope").items()) {
        finding.scope.emplace_back(key, value.get<std::string>());
      }
      finding.observed = item.at("observed").get<std::string>();
      finding.expected = item.at("expected").get<std::string>();
      finding.advice = item.at("advice").get<std::string>();
      finding.fix = item.at("fix").get<std::string>();
      finding.runbook = item.at("runbook").get<std::string>();
      report.findings.push_back(std::move(finding));
    }
    return report;
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(std::string("not a doctor report: ") + e.what());
  }
}

std::string RenderText(const std::vector<Finding>& findings, const ReportContext& context,
                       bool colour, bool show_skipped) {
  // Every value is the host's (device and process names), a remote exporter's or a
  // Prometheus's: printed through EscapeControls, never raw to the terminal.
  const auto safe = [](std::string_view value) { return EscapeControls(value); };
  const auto count = Count(findings, context);
  std::string text = "rdmascope doctor on " + safe(context.host) +
                     (context.instances > 0 ? ", " + Thousands(context.instances) + " hosts" : "") +
                     " (window " + Window(context.window_seconds) +
                     WindowKindText(context.window_kind) + "): ";
  for (Severity severity : kSeverities) {
    text += std::to_string(count.at(severity)) + " " + std::string(SeverityName(severity)) +
            (severity == Severity::kSkip ? "\n" : ", ");
  }
  if (context.fixes_display_only) {
    text += "Fixes are for the host each names, not this one: printed as comments, to read.\n";
  }
  for (const std::string& warning : context.warnings) text += "WARNING: " + safe(warning) + "\n";
  const char* reset = colour ? "\033[0m" : "";
  // A host without RDMA skips nearly every check: one line names them after the findings
  // instead of a block each (--show-skipped prints the blocks with their reasons).
  for (const auto& [area, section] : Sections(findings, show_skipped)) {
    text += std::string("\n== ") + AreaTitle(area) + " ==\n";
    for (const Finding* finding : section) {
      std::string tag(SeverityName(finding->severity));
      for (char& c : tag) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      text += std::string(colour ? Colour(finding->severity) : "") + "[" + tag + "]" + reset + " " +
              safe(finding->id);
      const std::string scope = ScopeText(finding->scope);
      if (!scope.empty()) text += "  " + safe(scope);
      text += "\n";
      // ok and skip fit one line: what was seen, or why the check did not run.
      if (finding->severity == Severity::kOk || finding->severity == Severity::kSkip) {
        text += "       " + safe(finding->observed) + "\n";
        continue;
      }
      text += "       observed: " + safe(finding->observed) + "\n";
      text += "       expected: " + safe(finding->expected) + "\n";
      text += "       advice:   " + safe(finding->advice) + "\n";
      if (!finding->fix.empty()) {
        // Another host's fix is a comment: pasted here, it does nothing.
        text += "       fix:      " +
                (context.fixes_display_only
                     ? "# on " + safe(FixHost(*finding, context)) + ", not here: "
                     : std::string()) +
                safe(finding->fix) + "\n";
      }
      text += "       runbook:  " + safe(finding->runbook) + "\n";
    }
  }
  std::vector<std::string> skipped;  // check ids, once each, in report order
  if (!show_skipped) {
    for (const Finding& finding : findings) {
      if (finding.severity == Severity::kSkip &&
          std::find(skipped.begin(), skipped.end(), finding.id) == skipped.end()) {
        skipped.push_back(finding.id);
      }
    }
  }
  if (!skipped.empty()) {
    text += "\n" + std::to_string(count.at(Severity::kSkip)) + " skipped (" +
            std::to_string(skipped.size()) + " checks; --show-skipped gives the reasons): ";
    for (size_t i = 0; i < skipped.size(); ++i) text += (i > 0 ? ", " : "") + safe(skipped[i]);
    text += "\n";
  }
  if (!context.ok_by_check.empty()) text += "\n" + safe(OkCountedText(context)) + "\n";
  if (!context.queries.empty()) {
    text += "\n" + std::to_string(context.queries.size()) + " queries:\n";
    for (const ReportQuery& query : context.queries) {
      text += "  " + safe(query.promql) + "\n      " + safe(QueryText(query)) + "\n";
    }
  }
  return text;
}

std::string RenderHtml(const std::vector<Finding>& findings, const ReportContext& context) {
  const std::map<Severity, int> count = Count(findings, context);
  std::string html =
      HtmlPageHead("rdmascope doctor: " + context.host) + "<h1>rdmascope doctor</h1>\n<p>" +
      HtmlEscape(context.host) +
      (context.instances > 0 ? ", " + Thousands(context.instances) + " hosts" : "") + ", " +
      HtmlEscape(context.generated) + " (counters " +
      HtmlEscape(Window(context.window_seconds) + WindowKindText(context.window_kind)) + ")</p>\n" +
      // A fleet report is a file: /doctor and /runbook are each host's.
      (context.instances > 0 ? std::string("<p>")
                             : std::string("<p><a href=\"/doctor\">JSON</a> (schema_version 1) "
                                           "&middot; <a href=\"/runbook\">Runbook</a></p>\n<p>"));
  for (Severity severity : kSeverities) {
    html += "<span class=\"" + std::string(SeverityName(severity)) + "\">" +
            std::to_string(count.at(severity)) + " " + std::string(SeverityName(severity)) +
            "</span> ";
  }
  html += "</p>\n";
  // As the text report: areas worst first, worst first within each (SortFindings); every
  // field is the hosts' bytes (device and process names): escaped.
  const auto row = [&](const Finding& finding) {
    const std::string severity(SeverityName(finding.severity));
    // "docs/runbook.md#anchor": the runbook `serve` answers at /runbook has the same anchors.
    const std::string runbook = RunbookLink(finding);
    std::string fix;
    if (!finding.fix.empty()) {
      fix = (context.fixes_display_only
                 ? "<em>on " + HtmlEscape(FixHost(finding, context)) + ", not here:</em> "
                 : std::string()) +
            "<code>" + HtmlEscape(finding.fix) + "</code>";
    }
    return "<tr class=\"" + severity + "\"><td>" + severity + "</td><td><a href=\"" +
           HtmlEscape(runbook) + "\">" + HtmlEscape(finding.id) + "</a></td><td>" +
           HtmlEscape(ScopeText(finding.scope)) + "</td><td>" + HtmlEscape(finding.observed) +
           "</td><td>" + HtmlEscape(finding.expected) + "</td><td>" + HtmlEscape(finding.advice) +
           "</td><td>" + fix + "</td></tr>\n";
  };
  constexpr const char* kTableHead =
      "<table><tr><th>severity</th><th>check</th><th>scope</th><th>observed</th>"
      "<th>expected</th><th>advice</th><th>fix</th></tr>\n";
  if (context.fixes_display_only) {
    html += "<p>Fixes are for the host each names, not the one reading this page.</p>\n";
  }
  for (const std::string& warning : context.warnings) {
    html += "<p class=\"warn\">Warning: " + HtmlEscape(warning) + "</p>\n";
  }
  // The areas worst first; skipped checks folded into one closed block at the end.
  for (const auto& [area, section] : Sections(findings, false)) {
    html += "<h2>" + HtmlEscape(AreaTitle(area)) + "</h2>\n" + kTableHead;
    for (const Finding* finding : section) html += row(*finding);
    html += "</table>\n";
  }
  std::string skipped;
  size_t skipped_count = 0;
  for (const Finding& finding : findings) {
    if (finding.severity != Severity::kSkip) continue;
    skipped += row(finding);
    ++skipped_count;
  }
  if (skipped_count > 0) {
    html += "<details><summary>" + std::to_string(skipped_count) +
            " skipped (what doctor could not check, and why)</summary>\n" + kTableHead + skipped +
            "</table>\n</details>\n";
  }
  if (!context.ok_by_check.empty()) {
    html += "<h2>Counted</h2>\n<p class=\"ok\">" + HtmlEscape(OkCountedText(context)) + "</p>\n";
  }
  if (!context.queries.empty()) {
    html += "<h2>Queries</h2>\n<table><tr><th>PromQL</th><th>asked</th></tr>\n";
    for (const ReportQuery& query : context.queries) {
      html += "<tr><td><code>" + HtmlEscape(query.promql) + "</code></td><td>" +
              HtmlEscape(QueryText(query)) + "</td></tr>\n";
    }
    html += "</table>\n";
  }
  html += std::string(kHtmlPageTail);
  return html;
}

int ExitCode(const std::vector<Finding>& findings, const DoctorOptions& options) {
  bool warn = false;
  for (const Finding& finding : findings) {
    if (finding.severity == Severity::kCrit) return 2;
    warn |= finding.severity == Severity::kWarn;
  }
  return warn && !options.fail_on_crit_only ? 1 : 0;
}

}  // namespace rdmascope::doctor
