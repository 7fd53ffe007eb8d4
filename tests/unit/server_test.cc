#include "http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "http/gzip.h"
#include "http/handler.h"
#include "http/listen_address.h"
#include "http/rate_limiter.h"
#include "web/web_config.h"

namespace rdmascope {
namespace {

TEST(ListenAddress, NodeExporterStyle) {
  EXPECT_EQ(ParseListenAddress(":9879")->host, "");
  EXPECT_EQ(ParseListenAddress(":9879")->port, 9879);
  EXPECT_EQ(ParseListenAddress("127.0.0.1:0")->host, "127.0.0.1");
  EXPECT_EQ(ParseListenAddress("[::1]:9879")->host, "::1");
  EXPECT_EQ(ParseListenAddress("[::]:80")->port, 80);
  EXPECT_FALSE(ParseListenAddress("9879"));
  EXPECT_FALSE(ParseListenAddress(":99999"));
  EXPECT_FALSE(ParseListenAddress(":http"));
  EXPECT_FALSE(ParseListenAddress("::1:9879"));
  EXPECT_FALSE(ParseListenAddress("[::1:9879"));
  EXPECT_FALSE(ParseListenAddress("[]:9879"));
  EXPECT_FALSE(ParseListenAddress("1.2.3.4:80,8080"));
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

TEST(LandingPage, LinksTheDebugPagesServed) {
  std::vector<NamedCollector> collectors;
  collectors.push_back({"ethtool", std::make_unique<Failing>()});
  CollectorRunner runner(std::move(collectors), BuildInfo{"0.1.0", "abc"}, "/proc");
  EXPECT_EQ(RenderLandingPage(runner, "/metrics").find("/debug/"), std::string::npos)
      << "no page linked that is not served";
  DebugRoutes routes;
  routes["/debug/workloads"] = [](std::string_view) { return std::string("{}"); };
  const std::string page = RenderLandingPage(runner, "/metrics", routes);
  EXPECT_NE(page.find("href=\"/debug/workloads\""), std::string::npos) << page;
  EXPECT_EQ(page.find("/debug/mr/stacks"), std::string::npos);
}

TEST(Gzip, AcceptEncoding) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("deflate, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip; q=0.000, br"));
  EXPECT_FALSE(AcceptsGzip("x-gzip2"));
}

std::string Gunzip(const std::string& compressed) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 16 + MAX_WBITS), Z_OK);
  std::string out(1 << 20, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  inflateEnd(&stream);
  return out;
}

std::string Header(const HttpReply& reply, std::string_view name) {
  for (const auto& [key, value] : reply.headers) {
    if (key == name) return value;
  }
  return "";
}

std::shared_ptr<CollectorRunner> EmptyRunner() {
  return std::make_shared<CollectorRunner>(std::vector<NamedCollector>{}, BuildInfo{"0.1.0", "abc"},
                                           "/proc");
}

HttpHandler HandlerWithDebugRoute() {
  DebugRoutes routes;
  routes["/debug/echo"] = [](std::string_view query) {
    return "{\"q\":\"" + std::string(query) + "\"}";
  };
  return HttpHandler(EmptyRunner(), "/metrics", routes);
}

