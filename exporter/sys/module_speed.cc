#include "sys/module_speed.h"

#include <algorithm>
#include <cmath>

namespace rdmascope::sys {
namespace {

constexpr uint32_t kG = 1000;  // Mb/s per Gb/s

// SFF-8636 byte 192's extended codes (SFF-8024 Table 4-4; ethtool's qsfp.h names them), each
// read as a four-lane QSFP: "100GBASE-SR4 or 25GBASE-SR" is 100G, "50GBASE-CR, 100GBASE-CR2,
// or 200GBASE-CR4" 200G. Codes of one lane whatever the form factor (50GBASE-LR 0x45,
// "100GBASE-SR1, 200GBASE-SR2 or 400GBASE-SR4" 0x29), BASE-T and Fibre Channel are left out.
std::optional<uint32_t> ExtendedComplianceSpeedMbps(uint8_t code) {
  switch (code) {
    case 0x10:  // 40GBASE-ER4
    case 0x11:  // 4 x 10GBASE-SR
    case 0x12:  // 40G PSM4
    case 0x1f:  // 40G SWDM4
      return 40 * kG;
    case 0x01:  // 100G AOC or 25GAUI C2M AOC
    case 0x02:  // 100GBASE-SR4 or 25GBASE-SR
    case 0x03:  // 100GBASE-LR4 or 25GBASE-LR
    case 0x04:  // 100GBASE-ER4 or 25GBASE-ER
    case 0x05:  // 100GBASE-SR10
    case 0x06:  // 100G CWDM4
    case 0x07:  // 100G PSM4
    case 0x08:  // 100G ACC or 25GAUI C2M ACC
    case 0x0b:  // 100GBASE-CR4, 25GBASE-CR CA-25G-L or 50GBASE-CR2 with RS
    case 0x0c:  // 25GBASE-CR CA-25G-S or 50GBASE-CR2 with BASE-R
    case 0x0d:  // 25GBASE-CR CA-25G-N or 50GBASE-CR2 with no FEC
    case 0x17:  // 100G CLR4
    case 0x18:  // 100G AOC or 25GAUI C2M AOC, BER 1e-12
    case 0x19:  // 100G ACC or 25GAUI C2M ACC, BER 1e-12
    case 0x1a:  // 100GE-DWDM2
    case 0x1b:  // 100G 1550 nm WDM
    case 0x20:  // 100G SWDM4
    case 0x21:  // 100G PAM4 BiDi
    case 0x22:  // 4WDM-10
    case 0x23:  // 4WDM-20
    case 0x24:  // 4WDM-40
    case 0x25:  // 100GBASE-DR
    case 0x26:  // 100G-FR or 100GBASE-FR1
    case 0x27:  // 100G-LR or 100GBASE-LR1
    case 0x28:  // 100G-SR1
    case 0x2a:  // 100GBASE-FR1
    case 0x2b:  // 100GBASE-LR1
      return 100 * kG;
    case 0x30:  // ACC with 50GAUI, 100GAUI-2 or 200GAUI-4 C2M, BER 1e-6
    case 0x31:  // AOC, the same
    case 0x32:  // ACC, BER 2.6e-4
    case 0x33:  // AOC, BER 2.6e-4
    case 0x40:  // 50GBASE-CR, 100GBASE-CR2 or 200GBASE-CR4
    case 0x41:  // 50GBASE-SR, 100GBASE-SR2 or 200GBASE-SR4
    case 0x42:  // 50GBASE-FR or 200GBASE-DR4
    case 0x43:  // 200GBASE-FR4
    case 0x44:  // 200G 1550 nm PSM4
    case 0x46:  // 200GBASE-LR4
      return 200 * kG;
    case 0x3f:  // 100GBASE-CR1, 200GBASE-CR2 or 400GBASE-CR4
    case 0x47:  // 400GBASE-DR4, 100GAUI-1 C2M
    case 0x48:  // 400GBASE-FR4
    case 0x49:  // 400GBASE-LR4-6
      return 400 * kG;
    default:
      return std::nullopt;
  }
}

// One NRZ lane's Ethernet speed from a nominal signalling rate given in units of `unit_gbd`:
// the rate must lie within one unit of the lane's baud.
std::optional<uint32_t> NrzLaneSpeedMbps(double rate_gbd, double unit_gbd) {
  struct Lane {
    double baud_gbd;
    uint32_t speed_mbps;
  };
  static constexpr Lane kLanes[] = {
      {1.25, 1 * kG},       // 1000BASE-X, 8b/10b
      {10.3125, 10 * kG},   // 10GBASE-R, 64b/66b
      {25.78125, 25 * kG},  // 25GBASE-R
  };
  for (const Lane& lane : kLanes) {
    if (std::abs(rate_gbd - lane.baud_gbd) <= unit_gbd) return lane.speed_mbps;
  }
  return std::nullopt;
}

// Byte `rate_100mbd` (units of 100 MBd), or, when it is FFh, `rate_250mbd` (units of 250 MBd):
// SFF-8636 bytes 140/222 and SFF-8472 bytes 12/66 alike.
std::optional<uint32_t> NominalLaneSpeedMbps(uint8_t rate_100mbd, uint8_t rate_250mbd) {
  if (rate_100mbd == 0) return std::nullopt;  // not specified
  if (rate_100mbd != 0xff) return NrzLaneSpeedMbps(rate_100mbd * 0.1, 0.1);
  if (rate_250mbd == 0) return std::nullopt;
  return NrzLaneSpeedMbps(rate_250mbd * 0.25, 0.25);
}

}  // namespace

std::optional<uint32_t> HostInterfaceSpeedMbps(uint8_t id) {
  switch (id) {
    case 0x01:  // 1000BASE-CX
    case 0x1e:  // 1000BASE-T
      return 1 * kG;
    case 0x1f:  // 2.5GBASE-T
      return 2500;
    case 0x20:  // 5GBASE-T
      return 5 * kG;
    case 0x02:  // XAUI
    case 0x03:  // XFI
    case 0x04:  // SFI
    case 0x13:  // 10GBASE-CX4
    case 0x21:  // 10GBASE-T
      return 10 * kG;
    case 0x05:  // 25GAUI C2M
    case 0x14:  // 25GBASE-CR CA-L
    case 0x15:  // 25GBASE-CR CA-S
    case 0x16:  // 25GBASE-CR CA-N
    case 0x22:  // 25GBASE-T
      return 25 * kG;
    case 0x06:  // XLAUI C2M
    case 0x07:  // XLPPI
    case 0x17:  // 40GBASE-CR4
    case 0x23:  // 40GBASE-T
      return 40 * kG;
    case 0x08:  // LAUI-2 C2M
    case 0x09:  // 50GAUI-2 C2M
    case 0x0a:  // 50GAUI-1 C2M
    case 0x18:  // 50GBASE-CR
    case 0x24:  // 50GBASE-T
    case 0x43:  // 50GBASE-CR2 with RS(528,514)
    case 0x44:  // 50GBASE-CR2 with BASE-R
    case 0x45:  // 50GBASE-CR2 without FEC
      return 50 * kG;
    case 0x0b:  // CAUI-4 C2M
    case 0x0c:  // 100GAUI-4 C2M
    case 0x0d:  // 100GAUI-2 C2M
    case 0x19:  // 100GBASE-CR10
    case 0x1a:  // 100GBASE-CR4
    case 0x1b:  // 100GBASE-CR2
    case 0x41:  // CAUI-4 C2M without FEC
    case 0x42:  // CAUI-4 C2M with RS(528,514)
    case 0x46:  // 100GBASE-CR1
    case 0x4b:  // 100GAUI-1-S C2M
    case 0x4c:  // 100GAUI-1-L C2M
      return 100 * kG;
    case 0x0e:  // 200GAUI-8 C2M
    case 0x0f:  // 200GAUI-4 C2M
    case 0x1c:  // 200GBASE-CR4
    case 0x47:  // 200GBASE-CR2
    case 0x4d:  // 200GAUI-2-S C2M
    case 0x4e:  // 200GAUI-2-L C2M
    case 0x80:  // 200GAUI-1 C2M
      return 200 * kG;
    case 0x10:  // 400GAUI-16 C2M
    case 0x11:  // 400GAUI-8 C2M
    case 0x1d:  // 400G CR8
    case 0x48:  // 400GBASE-CR4
    case 0x4f:  // 400GAUI-4-S C2M
    case 0x50:  // 400GAUI-4-L C2M
    case 0x81:  // 400GAUI-2 C2M
      return 400 * kG;
    case 0x49:  // 800G-ETC-CR8 or 800GBASE-CR8
    case 0x51:  // 800GAUI-8 S C2M
    case 0x52:  // 800GAUI-8 L C2M
    case 0x57:  // 800GBASE-CR4
    case 0x82:  // 800GAUI-4 C2M
      return 800 * kG;
    case 0x55:  // 1.6TAUI-16-S C2M
    case 0x56:  // 1.6TAUI-16-L C2M
    case 0x58:  // 1.6TBASE-CR8
    case 0x83:  // 1.6TAUI-8 C2M
      return 1600 * kG;
    default:  // 0x00 undefined; Fibre Channel, InfiniBand, CPRI, OTN, PCIe, unknown
      return std::nullopt;
  }
}

std::optional<uint32_t> CmisMaxSpeedMbps(std::span<const uint8_t> descriptors) {
  std::optional<uint32_t> best;
  for (size_t at = 0; at + 4 <= descriptors.size(); at += 4) {
    const uint8_t host = descriptors[at];
    if (host == 0xff) break;  // CMIS: the first unused descriptor ends the list
    if (const auto speed = HostInterfaceSpeedMbps(host)) best = std::max(best.value_or(0), *speed);
  }
  return best;
}

std::optional<uint32_t> Sff8636MaxSpeedMbps(uint8_t compliance, uint8_t extended_compliance,
                                            uint8_t nominal_rate_100mbd,
                                            uint8_t nominal_rate_250mbd) {
  std::optional<uint32_t> best;
  const auto take = [&best](uint32_t speed) { best = std::max(best.value_or(0), speed); };
  if ((compliance & 0x0f) != 0) take(40 * kG);  // 40GBASE-CR4, -SR4, -LR4, XLPPI
  if ((compliance & 0x70) != 0) take(10 * kG);  // 10GBASE-LRM, -LR, -SR
  if ((compliance & 0x80) != 0) {
    if (const auto speed = ExtendedComplianceSpeedMbps(extended_compliance)) take(*speed);
  }
  if (best) return best;
  // No code this table knows: the lanes' nominal rate, 4 lanes of 10G or 25G NRZ.
  const auto lane = NominalLaneSpeedMbps(nominal_rate_100mbd, nominal_rate_250mbd);
  if (lane && *lane >= 10 * kG) return 4 * *lane;
  return std::nullopt;
}

std::optional<uint32_t> Sff8472MaxSpeedMbps(uint8_t nominal_rate_100mbd,
                                            uint8_t nominal_rate_250mbd) {
  return NominalLaneSpeedMbps(nominal_rate_100mbd, nominal_rate_250mbd);
}

}  // namespace rdmascope::sys
