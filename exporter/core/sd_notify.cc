#include "core/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace rdmascope::sd {

std::expected<void, std::string> NotifyTo(std::string_view socket_address, std::string_view state) {
  const std::string where = "NOTIFY_SOCKET=" + std::string(socket_address);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // A path must be absolute; '@' is an abstract name (its first byte becomes NUL). Neither is
  // NUL-terminated in the address: its length is given.
  if (socket_address.size() < 2 || (socket_address[0] != '/' && socket_address[0] != '@')) {
    return std::unexpected(where + ": neither an absolute path nor an abstract socket");
  }
  if (socket_address.size() > sizeof address.sun_path) {
    return std::unexpected(where + ": longer than a socket address");
  }
  std::memcpy(address.sun_path, socket_address.data(), socket_address.size());
  if (address.sun_path[0] == '@') address.sun_path[0] = '\0';
  const auto length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_address.size());

  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(where + ": socket: " + std::strerror(errno));
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&address), length);
  const int error = errno;
  close(fd);
  if (sent < 0) return std::unexpected(where + ": sendto: " + std::strerror(error));
  if (static_cast<size_t>(sent) != state.size()) {
    return std::unexpected(where + ": sendto: datagram truncated");
  }
  return {};
}

std::expected<bool, std::string> Notify(std::string_view state) {
  const char* socket_address = std::getenv("NOTIFY_SOCKET");
  if (socket_address == nullptr || *socket_address == '\0') return false;
  if (auto sent = NotifyTo(socket_address, state); !sent) return std::unexpected(sent.error());
  return true;
}

void NotifyOrWarn(std::string_view state) {
  if (const auto sent = Notify(state); !sent) {
    log::Warn("cannot notify the service manager",
              {{"state", std::string(state)}, {"err", sent.error()}});
  }
}

std::string ReloadingState() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const unsigned long long usec = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL +
                                  static_cast<unsigned long long>(now.tv_nsec) / 1000ULL;
  return "RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec);
}

}  // namespace rdmascope::sd