TEST(HttpHandler, RoutesAndMethods) {
  const HttpHandler handler = HandlerWithDebugRoute();
  const HttpReply landing = handler.Handle({.method = "GET", .path = "/"});
  EXPECT_EQ(landing.status, 200U);
  EXPECT_EQ(Header(landing, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(handler.Handle({.method = "HEAD", .path = "/"}).status, 200U);
  const HttpReply delete_landing = handler.Handle({.method = "DELETE", .path = "/"});
  EXPECT_EQ(delete_landing.status, 405U);
  EXPECT_EQ(Header(delete_landing, "Allow"), "GET, HEAD");
  const HttpReply post_metrics = handler.Handle({.method = "POST", .path = "/metrics"});
  EXPECT_EQ(post_metrics.status, 405U);
  EXPECT_EQ(Header(post_metrics, "Allow"), "GET, HEAD");
  const HttpReply debug =
      handler.Handle({.method = "GET", .path = "/debug/echo", .query = "pid=7"});
  EXPECT_EQ(debug.status, 200U);
  EXPECT_EQ(debug.body, "{\"q\":\"pid=7\"}");
  EXPECT_EQ(Header(debug, "Content-Type"), "application/json");
  const HttpReply post_debug = handler.Handle({.method = "POST", .path = "/debug/echo"});
  EXPECT_EQ(post_debug.status, 405U);
  EXPECT_EQ(Header(post_debug, "Allow"), "GET");
  EXPECT_EQ(handler.Handle({.method = "GET", .path = "/nope"}).status, 404U);
  EXPECT_EQ(handler.Handle({.method = "GET", .path = "/metrics/"}).status, 404U);
}

// A byte that acts on a terminal when the body is printed raw: C0 but the newlines between
// the JSON's lines (a string's own newline is "\n"), DEL, and C1 (U+0080..U+009F, C2 80..C2 9F).
bool HasRawTerminalControl(std::string_view body) {
  for (size_t i = 0; i < body.size(); ++i) {
    const auto byte = static_cast<unsigned char>(body[i]);
    if ((byte < 0x20 && byte != '\n') || byte == 0x7f) return true;
    if (byte == 0xc2 && i + 1 < body.size() && static_cast<unsigned char>(body[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(body[i + 1]) <= 0x9f) {
      return true;
    }
  }
  return false;
}

// Issue 37 item 5 for the debug routes: a tenant names its process, its cgroup, its functions
// and its files; `curl /debug/mr/stacks` must not hand a terminal ESC, CSI (\xc2\x9b) or DEL.
// The routes build their JSON as the mr and workload collectors do (nlohmann's dump escapes C0
// only); the handler escapes the rest, and a parser reads the same document.
TEST(HttpHandler, DebugBodiesCarryNoRawTerminalControl) {
  const std::string hostile =
      "a\x1b[2J\xc2\x9b"
      "31m\x7f\nz";
  const auto dump = [](const nlohmann::json& body) {
    return body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  };
  DebugRoutes routes;
  routes["/debug/mr/stacks"] = [&](std::string_view) {
    const nlohmann::json frame = {{"function", hostile + "+0x10"},
                                  {"module", "/opt/" + hostile + "/libapp.so"}};
    const nlohmann::json stack = {{"unwind", "dwarf"}, {"frames", {frame}}};
    return dump({{"processes", {{{"pid", 7}, {"comm", hostile}, {"stacks", {stack}}}}}});
  };
  routes["/debug/workloads"] = [&](std::string_view) {
    const nlohmann::json workload = {{"systemd_unit", hostile + ".service"}};
    return dump({{"processes", {{{"pid", 7}, {"workload", workload}}}}});
  };
  const HttpHandler handler(EmptyRunner(), "/metrics", routes);
  for (const std::string path : {"/debug/mr/stacks", "/debug/workloads"}) {
    const std::string built = routes.at(path)("");
    ASSERT_TRUE(HasRawTerminalControl(built)) << path << ": the route itself leaves them raw";
    const HttpReply reply = handler.Handle({.method = "GET", .path = path});
    EXPECT_EQ(reply.status, 200U) << path;
    EXPECT_EQ(Header(reply, "Content-Type"), "application/json") << path;
    EXPECT_FALSE(HasRawTerminalControl(reply.body)) << path << ": " << reply.body;
    EXPECT_NE(reply.body.find("a\\u001b[2J\\u009b31m\\u007f\\nz"), std::string::npos)
        << path << ": " << reply.body;
    EXPECT_EQ(nlohmann::json::parse(reply.body), nlohmann::json::parse(built)) << path;
  }
  const nlohmann::json stacks =
      nlohmann::json::parse(handler.Handle({.method = "GET", .path = "/debug/mr/stacks"}).body);
  EXPECT_EQ(stacks.at("processes")[0].at("comm"), hostile);
  EXPECT_EQ(stacks.at("processes")[0].at("stacks")[0].at("frames")[0].at("module"),
            "/opt/" + hostile + "/libapp.so");
}

// Issue 26 item 18: Prometheus's health paths, for Kubernetes probes.
TEST(HttpHandler, HealthAndReadiness) {
  const HttpHandler handler = HandlerWithDebugRoute();
  for (const char* path : {"/-/healthy", "/-/ready"}) {
    const HttpReply reply = handler.Handle({.method = "GET", .path = path});
    EXPECT_EQ(reply.status, 200U) << path;
    EXPECT_EQ(Header(reply, "Content-Type"), "text/plain; charset=utf-8") << path;
    EXPECT_EQ(handler.Handle({.method = "HEAD", .path = path}).status, 200U) << path;
    EXPECT_EQ(handler.Handle({.method = "POST", .path = path}).status, 405U) << path;
  }
  EXPECT_EQ(handler.Handle({.method = "GET", .path = "/-/healthy"}).body,
            "rdmascope is Healthy.\n");
  EXPECT_EQ(handler.Handle({.method = "GET", .path = "/-/ready"}).body, "rdmascope is Ready.\n");
  EXPECT_EQ(handler.Handle({.method = "GET", .path = "/-/healthy/"}).status, 404U);
  EXPECT_TRUE(IsHealthPath("/-/ready"));
  EXPECT_FALSE(IsHealthPath("/-/ready/x"));
  EXPECT_FALSE(IsHealthPath("/metrics"));
}

TEST(HttpHandler, ExpositionPlainAndGzip) {
  const HttpHandler handler = HandlerWithDebugRoute();
  const HttpReply plain = handler.Handle({.method = "GET", .path = "/metrics"});
  EXPECT_EQ(plain.status, 200U);
  EXPECT_EQ(Header(plain, "Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(Header(plain, "Content-Encoding"), "");
  EXPECT_NE(plain.body.find("rdmascope_build_info{"), std::string::npos) << plain.body;
  EXPECT_NE(plain.body.find("exposer_scrapes_total 0\n"), std::string::npos) << plain.body;

  const HttpReply gzipped =
      handler.Handle({.method = "GET", .path = "/metrics", .accept_encoding = "gzip"});
  EXPECT_EQ(Header(gzipped, "Content-Encoding"), "gzip");
  const std::string text = Gunzip(gzipped.body);
  EXPECT_NE(text.find("rdmascope_build_info{"), std::string::npos) << text;
  // The second scrape sees the first one counted, with its (uncompressed) size.
  EXPECT_NE(text.find("exposer_scrapes_total 1\n"), std::string::npos) << text;
  EXPECT_NE(
      text.find("exposer_transferred_bytes_total " + std::to_string(plain.body.size()) + "\n"),
      std::string::npos)
      << text;
}

// A blocking HTTP/1.1 client on one connection: "GET path" with Connection: close, returns the
// whole response (headers and body).
std::string Fetch(int family, int port, const std::string& path) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "socket failed";
  sockaddr_storage address{};
  socklen_t length = 0;
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    length = sizeof *in6;
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&address);
    in4->sin_family = AF_INET;
    in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    in4->sin_port = htons(static_cast<uint16_t>(port));
    length = sizeof *in4;
  }
  // A server that never answers fails the test instead of hanging it.
  const timeval timeout{.tv_sec = 20, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[65536];
      ssize_t got = 0;
      while ((got = recv(fd, buffer, sizeof buffer, 0)) > 0) {
        response.append(buffer, static_cast<size_t>(got));
      }
    }
  } else {
    response = "connect failed";
  }
  close(fd);
  return response;
}

bool HasIpv6Loopback() {
  std::ifstream interfaces("/proc/net/if_inet6");
  std::string line;
  while (std::getline(interfaces, line)) {
    if (line.rfind("00000000000000000000000000000001", 0) == 0) return true;
  }
  return false;
}

TEST(HttpServer, ServesOnIpv4Loopback) {
  HttpServer server({.listen_address = "127.0.0.1:0", .threads = 2}, EmptyRunner());
  ASSERT_GT(server.port(), 0);
  const std::string response = Fetch(AF_INET, server.port(), "/metrics");
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0U) << response;
  EXPECT_NE(response.find("rdmascope_build_info{"), std::string::npos) << response;
  EXPECT_EQ(Fetch(AF_INET, server.port(), "/nope").rfind("HTTP/1.1 404", 0), 0U);
}

// Debian's CivetWeb had no IPv6: "[::1]:port" threw although the docs promised it.
TEST(HttpServer, ServesOnIpv6Loopback) {
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback on this host";
  HttpServer server({.listen_address = "[::1]:0", .threads = 1}, EmptyRunner());
  const std::string response = Fetch(AF_INET6, server.port(), "/metrics");
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0U) << response;
}

