#include "http/runbook_page.h"

#include "core/html.h"

namespace rdmascope {

std::string RenderRunbookPage(const BuildInfo& build, std::string_view body) {
  std::string page = HtmlPageHead("rdmascope runbook");
  page += "<p><a href=\"/\">rdmascope</a> ";
  page += HtmlEscape(build.version);
  page += " (";
  page += HtmlEscape(build.revision);
  page +=
      "): the runbook of this build's alerting rules, from docs/runbook.md. Links to other "
      "files of docs/ are shown as their path in the source tree.</p>\n";
  page += body;
  page += kHtmlPageTail;
  return page;
}

}  // namespace rdmascope
