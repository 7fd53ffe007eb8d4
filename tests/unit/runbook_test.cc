// docs/runbook.md rendered for /runbook (http/runbook.*): heading ids equal to GitHub's anchors
// (the rules' runbook_url fragments), raw HTML not passed through, links to other docs files
// turned into text, and the route itself.
#include "http/runbook.h"

#include <gtest/gtest.h>

#include <regex>

#include "core/html.h"
#include "http/handler.h"
#include "http/runbook_page.h"

namespace rdmascope {
namespace {

// Every id="..." of a page, in order.
std::vector<std::string> Ids(const std::string& html) {
  std::vector<std::string> ids;
  static const std::regex kId("<h[1-6] id=\"([^\"]*)\">");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), kId); it != std::sregex_iterator();
       ++it) {
    ids.push_back((*it)[1]);
  }
  return ids;
}

// The anchors GitHub gives these headings (checked on github.com's rendering of the same text).
TEST(Runbook, SlugIsGithubs) {
  EXPECT_EQ(GithubSlug("RdmaPortDown"), "rdmaportdown");
  EXPECT_EQ(GithubSlug("Queue pairs per core"), "queue-pairs-per-core");
  EXPECT_EQ(GithubSlug("RoCE default ToS"), "roce-default-tos");
  EXPECT_EQ(GithubSlug("What's new? (v1.2, beta!)"), "whats-new-v12-beta");
  EXPECT_EQ(GithubSlug("a  b"), "a--b");  // each space a dash, runs not collapsed
  EXPECT_EQ(GithubSlug("snake_case and-dash"), "snake_case-and-dash");
  EXPECT_EQ(GithubSlug("rdma_cq_*/`x`: 1.5x rule"), "rdma_cq_x-15x-rule");
  EXPECT_EQ(GithubSlug("tab\there"), "tabhere");
  // Beyond ASCII: letters kept (Latin-1 capitals lowercased), dashes and arrows dropped.
  EXPECT_EQ(GithubSlug("\xC3\x89te \xE2\x80\x94 \xC3\xBC"
                       "ber \xE2\x86\x92 x"),
            "\xC3\xA9te--\xC3\xBC"
            "ber--x");
  EXPECT_EQ(GithubSlug("\xC2\xA9 \xC2\xB5s"), "-\xC2\xB5s");  // © dropped, µ a letter
  EXPECT_EQ(GithubSlug("bad \xFF\x80 utf8"), "bad--utf8");
}

TEST(Runbook, RepeatedSlugsCountUp) {
  HeadingSlugger slugger;
  EXPECT_EQ(slugger.Next("Remedy"), "remedy");
  EXPECT_EQ(slugger.Next("Remedy"), "remedy-1");
  EXPECT_EQ(slugger.Next("remedy!"), "remedy-2");
  // github-slugger: "a-1" written by hand takes the name the second "a" would have had.
  EXPECT_EQ(slugger.Next("a-1"), "a-1");
  EXPECT_EQ(slugger.Next("a"), "a");
  EXPECT_EQ(slugger.Next("a"), "a-2");
}

TEST(Runbook, HeadingsGetGithubIds) {
  const std::string html = RenderRunbookBody(
      "# Runbook: alerts\n\n"
      "## RdmaPortDown\ntext\n\n"
      "## `rdma_cq_*` near *full*\n\n"
      "## Link to [the doctor](doctor.md#checks) & more\n\n"
      "Setext heading, with a comma\n---\n\n"
      "## RdmaPortDown\n\n"
      "> ### Quoted <b>bold</b> heading\n\n"
      "- ## In a list\n\n"
      "```\n<h2>not a heading</h2>\n```\n\n"
      "    <h3>indented code</h3>\n\n"
      "## ![icon](x.png) Image\n");
  EXPECT_EQ(Ids(html), (std::vector<std::string>{"runbook-alerts", "rdmaportdown",
                                                 "rdma_cq_-near-full", "link-to-the-doctor--more",
                                                 "setext-heading-with-a-comma", "rdmaportdown-1",
                                                 "quoted-bold-heading", "in-a-list", "-image"}))
      << html;
  // The fenced and indented code is escaped text, not a heading.
  EXPECT_NE(html.find("&lt;h2&gt;not a heading&lt;/h2&gt;"), std::string::npos) << html;
  EXPECT_NE(html.find("&lt;h3&gt;indented code&lt;/h3&gt;"), std::string::npos) << html;
}