// ":port" is every address: one dual-stack socket answers IPv4 and IPv6 clients.
TEST(HttpServer, EveryAddressIsDualStack) {
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback on this host";
  HttpServer server({.listen_address = ":0", .threads = 1}, EmptyRunner());
  EXPECT_EQ(Fetch(AF_INET, server.port(), "/").rfind("HTTP/1.1 200", 0), 0U);
  EXPECT_EQ(Fetch(AF_INET6, server.port(), "/").rfind("HTTP/1.1 200", 0), 0U);
}

// A collector that blocks until the test opens its gate: a scrape that runs "forever".
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  int entered = 0;  // collections started so far
  bool open = false;
  // Only the first ones wait: a collection the test expects to be refused, if it ran after
  // all, returns at once and fails the test instead of hanging it.
  int block_first = 1 << 30;
};

class Blocking : public Collector {
 public:
  explicit Blocking(Gate& gate) : gate_(gate) {}
  CollectResult Collect(MetricSet&) const override {
    std::unique_lock lock(gate_.mutex);
    ++gate_.entered;
    gate_.changed.notify_all();
    if (gate_.entered > gate_.block_first) return {};
    gate_.changed.wait(lock, [this] { return gate_.open; });
    return {};
  }

 private:
  Gate& gate_;
};

