// core/sd_notify: the datagram systemd reads from $NOTIFY_SOCKET (path and abstract sockets).
#include "core/sd_notify.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace rdmascope::sd {
namespace {

// A datagram socket bound to `address` in $NOTIFY_SOCKET's form, standing for systemd.
class Listener {
 public:
  explicit Listener(const std::string& address) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, address.data(), address.size());
    if (address[0] == '@') addr.sun_path[0] = '\0';
    bound_ = bind(fd_, reinterpret_cast<const sockaddr*>(&addr),
                  static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size())) == 0;
  }
  ~Listener() { close(fd_); }
  bool bound() const { return bound_; }
  // The next datagram, or "" if none is queued (never waits: the sender has returned).
  std::string Receive() const {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

std::string UniqueName(const char* what) {
  return std::string("rdmascope-sd-notify-test-") + what + "-" + std::to_string(getpid());
}

TEST(SdNotify, SendsOneDatagramToAPathSocket) {
  char dir[] = "/tmp/rdmascope-sd-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/notify";
  {
    Listener systemd(path);
    ASSERT_TRUE(systemd.bound());
    const auto sent = NotifyTo(path, "READY=1\nSTATUS=listening");
    ASSERT_TRUE(sent) << sent.error();
    EXPECT_EQ(systemd.Receive(), "READY=1\nSTATUS=listening");
    EXPECT_EQ(systemd.Receive(), "");
  }
  unlink(path.c_str());
  rmdir(dir);
}

TEST(SdNotify, SendsToAnAbstractSocket) {
  const std::string address = "@" + UniqueName("abstract");
  Listener systemd(address);
  ASSERT_TRUE(systemd.bound());
  const auto sent = NotifyTo(address, "STOPPING=1");
  ASSERT_TRUE(sent) << sent.error();
  EXPECT_EQ(systemd.Receive(), "STOPPING=1");
}

TEST(SdNotify, NotifyUsesTheEnvironmentAndDoesNothingWithoutIt) {
  const std::string address = "@" + UniqueName("env");
  Listener systemd(address);
  ASSERT_TRUE(systemd.bound());
  unsetenv("NOTIFY_SOCKET");
  auto sent = Notify("READY=1");
  ASSERT_TRUE(sent) << sent.error();
  EXPECT_FALSE(*sent);
  setenv("NOTIFY_SOCKET", "", 1);
  sent = Notify("READY=1");
  ASSERT_TRUE(sent) << sent.error();
  EXPECT_FALSE(*sent);
  EXPECT_EQ(systemd.Receive(), "");
  setenv("NOTIFY_SOCKET", address.c_str(), 1);
  sent = Notify("READY=1");
  unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(sent) << sent.error();
  EXPECT_TRUE(*sent);
  EXPECT_EQ(systemd.Receive(), "READY=1");
}

TEST(SdNotify, BadAddressesAreErrorsNamingThem) {
  for (const std::string& bad : {std::string("relative/notify"), std::string("@"), std::string("/"),
                                 "/" + std::string(200, 'x'), "/tmp/" + UniqueName("absent")}) {
    const auto sent = NotifyTo(bad, "READY=1");
    ASSERT_FALSE(sent) << bad;
    EXPECT_NE(sent.error().find("NOTIFY_SOCKET="), std::string::npos) << sent.error();
  }
  setenv("NOTIFY_SOCKET", "not-a-socket", 1);
  const auto sent = Notify("READY=1");
  unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(sent);
}

TEST(SdNotify, ReloadingCarriesTheMonotonicClock) {
  const std::string state = ReloadingState();
  ASSERT_TRUE(state.starts_with("RELOADING=1\nMONOTONIC_USEC=")) << state;
  const std::string usec = state.substr(state.find('=', 12) + 1);
  EXPECT_FALSE(usec.empty());
  EXPECT_EQ(usec.find_first_not_of("0123456789"), std::string::npos) << usec;
}

}  // namespace
}  // namespace rdmascope::sd
