#include "http/server.h"

#include <gtest/gtest.h>

namespace rdmascope {
namespace {

TEST(ListenAddress, NodeExporterStyle) {
  EXPECT_EQ(*ToCivetListeningPort(":9879"), "9879");
  EXPECT_EQ(*ToCivetListeningPort("127.0.0.1:0"), "127.0.0.1:0");
  EXPECT_EQ(*ToCivetListeningPort("[::1]:9879"), "[::1]:9879");
  EXPECT_FALSE(ToCivetListeningPort("9879"));
  EXPECT_FALSE(ToCivetListeningPort(":99999"));
  EXPECT_FALSE(ToCivetListeningPort(":http"));
  EXPECT_FALSE(ToCivetListeningPort("::1:9879"));
  EXPECT_FALSE(ToCivetListeningPort("1.2.3.4:80,8080"));
}

class Failing : public Collector {
 public:
  CollectResult Collect(MetricSet&) const override { throw std::runtime_error("<b>boom</b>"); }
};

TEST(LandingPage, ListsCollectorsAndEscapes) {
  std::vector<NamedCollector> collectors;
  collectors.push_back({"ethtool", std::make_unique<Failing>()});
  CollectorRunner runner(std::move(collectors), BuildInfo{"0.1.0", "abc"}, "/proc");
  std::string page = RenderLandingPage(runner, "/metrics");
  EXPECT_NE(page.find("not run yet"), std::string::npos);
  runner.Collect();
  page = RenderLandingPage(runner, "/metrics");
  EXPECT_NE(page.find("<td>ethtool</td><td>failed</td>"), std::string::npos) << page;
  EXPECT_NE(page.find("&lt;b&gt;boom&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<b>boom"), std::string::npos);
  EXPECT_NE(page.find("href=\"/metrics\""), std::string::npos);
}

}  // namespace
}  // namespace rdmascope