// A scrape in progress occupies one thread of the pool, not the server: another client's
// request is answered while it still runs.
TEST(HttpServer, LongScrapeDoesNotBlockOtherConnections) {
  Gate gate;
  std::vector<NamedCollector> collectors;
  collectors.push_back({"blocking", std::make_unique<Blocking>(gate)});
  auto runner =
      std::make_shared<CollectorRunner>(std::move(collectors), BuildInfo{"0.1.0", "abc"}, "/proc");
  HttpServer server({.listen_address = "127.0.0.1:0", .threads = 2}, runner);
  std::string slow_response;
  std::thread slow([&] { slow_response = Fetch(AF_INET, server.port(), "/metrics"); });
  {
    std::unique_lock lock(gate.mutex);
    gate.changed.wait(lock, [&] { return gate.entered > 0; });
  }
  // Only this test opens the gate: the landing page is answered while the scrape is blocked.
  const std::string landing = Fetch(AF_INET, server.port(), "/");
  {
    std::lock_guard lock(gate.mutex);
    gate.open = true;
  }
  gate.changed.notify_all();
  slow.join();
  EXPECT_EQ(landing.rfind("HTTP/1.1 200", 0), 0U) << landing;
  EXPECT_EQ(slow_response.rfind("HTTP/1.1 200", 0), 0U) << slow_response;
}

std::shared_ptr<CollectorRunner> BlockingRunner(Gate& gate) {
  std::vector<NamedCollector> collectors;
  collectors.push_back({"blocking", std::make_unique<Blocking>(gate)});
  return std::make_shared<CollectorRunner>(std::move(collectors), BuildInfo{"0.1.0", "abc"},
                                           "/proc");
}

void WaitEntered(Gate& gate, int count) {
  std::unique_lock lock(gate.mutex);
  gate.changed.wait(lock, [&] { return gate.entered >= count; });
}

void OpenGate(Gate& gate) {
  {
    std::lock_guard lock(gate.mutex);
    gate.open = true;
  }
  gate.changed.notify_all();
}

// --web.max-requests (node_exporter's): with 2 scrapes running, a third is refused at once
// with 503 and a body naming the flag, counted; the landing page is not limited; once the
// scrapes finish their slots are free again.
TEST(HttpHandler, MaxRequestsRefusesScrapesPastTheLimit) {
  Gate gate;
  gate.block_first = 2;
  const HttpHandler handler(BlockingRunner(gate), "/metrics", {}, 2);
  HttpReply first, second;
  std::thread a([&] { first = handler.Handle({.method = "GET", .path = "/metrics"}); });
  std::thread b([&] { second = handler.Handle({.method = "HEAD", .path = "/metrics"}); });
  WaitEntered(gate, 2);
  const HttpReply refused = handler.Handle({.method = "GET", .path = "/metrics"});
  const HttpReply landing = handler.Handle({.method = "GET", .path = "/"});
  OpenGate(gate);
  a.join();
  b.join();
  EXPECT_EQ(refused.status, 503U);
  EXPECT_EQ(refused.body, "too many concurrent scrapes (limit 2, --web.max-requests)\n");
  EXPECT_EQ(landing.status, 200U);
  EXPECT_EQ(first.status, 200U);
  EXPECT_EQ(second.status, 200U);
  const HttpReply after = handler.Handle({.method = "GET", .path = "/metrics"});
  EXPECT_EQ(after.status, 200U);
  EXPECT_NE(after.body.find("rdmascope_http_requests_rejected_total{reason=\"max_requests\"} 1\n"),
            std::string::npos)
      << after.body;
  EXPECT_EQ(gate.entered, 3);  // the refused scrape collected nothing
}

