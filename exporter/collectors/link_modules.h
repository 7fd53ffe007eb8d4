// The link collector's module readings (issue 40, optics): per interface, the module's pages
// read through sys/module_eeprom_source (live, recorded or replayed) and decoded by
// sys/module_eeprom, on LinkSchedule's staggered slots. Static pages (identity, thresholds,
// advertisements, SFF-8472 calibration) are read on first sight and again every
// `static_interval`, and in between answered from a cache; dynamic ones (temperature, supply,
// lane monitors, CMIS module state and fault cause) at every read. A read that finds no
// module empties the cache, so a module swapped while out is read whole when it is back; so
// does a read whose monitors failed beside cached pages (the module is read whole again at once).
// With both intervals 0 (capture and replay), every pass reads every page of every module.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "collectors/link_schedule.h"
#include "sys/module_eeprom.h"

namespace rdmascope {

// Whether a range is of the module's dynamic pages, by the memory map byte 0 names: SFF-8472
// A2h 96..105; SFF-8636 lower page 22..57; CMIS lower page bytes 3 (module state), 14..17
// (temperature, supply), 41 (fault cause) and page 11h. Everything else the decoder reads is
// static.
bool IsDynamicRange(uint8_t identifier, const sys::ModulePageKey& key, uint8_t offset,
                    uint8_t length);

// A reader's static ranges, kept: Wrap(read) answers them from here once read. Byte 0 is read
// every time: a module of another type empties the cache.
class StaticPageCache {
 public:
  sys::ModulePageReader Wrap(sys::ModulePageReader read);
  void Clear() { ranges_.clear(); }
  bool empty() const { return ranges_.empty(); }

 private:
  using Key = std::tuple<uint8_t, uint8_t, uint8_t, uint8_t, uint8_t>;
  std::map<Key, std::string> ranges_;
};

// What the collector shows of one interface's module.
struct ModuleState {
  // rdma_link_source_available{source="module"}: a module answered with a memory map the
  // decoder knows. Otherwise `why` says what (logged at debug when it changes).
  bool available = false;
  std::string why;
  std::optional<sys::ModuleReading> reading;  // the last read; none once a read finds no module
  std::map<std::string, uint64_t> errors;     // failed reads by reason (errno name, lower case)
  std::optional<double> read_seconds;         // the last read that returned pages
};

class ModuleReads {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // One range of one interface's module (EthtoolNetlink::ReadModule on the host).
  using Read = std::function<std::expected<std::string, int>(
      std::string_view netdev, const sys::ModulePageKey&, uint8_t offset, uint8_t length)>;
  struct Intervals {
    std::chrono::nanoseconds dynamic{std::chrono::seconds(30)};
    std::chrono::nanoseconds static_pages{std::chrono::hours(1)};
  };
  ModuleReads(Intervals intervals, Read read, Clock clock);

  // The interfaces to follow, in slot order; the others are forgotten.
  void SetNetdevs(const std::vector<std::string>& netdevs);
  // Reads the modules due now, until `stop` says to (the collector is being destroyed: a
  // pass over many modules that time out would hold shutdown otherwise); returns how many
  // were read.
  size_t Pass(const std::function<bool()>& stop = nullptr);
  // The earliest time a module is due (the refresher's next wake-up).
  std::chrono::steady_clock::time_point NextDue() const { return schedule_.NextDue(); }
  const std::map<std::string, ModuleState>& states() const { return states_; }

 private:
  struct Entry {
    StaticPageCache cache;
    std::optional<std::chrono::steady_clock::time_point> static_read;
  };
  void ReadOne(const std::string& netdev, std::chrono::steady_clock::time_point now);

  Intervals intervals_;
  Read read_;
  Clock clock_;
  LinkSchedule schedule_;
  std::vector<std::string> netdevs_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, ModuleState> states_;
  bool warned_permission_ = false;
};

// "eopnotsupp" for EOPNOTSUPP: the reason label of read errors.
std::string ReadErrorReason(int error);

}  // namespace rdmascope