TEST(Runbook, RawHtmlAndDangerousUrlsAreNotPassedThrough) {
  const std::string html = RenderRunbookBody(
      "<script>alert(1)</script>\n\n"
      "Inline <img src=x onerror=alert(1)> here.\n\n"
      "[click](javascript:alert(1)) and [home](https://example.org/a?b=1&c=\"2\")\n\n"
      "## Head <script>x</script>\n");
  EXPECT_EQ(html.find("<script"), std::string::npos) << html;
  EXPECT_EQ(html.find("<img"), std::string::npos) << html;
  EXPECT_EQ(html.find("javascript:"), std::string::npos) << html;
  EXPECT_NE(html.find("href=\"https://example.org/a?b=1&amp;c=%222%22\""), std::string::npos)
      << html;
  EXPECT_NE(html.find("<h2 id=\"head-x\">"), std::string::npos) << html;
}

TEST(Runbook, LinksToOtherDocsBecomeTheirPath) {
  const std::string html = RenderRunbookBody(
      "See [the checks](doctor.md#checks), [the README](../README.md), "
      "[stacks](/debug/mr/stacks), [below](#rdmaportdown) and <https://example.org>.\n");
  EXPECT_NE(html.find("the checks (<code>docs/doctor.md#checks</code>)"), std::string::npos)
      << html;
  EXPECT_NE(html.find("the README (<code>README.md</code>)"), std::string::npos) << html;
  EXPECT_EQ(html.find("href=\"doctor.md"), std::string::npos) << html;
  EXPECT_EQ(html.find("href=\"../README.md"), std::string::npos) << html;
  // The exporter's own paths, in-page anchors and absolute URLs stay links.
  EXPECT_NE(html.find("<a href=\"/debug/mr/stacks\">stacks</a>"), std::string::npos) << html;
  EXPECT_NE(html.find("<a href=\"#rdmaportdown\">below</a>"), std::string::npos) << html;
  EXPECT_NE(html.find("<a href=\"https://example.org\">"), std::string::npos) << html;
}

// The page built into this binary: served at /runbook in the landing page's frame, linked from
// the landing page, HEAD too; "/runbook/" redirects to it.
TEST(Runbook, Route) {
  auto runner = std::make_shared<CollectorRunner>(std::vector<NamedCollector>{},
                                                  BuildInfo{"0.1.0", "<rev>"}, "/proc");
  const HttpHandler handler(runner, "/metrics", {});
  const HttpReply page = handler.Handle({.method = "GET", .path = "/runbook"});
  EXPECT_EQ(page.status, 200U);
  ASSERT_FALSE(page.headers.empty());
  EXPECT_EQ(page.headers[0].second, "text/html; charset=utf-8");
  EXPECT_EQ(page.body.rfind(HtmlPageHead("rdmascope runbook"), 0), 0U);
  EXPECT_NE(page.body.find("&lt;rev&gt;"), std::string::npos);
  EXPECT_NE(page.body.find(RunbookBodyHtml()), std::string::npos);
  EXPECT_NE(page.body.find("<h2 id=\"rdmaportdown\">RdmaPortDown</h2>"), std::string::npos);
  EXPECT_EQ(handler.Handle({.method = "HEAD", .path = "/runbook"}).status, 200U);
  const HttpReply post = handler.Handle({.method = "POST", .path = "/runbook"});
  EXPECT_EQ(post.status, 405U);

  const HttpReply slash = handler.Handle({.method = "GET", .path = "/runbook/"});
  EXPECT_EQ(slash.status, 308U);
  bool location = false;
  for (const auto& [name, value] : slash.headers)
    location |= name == "Location" && value == "../runbook";
  EXPECT_TRUE(location);
  EXPECT_EQ(handler.Handle({.method = "GET", .path = "/runbook/x"}).status, 404U);

  const HttpReply landing = handler.Handle({.method = "GET", .path = "/"});
  EXPECT_NE(landing.body.find("<a href=\"/runbook\">Runbook</a>"), std::string::npos);
  EXPECT_EQ(landing.body.rfind(HtmlPageHead("rdmascope"), 0), 0U);
}

}  // namespace
}  // namespace rdmascope