// 0 is node_exporter's "no limit": three scrapes run at once.
TEST(HttpHandler, MaxRequestsZeroIsNoLimit) {
  Gate gate;
  const HttpHandler handler(BlockingRunner(gate), "/metrics", {}, 0);
  std::vector<std::thread> scrapes;
  std::vector<unsigned> statuses(3);
  for (unsigned& status : statuses) {
    scrapes.emplace_back([&handler, &status] {
      status = handler.Handle({.method = "GET", .path = "/metrics"}).status;
    });
  }
  WaitEntered(gate, 3);
  OpenGate(gate);
  for (auto& scrape : scrapes) scrape.join();
  EXPECT_EQ(statuses, (std::vector<unsigned>{200, 200, 200}));
}

// Through the server: the 503 reaches the client while another connection's scrape runs.
TEST(HttpServer, MaxRequestsAnswers503) {
  Gate gate;
  gate.block_first = 1;
  HttpServer server({.listen_address = "127.0.0.1:0", .threads = 2, .max_requests = 1},
                    BlockingRunner(gate));
  std::string slow_response;
  std::thread slow([&] { slow_response = Fetch(AF_INET, server.port(), "/metrics"); });
  WaitEntered(gate, 1);
  // The busy thread is inside the scrape, not in its epoll wait: the other thread accepts this
  // connection (as in LongScrapeDoesNotBlockOtherConnections).
  const std::string refused = Fetch(AF_INET, server.port(), "/metrics");
  OpenGate(gate);
  slow.join();
  EXPECT_EQ(slow_response.rfind("HTTP/1.1 200", 0), 0U) << slow_response;
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0U) << refused;
  EXPECT_NE(refused.find("too many concurrent scrapes (limit 1, --web.max-requests)"),
            std::string::npos)
      << refused;
}

// A debug route that blocks until the gate opens: /doctor?window=10s, or a slow /debug page.
DebugRoutes BlockingRoute(Gate& gate) {
  DebugRoutes routes;
  routes["/debug/slow"] = [&gate](std::string_view) {
    std::unique_lock lock(gate.mutex);
    ++gate.entered;
    gate.changed.notify_all();
    gate.changed.wait(lock, [&gate] { return gate.open; });
    return std::string("{\"slow\": true}");
  };
  return routes;
}

// Issue 37: a costly route runs on the slow lane with its connection suspended, so even the
// only HTTP thread keeps answering scrapes and probes while it waits. Before the lane, the
// scrape below waited on the same thread for the gate.
TEST(HttpServer, CostlyRoutesRunOffTheHttpThreads) {
  Gate gate;
  HttpServer server({.listen_address = "127.0.0.1:0", .threads = 1}, EmptyRunner(),
                    BlockingRoute(gate));
  std::string slow_response;
  std::thread slow([&] { slow_response = Fetch(AF_INET, server.port(), "/debug/slow"); });
  WaitEntered(gate, 1);
  const std::string scrape = Fetch(AF_INET, server.port(), "/metrics");
  const std::string healthy = Fetch(AF_INET, server.port(), "/-/healthy");
  OpenGate(gate);
  slow.join();
  EXPECT_EQ(scrape.rfind("HTTP/1.1 200", 0), 0U) << scrape;
  EXPECT_EQ(healthy.rfind("HTTP/1.1 200", 0), 0U) << healthy;
  EXPECT_EQ(slow_response.rfind("HTTP/1.1 200", 0), 0U) << slow_response;
  EXPECT_NE(slow_response.find("{\"slow\": true}"), std::string::npos) << slow_response;
}

