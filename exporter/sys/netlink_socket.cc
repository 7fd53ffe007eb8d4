#include "sys/netlink_socket.h"

#include <libmnl/libmnl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

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

bool WholeNetlinkMessages(const void* data, size_t len) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (len > 0) {
    if (len < sizeof(nlmsghdr)) return false;
    nlmsghdr header;
    std::memcpy(&header, bytes, sizeof header);
    if (header.nlmsg_len < sizeof(nlmsghdr) || header.nlmsg_len > len) return false;
    const size_t step = std::min<size_t>(NLMSG_ALIGN(header.nlmsg_len), len);
    bytes += step;
    len -= step;
  }
  return true;
}

int ReplyErrno(int error) {
  if (error < 0 && error >= -4095) error = -error;
  return error > 0 && error <= 4095 ? error : EBADMSG;
}

}  // namespace rdmascope::sys
