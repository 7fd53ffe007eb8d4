#include "sys/netlink_socket.h"

#include <libmnl/libmnl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

namespace rdmascope::sys {

std::expected<mnl_socket*, int> OpenNetlinkSocket(int protocol) {
  mnl_socket* socket = mnl_socket_open2(protocol, SOCK_CLOEXEC);
  if (socket == nullptr) return std::unexpected(errno);
  if (mnl_socket_bind(socket, 0, MNL_SOCKET_AUTOPID) < 0) {
    const int err = errno;
    mnl_socket_close(socket);
    return std::unexpected(err);
  }
  const timeval timeout{.tv_sec = 1, .tv_usec = 0};
  setsockopt(mnl_socket_get_fd(socket), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return socket;
}

}  // namespace rdmascope::sys
