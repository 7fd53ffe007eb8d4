// The SIOCETHTOOL ioctl interface: what `ethtool -i`, `ethtool -S` and `ethtool -c` read,
// without running ethtool. One Ethtool object wraps one socket in the caller's network
// namespace; create one per scrape.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmascope::sys {

struct DriverInfo {
  std::string driver;
  std::string version;
  std::string firmware_version;
  std::string bus_info;
};

struct CoalesceSettings {
  uint32_t rx_usecs = 0;
  uint32_t tx_usecs = 0;
  bool adaptive_rx = false;
  bool adaptive_tx = false;
};

// (name, on) in the driver's order, as `ethtool --show-priv-flags` prints them.
using PrivateFlags = std::vector<std::pair<std::string, bool>>;

// (name, value) in the driver's order, as `ethtool -S` prints them.
using EthtoolStats = std::vector<std::pair<std::string, uint64_t>>;

// The SIOCETHTOOL call for one interface and command: 0 or an errno. Replaceable for tests,
// which play a driver that reconfigures itself between the calls of one read.
using EthtoolIoctl = std::function<int(std::string_view ifname, void* command)>;
// SIOCGIFMTU or SIOCGIFINDEX for one interface: 0 with `value` set, or an errno. Replaceable for
// tests, which play an interface deleted and re-created under its name.
using InterfaceIoctl =
    std::function<int(std::string_view ifname, unsigned long request, int& value)>;

// Errors are errno values (ENODEV: the device vanished; EOPNOTSUPP: driver lacks the op).
class Ethtool {
 public:
  // Under a capture (core/capture.h): replaying, no socket, the ioctls answered from the
  // capture (sys/ethtool_capture.h); recording, each Get* also writes what it read.
  static std::expected<Ethtool, int> Open();
  static Ethtool WithIoctl(EthtoolIoctl ioctl, InterfaceIoctl interface_ioctl = nullptr);
  Ethtool(Ethtool&& other) noexcept;
  Ethtool& operator=(Ethtool&&) = delete;
  Ethtool(const Ethtool&) = delete;
  ~Ethtool();

  std::expected<DriverInfo, int> GetDriverInfo(std::string_view ifname) const;
  // `last_names`, if given, is the caller's copy of this interface's names from its last read
  // (empty at first): with it, a device whose names did not change is read in the kernel's
  // three calls (count, values, names) instead of four (count, names, values, names). The
  // pairing is checked the same way: the names read after the values must be those expected.
  std::expected<EthtoolStats, int> GetStats(std::string_view ifname,
                                            std::string* last_names = nullptr) const;
  std::expected<CoalesceSettings, int> GetCoalesce(std::string_view ifname) const;
  // ETH_SS_PRIV_FLAGS names, then ETHTOOL_GPFLAGS (bit i is name i): mlx5's rx_cqe_compress...
  std::expected<PrivateFlags, int> GetPrivateFlags(std::string_view ifname) const;
  // SIOCGIFMTU on the same socket: cheaper than opening <sysfs>/class/net/X/mtu.
  std::expected<int, int> GetMtu(std::string_view ifname) const;
  // SIOCGIFINDEX: the interface's index, which changes when it is deleted and re-created under
  // the same name (net/core/dev.c allocates indexes cyclically, dev_new_index() in v6.1).
  std::expected<int, int> GetIfindex(std::string_view ifname) const;

 private:
  explicit Ethtool(int fd) : fd_(fd) {}
  int Ioctl(std::string_view ifname, void* command) const;
  std::expected<int, int> InterfaceValue(std::string_view ifname, unsigned long request) const;
  std::expected<uint32_t, int> StatsCount(std::string_view ifname) const;
  std::expected<PrivateFlags, int> ReadPrivateFlags(std::string_view ifname) const;
  std::expected<EthtoolStats, int> ReadStats(std::string_view ifname,
                                             std::string* last_names) const;
  // What one Get* returned, into the capture being recorded.
  void Record(std::string_view ifname, std::string_view file, std::string_view tool,
              const std::expected<std::string, int>& text) const;

  int fd_;
  bool recording_ = false;
  EthtoolIoctl fake_;
  InterfaceIoctl fake_interface_;
};

namespace ethtool_testing {
// Replaces mprotect(2), used to make the guard page after each stats buffer; nullptr restores
// the real one. Buffers are cached per thread: call GetStats on a new thread to see it used.
void SetMprotect(int (*mprotect)(void* addr, size_t len, int prot));
}  // namespace ethtool_testing

}  // namespace rdmascope::sys