// libmicrohttpd forbids stopping a daemon with a suspended connection: the server resumes it
// (503) first, and the lane's late answer is dropped. No crash, no hang.
TEST(HttpServer, StoppingAnswersTheSuspendedRequests) {
  Gate gate;
  auto server =
      std::make_unique<HttpServer>(WebOptions{.listen_address = "127.0.0.1:0", .threads = 1},
                                   EmptyRunner(), BlockingRoute(gate));
  std::string response = "none";
  std::thread client([&] { response = Fetch(AF_INET, server->port(), "/debug/slow"); });
  WaitEntered(gate, 1);
  // The lane's job still waits on the gate when the server stops; open it a little later so
  // that the destructor's wait for the lane ends.
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    OpenGate(gate);
  });
  server.reset();
  client.join();
  opener.join();
  EXPECT_TRUE(response.empty() || response.rfind("HTTP/1.1 503", 0) == 0) << response;
}

// The costly routes' own limit, and their share of --web.max-requests; scrapes keep theirs.
TEST(HttpHandler, CostlyRequestsAreBoundedWithoutStarvingScrapes) {
  Gate gate;
  const HttpHandler handler(EmptyRunner(), "/metrics", BlockingRoute(gate), 40);
  EXPECT_TRUE(handler.IsCostly({.method = "GET", .path = "/debug/slow"}));
  EXPECT_FALSE(handler.IsCostly({.method = "HEAD", .path = "/debug/slow"}));
  EXPECT_FALSE(handler.IsCostly({.method = "GET", .path = "/metrics"}));
  std::vector<std::shared_ptr<void>> slots;
  HttpReply refusal;
  for (int i = 0; i < HttpHandler::kMaxCostlyInFlight; ++i) {
    slots.push_back(handler.AdmitCostly(refusal));
    ASSERT_TRUE(slots.back()) << i;
  }
  EXPECT_FALSE(handler.AdmitCostly(refusal));
  EXPECT_EQ(refusal.status, 503U);
  EXPECT_EQ(handler.Handle({.method = "GET", .path = "/metrics"}).status, 200U);
  slots.pop_back();
  EXPECT_TRUE(handler.AdmitCostly(refusal));  // a freed slot is free again
  const HttpReply scrape = handler.Handle({.method = "GET", .path = "/metrics"});
  EXPECT_NE(
      scrape.body.find("rdmascope_http_requests_rejected_total{reason=\"costly_requests\"} 1\n"),
      std::string::npos)
      << scrape.body;

  // --web.max-requests=2: two costly requests in flight, a third is refused.
  const HttpHandler small(EmptyRunner(), "/metrics", BlockingRoute(gate), 2);
  const auto a = small.AdmitCostly(refusal), b = small.AdmitCostly(refusal);
  EXPECT_TRUE(a && b);
  EXPECT_FALSE(small.AdmitCostly(refusal));
  EXPECT_NE(refusal.body.find("--web.max-requests"), std::string::npos) << refusal.body;
}

// The web config's rate_limit (http/rate_limiter.h): x/time/rate's token bucket, on a clock
// the test moves.
TEST(RateLimiter, BurstThenOneTokenPerInterval) {
  using std::chrono::milliseconds;
  RateLimiter limiter(std::chrono::seconds(1), 3);
  const auto t0 = RateLimiter::Clock::time_point{} + std::chrono::hours(1);
  EXPECT_TRUE(limiter.Allow(t0));  // the bucket starts full: 3 at once
  EXPECT_TRUE(limiter.Allow(t0));
  EXPECT_TRUE(limiter.Allow(t0));
  EXPECT_FALSE(limiter.Allow(t0));
  EXPECT_FALSE(limiter.Allow(t0 + milliseconds(999)));  // not a whole token yet
  EXPECT_TRUE(limiter.Allow(t0 + milliseconds(1000)));
  EXPECT_FALSE(limiter.Allow(t0 + milliseconds(1001)));
  // A long idle time refills to the burst, no more.
  const auto later = t0 + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Allow(later)) << i;
  EXPECT_FALSE(limiter.Allow(later));
  // A clock going backwards earns nothing.
  EXPECT_FALSE(limiter.Allow(t0));
}

TEST(RateLimiter, RefusedRequestsDoNotDelayTheNextToken) {
  // Go's reserveN changes nothing on a refusal: the token still comes one interval after the
  // last allowed request, however many were refused meanwhile.
  RateLimiter limiter(std::chrono::milliseconds(100), 1);
  const auto t0 = RateLimiter::Clock::time_point{} + std::chrono::hours(1);
  EXPECT_TRUE(limiter.Allow(t0));
  for (int ms = 10; ms < 100; ms += 10) {
    EXPECT_FALSE(limiter.Allow(t0 + std::chrono::milliseconds(ms))) << ms;
  }
  EXPECT_TRUE(limiter.Allow(t0 + std::chrono::milliseconds(100)));
}

