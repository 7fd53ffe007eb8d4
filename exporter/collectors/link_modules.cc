#include "collectors/link_modules.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "core/capture.h"
#include "core/log.h"
#include "sys/module_eeprom_source.h"

namespace rdmascope {
namespace {

bool Overlaps(uint8_t offset, uint8_t length, int first, int last) {
  return offset <= last && offset + length - 1 >= first;
}

// Why a module gave nothing, for the debug log (the reason label is the errno's name).
std::string WhyUnavailable(int error) {
  switch (error) {
    case EOPNOTSUPP:
      return "the driver gives no module access (EOPNOTSUPP: a virtual interface, rxe's, or a "
             "driver without get_module_eeprom_by_page)";
    case EPERM:
    case EACCES:
      return "reading module pages needs CAP_NET_ADMIN";
    case EIO:
    case ENODEV:
    case ENXIO:
    case EREMOTEIO:
      return "no module plugged, or it does not answer (" + capture::ErrnoName(error) + ")";
    default:
      return "module read failed: " + std::string(std::strerror(error));
  }
}

}  // namespace

bool IsDynamicRange(uint8_t identifier, const sys::ModulePageKey& key, uint8_t offset,
                    uint8_t length) {
  if (length == 0) return false;
  const bool lower = offset < 128;
  switch (identifier) {
    case 0x03:  // SFF-8472: A2h's monitors
      return key.i2c_address == 0x51 && Overlaps(offset, length, 96, 105);
    case 0x0c:
    case 0x0d:
    case 0x11:  // SFF-8636: the lower page's monitors
      return key.i2c_address == 0x50 && lower && Overlaps(offset, length, 22, 57);
    case 0x18:
    case 0x19:
    case 0x1e:  // CMIS
      if (key.i2c_address != 0x50) return false;
      if (!lower) return key.page == 0x11;
      return Overlaps(offset, length, 3, 3) || Overlaps(offset, length, 14, 17) ||
             Overlaps(offset, length, 41, 41);
    default:  // a map the decoder does not know: nothing is kept
      return true;
  }
}

sys::ModulePageReader StaticPageCache::Wrap(sys::ModulePageReader read) {
  return [this, read = std::move(read)](const sys::ModulePageKey& key, uint8_t offset,
                                        uint8_t length, uint8_t* out) {
    // Byte 0 (the identifier) is read at every read: one byte that says the module is still
    // there, of the same type, and which of the ranges below are static.
    const Key identifier{0x50, 0, 0, 0, 1};
    if (key.i2c_address == 0x50 && offset == 0 && length == 1) {
      if (!read(key, offset, length, out)) return false;
      const auto cached = ranges_.find(identifier);
      if (cached != ranges_.end() && static_cast<uint8_t>(cached->second[0]) != out[0]) {
        ranges_.clear();  // another module: nothing of the last one's static pages holds
      }
      ranges_[identifier].assign(1, static_cast<char>(out[0]));
      return true;
    }
    const auto id = ranges_.find(identifier);
    const bool dynamic = id == ranges_.end() ||
                         IsDynamicRange(static_cast<uint8_t>(id->second[0]), key, offset, length);
    // The lower half is one whatever the page: keyed as page 0.
    const Key where{key.i2c_address, offset < 128 ? uint8_t{0} : key.page,
                    offset < 128 ? uint8_t{0} : key.bank, offset, length};
    if (!dynamic) {
      if (const auto it = ranges_.find(where); it != ranges_.end()) {
        std::memcpy(out, it->second.data(), length);
        return true;
      }
    }
    if (!read(key, offset, length, out)) return false;
    if (!dynamic) ranges_[where].assign(reinterpret_cast<const char*>(out), length);
    return true;
  };
}

ModuleReads::ModuleReads(Intervals intervals, Read read, Clock clock)
    : intervals_(intervals),
      read_(std::move(read)),
      clock_(std::move(clock)),
      schedule_(std::chrono::duration_cast<LinkSchedule::Duration>(intervals.dynamic), clock_()) {}

void ModuleReads::SetNetdevs(const std::vector<std::string>& netdevs) {
  netdevs_ = netdevs;
  schedule_.SetModules(netdevs);
  std::erase_if(entries_, [&](const auto& e) {
    return std::ranges::find(netdevs, e.first) == netdevs.end();
  });
  std::erase_if(
      states_, [&](const auto& e) { return std::ranges::find(netdevs, e.first) == netdevs.end(); });
}

size_t ModuleReads::Pass(const std::function<bool()>& stop) {
  size_t read = 0;
  for (const std::string& netdev : netdevs_) {
    if (stop && stop()) break;
    const auto now = clock_();
    if (!schedule_.Due(netdev, now)) continue;
    ReadOne(netdev, now);
    ++read;
  }
  return read;
}

void ModuleReads::ReadOne(const std::string& netdev, std::chrono::steady_clock::time_point now) {
  Entry& entry = entries_[netdev];
  ModuleState& state = states_[netdev];
  if (!entry.static_read || now - *entry.static_read >= intervals_.static_pages) {
    entry.cache.Clear();
  }
  bool whole = entry.cache.empty();
  const auto started = clock_();
  sys::ModuleReading reading;
  int error = 0;
  const auto read_module = [&] {
    // One source per read: recording writes its half pages when it ends, in this sample.
    sys::ModuleEepromSource source(
        netdev, [this, &netdev](const sys::ModulePageKey& key, uint8_t offset, uint8_t length) {
          return read_(netdev, key, offset, length);
        });
    reading = sys::DecodeModule(entry.cache.Wrap(source.Reader()));
    error = source.first_error();
  };
  read_module();
  if (!whole && error != 0 && !reading.temperature_celsius) {
    // The monitors did not read beside cached pages: the module may have been pulled or
    // swapped since they were read. Read it whole, so that nothing of the cache is shown of
    // another module (a page the module always refuses, its thresholds say, costs no retry).
    entry.cache.Clear();
    whole = true;
    read_module();
  }
  const double seconds = std::chrono::duration<double>(clock_() - started).count();
  if (reading.standard != sys::ModuleReading::Standard::kUnknown) {
    if (whole) entry.static_read = now;
    if (!state.available) log::Debug("link: module read", {{"netdev", netdev}});
    state.available = true;
    state.why.clear();
    state.reading = std::move(reading);
    state.read_seconds = seconds;
    // Part of it did not read (a page the module refused): what did is shown, the rest is
    // missing, and the failure counted.
    if (error != 0) ++state.errors[ReadErrorReason(error)];
    schedule_.Done(netdev, now);
    return;
  }
  // No module, or none the decoder knows: nothing of the last reading stays, and the next
  // module in this cage is read whole.
  entry.cache.Clear();
  entry.static_read.reset();
  state.available = false;
  state.reading.reset();
  state.read_seconds.reset();
  std::string why = error != 0                 ? WhyUnavailable(error)
                    : reading.problems.empty() ? "no module"
                                               : reading.problems.front();
  if (why != state.why) log::Debug("link: no module reading", {{"netdev", netdev}, {"why", why}});
  state.why = std::move(why);
  // A driver without module access is no failed read: the source is unavailable, and says so.
  if (error != 0 && error != EOPNOTSUPP) ++state.errors[ReadErrorReason(error)];
  if ((error == EPERM || error == EACCES) && !warned_permission_) {
    warned_permission_ = true;
    log::Warn("link: module pages not read: CAP_NET_ADMIN is missing", {{"netdev", netdev}});
  }
  // Neither a driver nor the exporter's capabilities change by the minute: asked again at
  // the static interval, not at every slot.
  const bool lasting = error == EOPNOTSUPP || error == EPERM || error == EACCES;
  if (lasting && intervals_.dynamic.count() > 0) {
    schedule_.Defer(
        netdev, now + std::chrono::duration_cast<LinkSchedule::Duration>(intervals_.static_pages));
  } else {
    schedule_.Done(netdev, now);
  }
}

std::string ReadErrorReason(int error) {
  std::string name = capture::ErrnoName(error);
  std::ranges::transform(name, name.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

}  // namespace rdmascope
