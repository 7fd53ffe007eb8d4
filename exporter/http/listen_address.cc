#include "http/listen_address.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/log.h"

namespace rdmascope {
namespace {

// socket + SO_REUSEADDR (restart while old connections sit in TIME_WAIT) + bind + listen.
// On failure `error_code` keeps the errno of the step that failed.
std::expected<int, std::string> BindOne(const sockaddr* addr, socklen_t length, bool dual_stack,
                                        int& error_code) {
  const auto Errno = [&error_code](std::string_view what) {
    error_code = errno;
    return std::string(what) + ": " + std::strerror(error_code);
  };
  const int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(Errno("socket"));
  const int on = 1;
  const int off = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  // Explicit rather than inherited from net.ipv6.bindv6only, which a host may have set to 1.
  if (dual_stack && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0) {
    const std::string error = Errno("IPV6_V6ONLY");
    close(fd);
    return std::unexpected(error);
  }
  if (bind(fd, addr, length) != 0) {
    const std::string error = Errno("bind");
    close(fd);
    return std::unexpected(error);
  }
  if (listen(fd, SOMAXCONN) != 0) {
    const std::string error = Errno("listen");
    close(fd);
    return std::unexpected(error);
  }
  return fd;
}

}  // namespace

std::expected<ListenAddress, std::string> ParseListenAddress(std::string_view address) {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return std::unexpected("listen address must be [host]:port, got \"" + std::string(address) +
                           "\"");
  }
  std::string_view host = address.substr(0, colon);
  const std::string_view port_text = address.substr(colon + 1);
  int port = -1;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return std::unexpected("invalid port in listen address \"" + std::string(address) + "\"");
  }
  if (host.find_first_of(", \t") != std::string_view::npos) {
    return std::unexpected("invalid host in listen address \"" + std::string(address) + "\"");
  }
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') {
      return std::unexpected("invalid host in listen address \"" + std::string(address) + "\"");
    }
    host = host.substr(1, host.size() - 2);
    // "[a]:b]:80" is not one bracketed host (found by fuzz/listen_address_fuzzer).
    if (host.find_first_of("[]") != std::string_view::npos) {
      return std::unexpected("invalid host in listen address \"" + std::string(address) + "\"");
    }
  } else if (host.find_first_of(":[]") != std::string_view::npos) {
    return std::unexpected("IPv6 hosts must be bracketed, e.g. [::1]:9879");
  }
  return ListenAddress{std::string(host), static_cast<uint16_t>(port)};
}

std::expected<int, std::string> BindListenSocket(const ListenAddress& address) {
  if (address.host.empty()) {
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(address.port);
    int error_code = 0;
    auto fd = BindOne(reinterpret_cast<const sockaddr*>(&any6), sizeof any6, true, error_code);
    // A kernel booted with ipv6.disable=1 has no AF_INET6 sockets: serve IPv4 only.
    if (fd || (error_code != EAFNOSUPPORT && error_code != EADDRNOTAVAIL)) return fd;
    log::Info("IPv6 unavailable, listening on IPv4 only", {{"reason", fd.error()}});
    sockaddr_in any4{};
    any4.sin_family = AF_INET;
    any4.sin_addr.s_addr = htonl(INADDR_ANY);
    any4.sin_port = htons(address.port);
    return BindOne(reinterpret_cast<const sockaddr*>(&any4), sizeof any4, false, error_code);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (const int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return std::unexpected("cannot resolve \"" + address.host + "\": " + gai_strerror(rc));
  }
  // The first address that binds, as Go's net.Listen does for a name.
  std::expected<int, std::string> result = std::unexpected("no address for " + address.host);
  for (const addrinfo* each = found; each != nullptr; each = each->ai_next) {
    int error_code = 0;
    result = BindOne(each->ai_addr, each->ai_addrlen, false, error_code);
    if (result) break;
  }
  freeaddrinfo(found);
  return result;
}

int LocalPort(int socket_fd) {
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (getsockname(socket_fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) return 0;
  if (local.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
}

}  // namespace rdmascope
