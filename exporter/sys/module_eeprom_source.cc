#include "sys/module_eeprom_source.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/capture.h"
#include "core/redact.h"

namespace rdmascope::sys {
namespace {

// A half page file is 128 bytes; one byte more tells a longer file apart.
constexpr size_t kHalfBytes = 128;

// Where the vendor serial number lies (16 ASCII bytes): by the identifier in byte 0, in the
// lower half of A0h (SFF-8472) or the upper half of page 00h (SFF-8636, CMIS).
struct SerialField {
  bool upper;
  size_t offset;
};
std::optional<SerialField> SerialOf(uint8_t identifier) {
  switch (identifier) {
    case 0x03:
      return SerialField{false, 68};
    case 0x0c:
    case 0x0d:
    case 0x11:
      return SerialField{true, 196 - 128};
    case 0x18:
    case 0x19:
    case 0x1e:
      return SerialField{true, 166 - 128};
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> ModuleHalfPath(std::string_view ifname, const ModulePageKey& key,
                                          bool upper) {
  if (ifname.empty() || ifname == "." || ifname == ".." || ifname.size() > 15 ||
      ifname.find_first_of(std::string_view("/\0", 2)) != std::string_view::npos) {
    return std::nullopt;
  }
  char leaf[64];
  std::snprintf(leaf, sizeof leaf, "i2c-0x%02x.page-0x%02x.bank-%u.%s", key.i2c_address, key.page,
                static_cast<unsigned>(key.bank), upper ? "upper" : "lower");
  return "ethtool/" + std::string(ifname) + "/module/" + leaf;
}

ModuleEepromSource::ModuleEepromSource(std::string ifname, LiveRead live)
    : ifname_(std::move(ifname)), live_(std::move(live)) {}

ModulePageReader ModuleEepromSource::Reader() {
  return [this](const ModulePageKey& key, uint8_t offset, uint8_t length, uint8_t* out) {
    const capture::Session* session = capture::Active();
    const bool ok = session != nullptr && session->replaying() ? Replay(key, offset, length, out)
                                                               : Read(key, offset, length, out);
    return ok;
  };
}

bool ModuleEepromSource::Read(const ModulePageKey& key, uint8_t offset, uint8_t length,
                              uint8_t* out) {
  const auto bytes = live_(key, offset, length);
  if (first_error_ == 0 && !bytes) first_error_ = bytes.error();
  const capture::Session* session = capture::Active();
  if (session != nullptr && session->writer() != nullptr) {
    // The lower half is one whatever the page: keyed as page 0, as the kernel reads it.
    const bool upper = offset >= kHalfBytes;
    const ModulePageKey where = upper ? key : ModulePageKey{key.i2c_address, 0, 0};
    Half& half = halves_[{where, upper}];
    if (bytes) {
      std::memcpy(half.bytes.data() + (offset % kHalfBytes), bytes->data(), length);
      half.read = true;
    } else if (half.error == 0) {
      half.error = bytes.error();
    }
  }
  if (!bytes) return false;
  std::memcpy(out, bytes->data(), length);
  return true;
}

bool ModuleEepromSource::Replay(const ModulePageKey& key, uint8_t offset, uint8_t length,
                                uint8_t* out) {
  const bool upper = offset >= kHalfBytes;
  const ModulePageKey where = upper ? key : ModulePageKey{key.i2c_address, 0, 0};
  auto [it, inserted] = halves_.try_emplace({where, upper});
  Half& half = it->second;
  if (inserted) {
    const capture::Session& session = *capture::Active();
    const auto path = ModuleHalfPath(ifname_, where, upper);
    const auto bytes = path ? session.reader()->ReadFile(session.sample(), *path, kHalfBytes + 1)
                            : std::expected<std::string, int>(std::unexpected(EINVAL));
    if (bytes && bytes->size() == kHalfBytes) {
      half.bytes = *bytes;
      half.read = true;
    } else {
      // A half of another size is not a page: refused, never padded.
      half.error = bytes ? EINVAL : bytes.error();
    }
  }
  if (!half.read) {
    if (first_error_ == 0) first_error_ = half.error;
    return false;
  }
  if (offset % kHalfBytes + length > kHalfBytes) return false;
  std::memcpy(out, half.bytes.data() + offset % kHalfBytes, length);
  return true;
}

ModuleEepromSource::~ModuleEepromSource() {
  const capture::Session* session = capture::Active();
  if (session == nullptr || session->writer() == nullptr || halves_.empty()) return;
  capture::Writer& writer = *session->writer();
  // --redact: the serial number, in whichever half the identifier puts it.
  std::optional<SerialField> serial;
  if (const auto lower = halves_.find({ModulePageKey{0x50, 0, 0}, false});
      lower != halves_.end() && lower->second.read) {
    serial = SerialOf(static_cast<uint8_t>(lower->second.bytes[0]));
  }
  for (auto& [where, half] : halves_) {
    const auto path = ModuleHalfPath(ifname_, where.first, where.second);
    if (!path) continue;
    if (!half.read) {
      writer.Errno(*path, half.error);
      continue;
    }
    if (writer.redactor() != nullptr && serial && where.first.i2c_address == 0x50 &&
        where.first.page == 0 && where.second == serial->upper) {
      std::string hashed = writer.redactor()->Serial(half.bytes.substr(serial->offset, 16));
      hashed.resize(16, ' ');  // the field's width, whatever the hash gave
      half.bytes.replace(serial->offset, 16, hashed);
    }
    writer.File(*path, half.bytes);
  }
}

}  // namespace rdmascope::sys
