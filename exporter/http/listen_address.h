// --web.listen-address: parsing node_exporter-style addresses and binding the listening socket
// ourselves (so that ":port" is one dual-stack IPv6 socket that also accepts IPv4, and the bound
// port of ":0" can be read back).
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace rdmascope {

struct ListenAddress {
  std::string host;  // empty: every address (IPv6 and IPv4); IPv6 literals without brackets
  uint16_t port = 0;
};

// ":9879" -> {"", 9879}; "127.0.0.1:9879" -> {"127.0.0.1", 9879}; "[::1]:9879" -> {"::1", 9879};
// a one-line error otherwise (IPv6 hosts must be bracketed).
std::expected<ListenAddress, std::string> ParseListenAddress(std::string_view listen_address);

// A bound, listening, non-blocking, close-on-exec TCP socket, or a one-line error. An empty
// host binds [::] with IPV6_V6ONLY off (IPv4 clients arrive as ::ffff:a.b.c.d); on a kernel
// without IPv6 it falls back to 0.0.0.0.
std::expected<int, std::string> BindListenSocket(const ListenAddress& address);

// The port a bound socket listens on (the kernel's choice for port 0).
int LocalPort(int socket_fd);

}  // namespace rdmascope
