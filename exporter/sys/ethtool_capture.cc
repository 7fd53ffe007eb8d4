#include "sys/ethtool_capture.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "core/capture.h"
#include "core/sysfs.h"

namespace rdmascope::sys {
namespace {

// The largest text the tool prints for one interface: 1<<20 stats (Ethtool's own bound) at
// about 40 bytes each would be 40 MiB; no driver comes near, so a file past 8 MiB is refused.
constexpr size_t kMaxEthtoolText = 8 << 20;
constexpr uint32_t kMaxReplayedStats = 1 << 20;

// Calls fn(line) for each line, without its newline.
template <typename Fn>
void ForEachLine(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    fn(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
}

// "key: value" split at the last ':' (names hold no ':' but values may: a firmware version
// never does, a bus-info "0000:03:00.0" does, so -i is split at the first).
std::optional<std::pair<std::string_view, std::string_view>> SplitAt(std::string_view line,
                                                                     size_t colon) {
  if (colon == std::string_view::npos) return std::nullopt;
  return std::pair{sysfs::Trim(line.substr(0, colon)), sysfs::Trim(line.substr(colon + 1))};
}

void CopyField(char* field, size_t size, std::string_view value) {
  std::memset(field, 0, size);
  std::memcpy(field, value.data(), std::min(value.size(), size - 1));
}

std::expected<std::string, int> Read(const capture::Session& session, std::string_view ifname,
                                     std::string_view file) {
  const auto path = EthtoolCapturePath(ifname, file);
  if (!path) return std::unexpected(path.error());
  return session.reader()->ReadFile(session.sample(), *path, kMaxEthtoolText);
}

int StringSetCount(const capture::Session& session, std::string_view ifname, uint32_t set,
                   uint32_t& count) {
  if (set == ETH_SS_STATS) {
    const auto text = Read(session, ifname, kEthtoolStatsFile);
    if (!text) return text.error();
    const auto stats = ParseEthtoolStats(*text);
    if (!stats) return stats.error();
    count = static_cast<uint32_t>(stats->size());
    return 0;
  }
  if (set == ETH_SS_PRIV_FLAGS) {
    const auto text = Read(session, ifname, kEthtoolPrivFlagsFile);
    if (!text) return text.error();
    const auto flags = ParsePrivateFlags(*text);
    if (!flags) return flags.error();
    count = static_cast<uint32_t>(flags->size());
    return 0;
  }
  return EOPNOTSUPP;
}

// The kernel's answers to one command, from the capture; `command` is the caller's buffer
// sized for the length it asked for, so no more than that many entries are ever written.
int Answer(const capture::Session& session, std::string_view ifname, void* command) {
  uint32_t cmd;
  std::memcpy(&cmd, command, sizeof cmd);
  switch (cmd) {
    case ETHTOOL_GDRVINFO: {
      const auto text = Read(session, ifname, kEthtoolDriverFile);
      if (!text) return text.error();
      const auto info = ParseDriverInfo(*text);
      if (!info) return info.error();
      auto* out = static_cast<ethtool_drvinfo*>(command);
      CopyField(out->driver, sizeof out->driver, info->driver);
      CopyField(out->version, sizeof out->version, info->version);
      CopyField(out->fw_version, sizeof out->fw_version, info->firmware_version);
      CopyField(out->bus_info, sizeof out->bus_info, info->bus_info);
      return 0;
    }
    case ETHTOOL_GSSET_INFO: {
      // One set per request is all Ethtool asks for; the count follows the header.
      auto* info = static_cast<ethtool_sset_info*>(command);
      for (uint32_t set = 0; set < 64; ++set) {
        if ((info->sset_mask & (1ULL << set)) == 0) continue;
        uint32_t count = 0;
        if (const int err = StringSetCount(session, ifname, set, count); err != 0) {
          if (err != EOPNOTSUPP && err != ENOENT) return err;
          info->sset_mask = 0;  // as the kernel does for a set the driver lacks
          return 0;
        }
        info->sset_mask = 1ULL << set;
        std::memcpy(static_cast<char*>(command) + sizeof(ethtool_sset_info), &count, sizeof count);
        return 0;
      }
      return EOPNOTSUPP;
    }
    case ETHTOOL_GSTRINGS: {
      auto* strings = static_cast<ethtool_gstrings*>(command);
      std::vector<std::string> names;
      if (strings->string_set == ETH_SS_STATS) {
        const auto text = Read(session, ifname, kEthtoolStatsFile);
        if (!text) return text.error();
        const auto stats = ParseEthtoolStats(*text);
        if (!stats) return stats.error();
        for (const auto& [name, value] : *stats) names.push_back(name);
      } else if (strings->string_set == ETH_SS_PRIV_FLAGS) {
        const auto text = Read(session, ifname, kEthtoolPrivFlagsFile);
        if (!text) return text.error();
        const auto flags = ParsePrivateFlags(*text);
        if (!flags) return flags.error();
        for (const auto& [name, on] : *flags) names.push_back(name);
      } else {
        return EOPNOTSUPP;
      }
      // Fewer entries than asked for shows as a different len: the caller reads again.
      const size_t copied = std::min<size_t>(names.size(), strings->len);
      for (size_t i = 0; i < copied; ++i) {
        CopyField(reinterpret_cast<char*>(strings->data) + i * ETH_GSTRING_LEN, ETH_GSTRING_LEN,
                  names[i]);
      }
      strings->len = static_cast<uint32_t>(names.size());
      return 0;
    }
    case ETHTOOL_GSTATS: {
      auto* stats = static_cast<ethtool_stats*>(command);
      const auto text = Read(session, ifname, kEthtoolStatsFile);
      if (!text) return text.error();
      const auto parsed = ParseEthtoolStats(*text);
      if (!parsed) return parsed.error();
      const size_t copied = std::min<size_t>(parsed->size(), stats->n_stats);
      for (size_t i = 0; i < copied; ++i) stats->data[i] = (*parsed)[i].second;
      stats->n_stats = static_cast<uint32_t>(parsed->size());
      return 0;
    }
    case ETHTOOL_GPFLAGS: {
      const auto text = Read(session, ifname, kEthtoolPrivFlagsFile);
      if (!text) return text.error();
      const auto flags = ParsePrivateFlags(*text);
      if (!flags) return flags.error();
      auto* value = static_cast<ethtool_value*>(command);
      value->data = 0;
      for (size_t i = 0; i < flags->size() && i < 32; ++i) {
        if ((*flags)[i].second) value->data |= 1U << i;
      }
      return 0;
    }
    case ETHTOOL_GCOALESCE: {
      const auto text = Read(session, ifname, kEthtoolCoalesceFile);
      if (!text) return text.error();
      const auto settings = ParseCoalesce(*text);
      if (!settings) return settings.error();
      auto* out = static_cast<ethtool_coalesce*>(command);
      out->rx_coalesce_usecs = settings->rx_usecs;
      out->tx_coalesce_usecs = settings->tx_usecs;
      out->use_adaptive_rx_coalesce = settings->adaptive_rx ? 1 : 0;
      out->use_adaptive_tx_coalesce = settings->adaptive_tx ? 1 : 0;
      return 0;
    }
    default:
      return EOPNOTSUPP;
  }
}

}  // namespace

std::string FormatEthtoolStats(const EthtoolStats& stats) {
  std::string text = "NIC statistics:\n";
  for (const auto& [name, value] : stats) {
    text += "     " + name + ": " + std::to_string(value) + "\n";
  }
  return text;
}

std::expected<EthtoolStats, int> ParseEthtoolStats(std::string_view text) {
  EthtoolStats stats;
  bool header = false;
  bool bad = false;
  ForEachLine(text, [&](std::string_view line) {
    if (bad || sysfs::Trim(line).empty()) return;
    if (!header) {
      header = sysfs::Trim(line) == "NIC statistics:";
      bad = !header;
      return;
    }
    const auto pair = SplitAt(line, line.rfind(':'));
    const auto value = pair ? sysfs::ParseUnsigned(pair->second) : std::nullopt;
    if (!pair || pair->first.empty() || pair->first.size() >= ETH_GSTRING_LEN || !value ||
        stats.size() >= kMaxReplayedStats) {
      bad = true;
      return;
    }
    stats.emplace_back(std::string(pair->first), *value);
  });
  if (bad || !header) return std::unexpected(EBADMSG);
  return stats;
}

std::string FormatDriverInfo(const DriverInfo& info) {
  return "driver: " + info.driver + "\nversion: " + info.version +
         "\nfirmware-version: " + info.firmware_version + "\nbus-info: " + info.bus_info + "\n";
}

std::expected<DriverInfo, int> ParseDriverInfo(std::string_view text) {
  DriverInfo info;
  bool driver = false;
  ForEachLine(text, [&](std::string_view line) {
    const auto pair = SplitAt(line, line.find(':'));
    if (!pair) return;
    const std::string value(pair->second);
    if (pair->first == "driver") {
      info.driver = value;
      driver = true;
    } else if (pair->first == "version") {
      info.version = value;
    } else if (pair->first == "firmware-version") {
      info.firmware_version = value;
    } else if (pair->first == "bus-info") {
      info.bus_info = value;
    }
  });
  if (!driver) return std::unexpected(EBADMSG);
  return info;
}

std::string FormatCoalesce(std::string_view ifname, const CoalesceSettings& settings) {
  const auto on = [](bool value) { return value ? "on" : "off"; };
  return "Coalesce parameters for " + std::string(ifname) +
         ":\nAdaptive RX: " + on(settings.adaptive_rx) + "  TX: " + on(settings.adaptive_tx) +
         "\nrx-usecs: " + std::to_string(settings.rx_usecs) +
         "\ntx-usecs: " + std::to_string(settings.tx_usecs) + "\n";
}

std::expected<CoalesceSettings, int> ParseCoalesce(std::string_view text) {
  CoalesceSettings settings;
  bool adaptive = false;
  bool bad = false;
  ForEachLine(text, [&](std::string_view line) {
    line = sysfs::Trim(line);
    if (line.starts_with("Adaptive RX:")) {
      // "Adaptive RX: on  TX: off" (older ethtool), "Adaptive RX: n/a  TX: n/a" (a driver
      // without adaptive moderation): n/a is off.
      const size_t tx = line.find("TX:");
      if (tx == std::string_view::npos) {
        bad = true;
        return;
      }
      settings.adaptive_rx = sysfs::Trim(line.substr(12, tx - 12)) == "on";
      settings.adaptive_tx = sysfs::Trim(line.substr(tx + 3)) == "on";
      adaptive = true;
      return;
    }
    const auto pair = SplitAt(line, line.find(':'));
    if (!pair || (pair->first != "rx-usecs" && pair->first != "tx-usecs")) return;
    uint32_t value = 0;
    if (pair->second != "n/a") {
      const auto parsed = sysfs::ParseUnsigned(pair->second);
      if (!parsed || *parsed > UINT32_MAX) {
        bad = true;
        return;
      }
      value = static_cast<uint32_t>(*parsed);
    }
    (pair->first == "rx-usecs" ? settings.rx_usecs : settings.tx_usecs) = value;
  });
  if (bad || !adaptive) return std::unexpected(EBADMSG);
  return settings;
}

std::string FormatPrivateFlags(std::string_view ifname, const PrivateFlags& flags) {
  size_t width = 0;
  for (const auto& [name, on] : flags) width = std::max(width, name.size());
  std::string text = "Private flags for " + std::string(ifname) + ":\n";
  for (const auto& [name, on] : flags) {
    text += name + std::string(width - name.size(), ' ') + ": " + (on ? "on" : "off") + "\n";
  }
  return text;
}

std::expected<PrivateFlags, int> ParsePrivateFlags(std::string_view text) {
  PrivateFlags flags;
  bool header = false;
  bool bad = false;
  ForEachLine(text, [&](std::string_view line) {
    if (bad || sysfs::Trim(line).empty()) return;
    if (!header) {
      header = line.starts_with("Private flags for ");
      bad = !header;
      return;
    }
    const auto pair = SplitAt(line, line.rfind(':'));
    if (!pair || pair->first.empty() || pair->first.size() >= ETH_GSTRING_LEN ||
        (pair->second != "on" && pair->second != "off") || flags.size() >= 32) {
      bad = true;
      return;
    }
    flags.emplace_back(std::string(pair->first), pair->second == "on");
  });
  if (bad || !header) return std::unexpected(EBADMSG);
  return flags;
}

std::expected<std::string, int> EthtoolCapturePath(std::string_view ifname, std::string_view file) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ || ifname == "." || ifname == ".." ||
      ifname.find('/') != std::string_view::npos || ifname.find('\0') != std::string_view::npos) {
    return std::unexpected(EINVAL);
  }
  return "ethtool/" + std::string(ifname) + "/" + std::string(file);
}

EthtoolIoctl ReplayEthtoolIoctl(const capture::Session& session) {
  return [&session](std::string_view ifname, void* command) {
    return Answer(session, ifname, command);
  };
}

InterfaceIoctl ReplayInterfaceIoctl(const capture::Session& session) {
  return [&session](std::string_view ifname, unsigned long request, int& value) {
    const auto text =
        Read(session, ifname, request == SIOCGIFMTU ? kEthtoolMtuFile : kEthtoolIfindexFile);
    if (!text) return text.error();
    const auto parsed = sysfs::ParseSigned(*text);
    if (!parsed || *parsed < 0 || *parsed > INT32_MAX) return EBADMSG;
    value = static_cast<int>(*parsed);
    return 0;
  };
}

}  // namespace rdmascope::sys
