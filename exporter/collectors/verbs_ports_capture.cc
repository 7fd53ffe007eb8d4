#include "collectors/verbs_ports_capture.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <set>

#include "core/capture.h"
#include "core/log.h"

namespace rdmascope {
namespace {

// A few lines per port; a host has tens of ports at most.
constexpr size_t kMaxQueryPortText = 1 << 20;
// IB_DEVICE_NAME_MAX.
constexpr size_t kMaxDeviceName = 64;

std::optional<uint32_t> Number(std::string_view text) {
  uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool IsIbvMtu(uint32_t bytes) {
  for (int mtu = 1; mtu <= 5; ++mtu) {
    if (IbvMtuToBytes(mtu) == bytes) return true;
  }
  return false;
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (!line.empty()) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos) break;
    line.remove_prefix(start);
    const size_t end = std::min(line.find_first_of(" \t"), line.size());
    fields.push_back(line.substr(0, end));
    line.remove_prefix(end);
  }
  return fields;
}

}  // namespace

std::string FormatPortMtus(const PortMtus& mtus) {
  std::string text = "# device port active_mtu_bytes max_mtu_bytes (ibv_query_port)\n";
  for (const auto& [key, mtu] : mtus) {
    text += key.first + " " + std::to_string(key.second) + " " + std::to_string(mtu.active_bytes) +
            " " + std::to_string(mtu.max_bytes) + "\n";
  }
  return text;
}

std::expected<PortMtus, std::string> ParsePortMtus(std::string_view text) {
  PortMtus mtus;
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    ++number;
    const auto fields = Fields(line);
    if (fields.empty() || fields[0].starts_with('#')) continue;
    const auto bad = [&](std::string_view why) {
      return std::unexpected("line " + std::to_string(number) + ": " + std::string(why));
    };
    if (fields.size() != 4) return bad("not \"device port active_mtu_bytes max_mtu_bytes\"");
    const std::string_view device = fields[0];
    if (device.size() > kMaxDeviceName || device.find('/') != std::string_view::npos) {
      return bad("not a device name");
    }
    const auto port = Number(fields[1]);
    if (!port || *port == 0 || *port > 255) return bad("port not in 1..255");
    const auto active = Number(fields[2]);
    const auto max = Number(fields[3]);
    if (!active || !max || !IsIbvMtu(*active) || !IsIbvMtu(*max)) {
      return bad("an MTU that is not 256, 512, 1024, 2048 or 4096");
    }
    if (!mtus.emplace(std::pair{std::string(device), *port}, PortMtu{*active, *max}).second) {
      return bad("the port is listed twice");
    }
  }
  return mtus;
}

PortMtus CapturedPortMtuQuerier::Query(const std::vector<RdmaDevice>& devices) const {
  capture::Session* session = capture::Active();
  if (session == nullptr) return live_->Query(devices);
  if (session->replaying()) return Replay(devices);
  PortMtus mtus = live_->Query(devices);
  session->writer()->File(kVerbsQueryPortFile, FormatPortMtus(mtus));
  return mtus;
}

PortMtus CapturedPortMtuQuerier::Replay(const std::vector<RdmaDevice>& devices) const {
  const capture::Session& session = *capture::Active();
  const auto text =
      session.reader()->ReadFile(session.sample(), kVerbsQueryPortFile, kMaxQueryPortText);
  // Absent: the capture did not record libibverbs (an older capture, or one put together by
  // hand): its devices are unknown to libibverbs, as on a host without a provider.
  if (!text && text.error() == ENOENT) return {};
  std::expected<PortMtus, std::string> parsed =
      text ? ParsePortMtus(*text) : std::unexpected(capture::ErrnoName(text.error()));
  if (!parsed) {
    if (!failure_logged_.exchange(true)) {
      log::Warn("capture's libibverbs port answers refused: no MTU series",
                {{"file", std::string(kVerbsQueryPortFile)}, {"err", parsed.error()}});
    }
    return {};
  }
  // What the live querier answers: the devices asked for only.
  std::set<std::string_view> wanted;
  for (const RdmaDevice& device : devices) wanted.insert(device.name);
  std::erase_if(*parsed, [&](const auto& entry) { return !wanted.contains(entry.first.first); });
  return std::move(*parsed);
}

}  // namespace rdmascope
