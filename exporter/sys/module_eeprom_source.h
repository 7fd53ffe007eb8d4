// A pluggable module's pages for sys/module_eeprom's decoder, at the host boundary
// (core/capture.h; docs/capture.md "Module EEPROM"):
// - live: each range read through ethtool netlink (sys/ethtool_netlink.h);
// - recording: the same, and the bytes read kept per half page, written when the source ends
//   as samples/NNNN/ethtool/IF/module/i2c-0x50.page-0x00.bank-0.lower (or .upper): 128 raw
//   bytes, those never read (the latched flags) stored as 0, or `.errno` for a half the kernel
//   refused (EOPNOTSUPP: the driver reads no module; EIO: none plugged). The files are what
//   `ethtool -m IF raw on` prints, cut into halves, so a capture can be assembled without
//   rdmascope. Under --redact the vendor serial number is hashed in place (same length);
//   - replaying: those files answer (exactly 128 bytes, else refused); the kernel is never asked.
#pragma once

#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "sys/module_eeprom.h"

namespace rdmascope::sys {

// The capture path of one half page: "ethtool/eth0/module/i2c-0x50.page-0x11.bank-0.upper";
// nullopt for an interface name that is not a path component.
std::optional<std::string> ModuleHalfPath(std::string_view ifname, const ModulePageKey& key,
                                          bool upper);

class ModuleEepromSource {
 public:
  // The live read: `length` bytes at `offset` (EthtoolNetlink::ReadModule in the collector,
  // a fake in tests). Not called while a capture is replayed.
  using LiveRead =
      std::function<std::expected<std::string, int>(const ModulePageKey&, uint8_t, uint8_t)>;
  ModuleEepromSource(std::string ifname, LiveRead live);
  ~ModuleEepromSource();  // recording: writes the half pages read
  ModuleEepromSource(const ModuleEepromSource&) = delete;
  ModuleEepromSource& operator=(const ModuleEepromSource&) = delete;

  // For DecodeModule; valid while the source lives.
  ModulePageReader Reader();
  // The errno of the first read that failed (0: none): what the collector counts.
  int first_error() const { return first_error_; }

 private:
  struct Half {
    std::string bytes = std::string(128, '\0');
    bool read = false;  // some range of it was read
    int error = 0;      // the refusal, when nothing of it was
  };
  bool Read(const ModulePageKey& key, uint8_t offset, uint8_t length, uint8_t* out);
  bool Replay(const ModulePageKey& key, uint8_t offset, uint8_t length, uint8_t* out);

  std::string ifname_;
  LiveRead live_;
  std::map<std::pair<ModulePageKey, bool>, Half> halves_;  // recording, or replay's cache
  int first_error_ = 0;
};

}  // namespace rdmascope::sys