TEST(RateLimiter, BurstZeroRefusesEverything) {
  RateLimiter limiter(std::chrono::seconds(1), 0);
  const auto t0 = RateLimiter::Clock::time_point{} + std::chrono::hours(1);
  EXPECT_FALSE(limiter.Allow(t0));
  EXPECT_FALSE(limiter.Allow(t0 + std::chrono::hours(5)));
}

constexpr int64_t kHourNs = int64_t{3600} * 1000000000;

std::shared_ptr<const web::WebConfig> RateLimited(int64_t interval_ns, int64_t burst) {
  auto config = std::make_shared<web::WebConfig>();
  config->rate_limit = {.interval_ns = interval_ns, .burst = burst};
  config->headers = {{"X-Frame-Options", "deny"}};
  return config;
}

unsigned StatusOf(const std::string& response) {
  return response.rfind("HTTP/1.1 ", 0) == 0
             ? static_cast<unsigned>(std::stoi(response.substr(9, 3)))
             : 0;
}

// exporter-toolkit's webHandler: one bucket for every request, health paths included (it
// wraps the whole handler, Prometheus's /-/healthy too), answered as Go's http.Error does.
TEST(HttpServer, RateLimitAnswers429ToEveryPathPastTheBurst) {
  HttpServer server(
      {.listen_address = "127.0.0.1:0", .threads = 2, .security = RateLimited(kHourNs, 2)},
      EmptyRunner());
  EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/metrics")), 200u);
  EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/-/healthy")), 200u);
  for (const char* path : {"/metrics", "/-/healthy", "/-/ready", "/", "/no/such/path"}) {
    const std::string refused = Fetch(AF_INET, server.port(), path);
    EXPECT_EQ(StatusOf(refused), 429u) << path << ": " << refused;
    EXPECT_NE(refused.find("\r\n\r\nToo Many Requests\n"), std::string::npos) << refused;
    EXPECT_NE(refused.find("X-Content-Type-Options: nosniff"), std::string::npos) << refused;
    EXPECT_EQ(refused.find("Retry-After"), std::string::npos) << refused;
    // Go answers before it sets the configured headers.
    EXPECT_EQ(refused.find("X-Frame-Options"), std::string::npos) << refused;
  }
}

TEST(HttpServer, ReloadKeepsAnUnchangedBucketAndReplacesAChangedOne) {
  HttpServer server(
      {.listen_address = "127.0.0.1:0", .threads = 1, .security = RateLimited(kHourNs, 1)},
      EmptyRunner());
  EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/-/ready")), 200u);
  EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/-/ready")), 429u);
  // A reload for another reason (the same rate_limit): still empty, no fresh burst.
  server.Reload(RateLimited(kHourNs, 1));
  EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/-/ready")), 429u);
  // A new rate_limit: a new bucket, full.
  server.Reload(RateLimited(kHourNs, 2));
  EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/-/ready")), 200u);
  EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/-/ready")), 200u);
  EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/-/ready")), 429u);
  // rate_limit removed: no limiter.
  server.Reload(RateLimited(0, 0));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(StatusOf(Fetch(AF_INET, server.port(), "/-/ready")), 200u);
}

TEST(HttpHandler, RateLimitedRequestsAreCounted) {
  HttpHandler handler = HandlerWithDebugRoute();
  const HttpReply refused = handler.RejectRateLimited();
  EXPECT_EQ(refused.status, 429u);
  EXPECT_EQ(refused.body, "Too Many Requests\n");
  const HttpReply scrape = handler.Handle({.method = "GET", .path = "/metrics"});
  EXPECT_NE(scrape.body.find("rdmascope_http_requests_rejected_total{reason=\"rate_limit\"} 1\n"),
            std::string::npos)
      << scrape.body;
  EXPECT_NE(scrape.body.find("rdmascope_http_requests_rejected_total{reason=\"max_requests\"} 0\n"),
            std::string::npos);
}

TEST(HttpServer, PortInUseIsAOneLineError) {
  HttpServer first({.listen_address = "127.0.0.1:0"}, EmptyRunner());
  try {
    HttpServer second({.listen_address = "127.0.0.1:" + std::to_string(first.port())},
                      EmptyRunner());
    FAIL() << "bound a port in use";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Address already in use"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rdmascope
