#include "cli/http_get.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace rdmascope {
namespace {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits for `events` on `fd` until `deadline`: "" when ready, else why not.
std::string WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return "timed out";
    pollfd entry{.fd = fd, .events = events, .revents = 0};
    const int ready = poll(&entry, 1, static_cast<int>(left));
    if (ready > 0) return "";
    if (ready < 0 && errno != EINTR) return std::string("poll: ") + std::strerror(errno);
  }
}

// A connected socket to one of `url`'s addresses, tried in getaddrinfo's order.
std::expected<std::unique_ptr<Fd>, std::string> Connect(const HttpUrl& url,
                                                        Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &found); rc != 0) {
    return std::unexpected("cannot resolve " + url.host + ": " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, freeaddrinfo);
  std::string error = "no address for " + url.host;
  for (const addrinfo* address = found; address != nullptr; address = address->ai_next) {
    auto fd = std::make_unique<Fd>(
        socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd->get() < 0) {
      error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (connect(fd->get(), address->ai_addr, address->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = std::string("connect: ") + std::strerror(errno);
        continue;
      }
      if (std::string wait = WaitFor(fd->get(), POLLOUT, deadline); !wait.empty()) {
        error = "connect: " + wait;
        continue;
      }
      int so_error = 0;
      socklen_t length = sizeof so_error;
      getsockopt(fd->get(), SOL_SOCKET, SO_ERROR, &so_error, &length);
      if (so_error != 0) {
        error = std::string("connect: ") + std::strerror(so_error);
        continue;
      }
    }
    return fd;
  }
  return std::unexpected(error);
}

// Decodes a chunked body (RFC 9112 7.1); extensions and trailers are ignored.
std::expected<std::string, std::string> Unchunk(const std::string& raw) {
  std::string body;
  size_t at = 0;
  for (;;) {
    const size_t line_end = raw.find("\r\n", at);
    if (line_end == std::string::npos) return std::unexpected("truncated chunked body");
    size_t size = 0;
    try {
      size = std::stoul(raw.substr(at, line_end - at), nullptr, 16);
    } catch (const std::exception&) {
      return std::unexpected("bad chunk size");
    }
    if (size == 0) return body;
    at = line_end + 2;
    if (raw.size() < at + size + 2) return std::unexpected("truncated chunked body");
    body.append(raw, at, size);
    at += size + 2;
  }
}

}  // namespace

std::expected<HttpUrl, std::string> ParseHttpUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) {
    // Say what is missing and the way around it: an exporter behind --web.config.file.
    return std::unexpected(
        "not an http:// URL: " + url +
        (url.starts_with("https://")
             ? " (doctor's client has no TLS and no basic auth, the --web.config.file options; "
               "fetch the report with curl --cacert CA -u USER " +
                   url + "/doctor)"
             : std::string()));
  }
  std::string rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  HttpUrl parsed;
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) parsed.path = rest.substr(slash);
  while (!parsed.path.empty() && parsed.path.back() == '/') parsed.path.pop_back();
  if (authority.find('@') != std::string::npos) {
    return std::unexpected("credentials in the URL are not supported: " + url);
  }
  std::string port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string::npos) return std::unexpected("unclosed [ in " + url);
    parsed.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::unexpected("bad host in " + url);
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    parsed.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (parsed.host.empty()) return std::unexpected("no host in " + url);
  if (port.empty() && authority.back() == ':') return std::unexpected("empty port in " + url);
  parsed.port = port.empty() ? "80" : port;
  if (parsed.port.find_first_not_of("0123456789") != std::string::npos || parsed.port.size() > 5 ||
      std::stoi(parsed.port) == 0 || std::stoi(parsed.port) > 65535) {
    return std::unexpected("bad port in " + url);
  }
  return parsed;
}

std::expected<HttpAnswer, std::string> HttpGet(const HttpUrl& url, const std::string& target,
                                               std::chrono::milliseconds timeout, size_t max_body) {
  const auto deadline = Clock::now() + timeout;
  auto connected = Connect(url, deadline);
  if (!connected) return std::unexpected(connected.error());
  const std::unique_ptr<Fd>& fd = *connected;
  const std::string host =
      url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  const std::string request = "GET " + url.path + target + " HTTP/1.1\r\nHost: " + host + ":" +
                              url.port +
                              "\r\nAccept: application/json\r\nConnection: close\r\n"
                              "User-Agent: rdmascope-doctor\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    if (std::string wait = WaitFor(fd->get(), POLLOUT, deadline); !wait.empty()) {
      return std::unexpected("sending the request: " + wait);
    }
    const ssize_t n = send(fd->get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return std::unexpected(std::string("send: ") + std::strerror(errno));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[16384];
  for (;;) {
    if (std::string wait = WaitFor(fd->get(), POLLIN, deadline); !wait.empty()) {
      return std::unexpected("reading the answer: " + wait);
    }
    const ssize_t n = recv(fd->get(), buffer, sizeof buffer, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return std::unexpected(std::string("recv: ") + std::strerror(errno));
    }
    raw.append(buffer, static_cast<size_t>(n));
    if (raw.size() > max_body + 65536) return std::unexpected("answer larger than the limit");
  }
  const size_t head_end = raw.find("\r\n\r\n");
  if (!raw.starts_with("HTTP/1.") || head_end == std::string::npos || raw.size() < 12) {
    return std::unexpected("not an HTTP answer");
  }
  HttpAnswer answer;
  try {
    answer.status = std::stoi(raw.substr(9, 3));
  } catch (const std::exception&) {
    return std::unexpected("bad HTTP status line");
  }
  std::string head = raw.substr(0, head_end);
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  answer.body = raw.substr(head_end + 4);
  if (head.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
    auto body = Unchunk(answer.body);
    if (!body) return std::unexpected(body.error());
    answer.body = std::move(*body);
  } else if (const size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
    size_t length = 0;
    try {
      length = std::stoul(head.substr(at + 17));
    } catch (const std::exception&) {
      return std::unexpected("bad Content-Length");
    }
    if (answer.body.size() < length) return std::unexpected("answer shorter than its length");
    answer.body.resize(length);
  }
  return answer;
}

}  // namespace rdmascope
