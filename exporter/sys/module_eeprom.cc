#include "sys/module_eeprom.h"

#include <algorithm>
#include <array>
#include <bit>
#include <bitset>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

#include "sys/module_speed.h"

namespace rdmascope::sys {
namespace {

// Units of the management interfaces' 16-bit readings (SFF-8472 table 9-11, SFF-8636 6.2.4,
// CMIS 8.2.5 and 8.9.4 agree): temperature signed 1/256 C, supply 100 uV, bias 2 uA, optical
// power 0.1 uW.
constexpr double kVoltsPerLsb = 100e-6;
constexpr double kAmperesPerLsb = 2e-6;
constexpr double kWattsPerLsb = 0.1e-6;

// One page as far as it was read: bytes 0..127 the lower page, 128..255 the upper half of the
// page in its bank; `known` marks the bytes read.
class Page {
 public:
  Page(const ModulePageReader& read, ModulePageKey key) : read_(read), key_(key) {}
  // Reads [offset, offset + length) (within one half); false when the reader has none.
  bool Fetch(size_t offset, size_t length) {
    if (length == 0 || offset + length > 256 || (offset < 128 && offset + length > 128)) {
      return false;
    }
    if (!read_(key_, static_cast<uint8_t>(offset), static_cast<uint8_t>(length),
               bytes_.data() + offset)) {
      return false;
    }
    for (size_t i = offset; i < offset + length; ++i) known_.set(i);
    return true;
  }
  uint8_t byte(size_t offset) const { return bytes_[offset]; }
  uint16_t u16(size_t offset) const {
    return static_cast<uint16_t>(byte(offset) << 8 | byte(offset + 1));
  }
  int16_t s16(size_t offset) const { return std::bit_cast<int16_t>(u16(offset)); }
  // An IEEE-754 single, most significant byte first (SFF-8472's calibration constants).
  float f32(size_t offset) const {
    const uint32_t bits = static_cast<uint32_t>(byte(offset)) << 24 |
                          static_cast<uint32_t>(byte(offset + 1)) << 16 |
                          static_cast<uint32_t>(byte(offset + 2)) << 8 | byte(offset + 3);
    return std::bit_cast<float>(bits);
  }
  // An ASCII field: printable bytes kept, others '?', trailing spaces and NULs trimmed.
  std::string text(size_t offset, size_t length) const {
    std::string out;
    for (size_t i = offset; i < offset + length; ++i) {
      const uint8_t c = byte(i);
      out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : c == 0 ? ' ' : '?');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }
  std::string oui(size_t offset) const {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "%02x:%02x:%02x", byte(offset), byte(offset + 1),
                  byte(offset + 2));
    return buffer;
  }

 private:
  const ModulePageReader& read_;
  ModulePageKey key_;
  std::array<uint8_t, 256> bytes_{};
  std::bitset<256> known_;
};

ModuleThresholds Thresholds(double high_alarm, double low_alarm, double high_warning,
                            double low_warning) {
  ModuleThresholds t{high_alarm, low_alarm, high_warning, low_warning, false};
  const bool all_zero = high_alarm == 0 && low_alarm == 0 && high_warning == 0 && low_warning == 0;
  const bool finite = std::isfinite(high_alarm) && std::isfinite(low_alarm) &&
                      std::isfinite(high_warning) && std::isfinite(low_warning);
  // An alarm inside its warning (or the bands crossed) is a table nobody can compare with.
  t.valid = !all_zero && finite && low_alarm <= low_warning && low_warning < high_warning &&
            high_warning <= high_alarm;
  return t;
}

// The four thresholds of one quantity stored as high alarm, low alarm, high warning, low
// warning (every map's order), each through `convert`.
template <typename Convert>
ModuleThresholds ThresholdsAt(const Page& page, size_t offset, Convert&& convert) {
  return Thresholds(convert(page, offset), convert(page, offset + 2), convert(page, offset + 4),
                    convert(page, offset + 6));
}

double Celsius(const Page& p, size_t at) { return p.s16(at) / 256.0; }
double Volts(const Page& p, size_t at) { return p.u16(at) * kVoltsPerLsb; }
double Amperes(const Page& p, size_t at) { return p.u16(at) * kAmperesPerLsb; }
double Watts(const Page& p, size_t at) { return p.u16(at) * kWattsPerLsb; }

std::optional<double> Finite(double value) {
  return std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
}

// ---- SFF-8472 (A0h identity at 0x50, A2h diagnostics at 0x51)

// External calibration (SFF-8472 section 9.3), constants in A2h 56..91.
struct ExternalCalibration {
  float rx_power[5];  // Rx_PWR(0) .. Rx_PWR(4)
  double bias_slope, bias_offset, tx_slope, tx_offset, t_slope, t_offset, v_slope, v_offset;

  explicit ExternalCalibration(const Page& a2) {
    for (int i = 0; i < 5; ++i) rx_power[i] = a2.f32(72 - 4 * i);  // Rx_PWR(4) at 56
    // Slopes: unsigned fixed point, integer byte then 1/256ths; offsets: signed 16-bit.
    const auto slope = [&a2](size_t at) { return a2.u16(at) / 256.0; };
    bias_slope = slope(76), bias_offset = a2.s16(78);
    tx_slope = slope(80), tx_offset = a2.s16(82);
    t_slope = slope(84), t_offset = a2.s16(86);
    v_slope = slope(88), v_offset = a2.s16(90);
  }
  // Rx_PWR(4) x^4 + Rx_PWR(3) x^3 + Rx_PWR(2) x^2 + Rx_PWR(1) x + Rx_PWR(0), in 0.1 uW.
  double RxPower(uint16_t raw) const {
    const double x = raw;
    double sum = 0;
    for (int i = 4; i >= 0; --i) sum = sum * x + rx_power[i];  // Horner: the same polynomial
    return sum;
  }
};

void DecodeSff8472(const ModulePageReader& read, Page& a0, ModuleReading& out) {
  out.standard = ModuleReading::Standard::kSff8472;
  // A0h 0..95: the serial ID, static; 92 (diagnostic monitoring type) and 94 (compliance) in it.
  if (!a0.Fetch(1, 95)) {
    out.problems.push_back("A0h bytes 1..95 (identity) not read");
    return;
  }
  out.vendor = a0.text(20, 16);
  out.oui = a0.oui(37);
  out.part_number = a0.text(40, 16);
  out.vendor_revision = a0.text(56, 4);
  out.serial = a0.text(68, 16);
  out.date_code = a0.text(84, 8);
  const uint8_t cable = a0.byte(8);  // SFP+ cable technology: bit 2 passive, bit 3 active
  if ((cable & 0x0c) != 0) {
    out.media = (cable & 0x04) != 0 ? "passive copper" : "active cable";
  } else {
    out.media = "optical";
    out.wavelength_nm = a0.u16(60);
  }
  out.revision = std::to_string(a0.byte(94));
  out.max_speed_mbps = Sff8472MaxSpeedMbps(a0.byte(12), a0.byte(66));
  const uint8_t dom = a0.byte(92);
  if ((dom & 0x40) == 0) {
    out.problems.push_back("no digital diagnostics (A0h byte 92 bit 6 clear)");
    return;
  }
  out.external_calibration = (dom & 0x10) != 0 && (dom & 0x20) == 0;
  out.rx_power_average = (dom & 0x08) != 0;
  // A2h: thresholds 0..39, calibration 56..91, monitors 96..105; not 110..117 (status, flags).
  Page a2(read, {0x51, 0, 0});
  if (!a2.Fetch(0, 40) || !a2.Fetch(96, 10) || (out.external_calibration && !a2.Fetch(56, 36))) {
    out.problems.push_back("A2h (I2C 0x51) not read: no diagnostics");
    return;
  }
  ModuleLane lane;
  if (!out.external_calibration) {
    out.temperature_celsius = Celsius(a2, 96);
    out.supply_volts = Volts(a2, 98);
    lane = {Amperes(a2, 100), Watts(a2, 102), Watts(a2, 104)};
    out.temperature_thresholds = ThresholdsAt(a2, 0, Celsius);
    out.supply_thresholds = ThresholdsAt(a2, 8, Volts);
    out.tx_bias_thresholds = ThresholdsAt(a2, 16, Amperes);
    out.tx_power_thresholds = ThresholdsAt(a2, 24, Watts);
    out.rx_power_thresholds = ThresholdsAt(a2, 32, Watts);
  } else {
    // Raw A/D readings, thresholds too: each through its quantity's conversion.
    const ExternalCalibration cal(a2);
    const auto t = [&cal](const Page& p, size_t at) {
      return (cal.t_slope * p.s16(at) + cal.t_offset) / 256.0;
    };
    const auto v = [&cal](const Page& p, size_t at) {
      return (cal.v_slope * p.u16(at) + cal.v_offset) * kVoltsPerLsb;
    };
    const auto bias = [&cal](const Page& p, size_t at) {
      return (cal.bias_slope * p.u16(at) + cal.bias_offset) * kAmperesPerLsb;
    };
    const auto tx = [&cal](const Page& p, size_t at) {
      return (cal.tx_slope * p.u16(at) + cal.tx_offset) * kWattsPerLsb;
    };
    const auto rx = [&cal](const Page& p, size_t at) {
      return cal.RxPower(p.u16(at)) * kWattsPerLsb;
    };
    out.temperature_celsius = t(a2, 96);
    out.supply_volts = v(a2, 98);
    lane = {bias(a2, 100), tx(a2, 102), Finite(rx(a2, 104))};
    if (!lane.rx_power_watts) out.problems.push_back("RX power calibration is not a number");
    out.temperature_thresholds = ThresholdsAt(a2, 0, t);
    out.supply_thresholds = ThresholdsAt(a2, 8, v);
    out.tx_bias_thresholds = ThresholdsAt(a2, 16, bias);
    out.tx_power_thresholds = ThresholdsAt(a2, 24, tx);
    out.rx_power_thresholds = ThresholdsAt(a2, 32, rx);
  }
  out.lanes.push_back(lane);
}

// ---- SFF-8636 (QSFP+, QSFP28)

// Byte 147's transmitter technology (upper nibble), SFF-8636 table 6-19.
const char* Sff8636Technology(uint8_t nibble) {
  static const char* const kNames[16] = {"850 nm VCSEL",
                                         "1310 nm VCSEL",
                                         "1550 nm VCSEL",
                                         "1310 nm FP",
                                         "1310 nm DFB",
                                         "1550 nm DFB",
                                         "1310 nm EML",
                                         "1550 nm EML",
                                         "other",
                                         "1490 nm DFB",
                                         "copper, unequalized",
                                         "copper, passive equalized",
                                         "copper, near and far end limiting active equalizers",
                                         "copper, far end limiting active equalizers",
                                         "copper, near end limiting active equalizers",
                                         "copper, linear active equalizers"};
  return kNames[nibble & 0x0f];
}

void DecodeSff8636(const ModulePageReader& read, Page& page0, ModuleReading& out) {
  out.standard = ModuleReading::Standard::kSff8636;
  // Lower page: 1..2 (revision, status), 22..23 temperature, 26..27 supply, 34..57 the lanes'
  // monitors; never 3..21 (latched interrupt flags).
  if (!page0.Fetch(1, 2) || !page0.Fetch(22, 6) || !page0.Fetch(34, 24)) {
    out.problems.push_back("lower page monitors not read");
    return;
  }
  out.revision = std::to_string(page0.byte(1));
  out.flat_memory = (page0.byte(2) & 0x04) != 0;
  out.temperature_celsius = Celsius(page0, 22);
  out.supply_volts = Volts(page0, 26);
  for (size_t lane = 0; lane < 4; ++lane) {
    out.lanes.push_back(
        {Amperes(page0, 42 + 2 * lane), Watts(page0, 50 + 2 * lane), Watts(page0, 34 + 2 * lane)});
  }
  if (page0.Fetch(128, 128)) {  // upper page 00h: static identity
    out.vendor = page0.text(148, 16);
    out.oui = page0.oui(165);
    out.part_number = page0.text(168, 16);
    out.vendor_revision = page0.text(184, 2);
    out.serial = page0.text(196, 16);
    out.date_code = page0.text(212, 8);
    const uint8_t technology = page0.byte(147) >> 4;
    out.media = Sff8636Technology(technology);
    if (technology < 0x0a) out.wavelength_nm = page0.u16(186) / 20.0;
    // Byte 220 bit 3: received power measured as average (1) or OMA (0).
    out.rx_power_average = (page0.byte(220) & 0x08) != 0;
    // Byte 131 Ethernet compliance, 192 its extension, 140 / 222 the lanes' nominal rate.
    out.max_speed_mbps =
        Sff8636MaxSpeedMbps(page0.byte(131), page0.byte(192), page0.byte(140), page0.byte(222));
  } else {
    out.problems.push_back("upper page 00h (identity) not read");
  }
  if (out.flat_memory) return;  // no page 03h: no thresholds to read
  Page page3(read, {0x50, 3, 0});
  if (!page3.Fetch(128, 72)) {  // 128..199: module, then lane thresholds
    out.problems.push_back("page 03h (thresholds) not read");
    return;
  }
  out.temperature_thresholds = ThresholdsAt(page3, 128, Celsius);
  out.supply_thresholds = ThresholdsAt(page3, 144, Volts);
  out.rx_power_thresholds = ThresholdsAt(page3, 176, Watts);
  out.tx_bias_thresholds = ThresholdsAt(page3, 184, Amperes);
  out.tx_power_thresholds = ThresholdsAt(page3, 192, Watts);
}

// ---- CMIS 4.0 / 5.x (QSFP-DD, OSFP, QSFP+ CMIS)

const char* CmisMedia(uint8_t type) {
  switch (type) {
    case 0x01:
      return "multimode fiber";
    case 0x02:
      return "single-mode fiber";
    case 0x03:
      return "passive copper";
    case 0x04:
      return "active cable";
    case 0x05:
      return "BASE-T";
    default:
      return "undefined";
  }
}

void DecodeCmis(const ModulePageReader& read, Page& page0, ModuleReading& out) {
  out.standard = ModuleReading::Standard::kCmis;
  // Lower page: 1..3 (revision, memory model, module state), 14..17 temperature and supply,
  // 39..41 active firmware and fault cause, 85..117 media type and the eight application
  // descriptors of the lower page; never 8..13 (latched module flags).
  if (!page0.Fetch(1, 3) || !page0.Fetch(14, 4) || !page0.Fetch(39, 3) || !page0.Fetch(85, 33)) {
    out.problems.push_back("lower page not read");
    return;
  }
  out.revision = std::to_string(page0.byte(1) >> 4) + "." + std::to_string(page0.byte(1) & 0x0f);
  out.flat_memory = (page0.byte(2) & 0x80) != 0;
  out.cmis_module_state = (page0.byte(3) >> 1) & 0x07;
  out.temperature_celsius = Celsius(page0, 14);
  out.supply_volts = Volts(page0, 16);
  out.firmware = std::to_string(page0.byte(39)) + "." + std::to_string(page0.byte(40));
  out.cmis_fault_cause = page0.byte(41);
  out.media = CmisMedia(page0.byte(85));
  // The default application (the first descriptor, bytes 86..89): its media lane count (byte
  // 88, low nibble) is how many lanes carry light; the others read 0, which is no signal to
  // alert on.
  const uint8_t media_lanes = page0.byte(88) & 0x0f;
  std::array<uint8_t, 32> descriptors{};
  for (size_t i = 0; i < descriptors.size(); ++i) descriptors[i] = page0.byte(86 + i);
  out.max_speed_mbps = CmisMaxSpeedMbps(descriptors);
  if (page0.Fetch(128, 128)) {  // upper page 00h: static identity
    out.vendor = page0.text(129, 16);
    out.oui = page0.oui(145);
    out.part_number = page0.text(148, 16);
    out.vendor_revision = page0.text(164, 2);
    out.serial = page0.text(166, 16);
    out.date_code = page0.text(182, 8);
  } else {
    out.problems.push_back("upper page 00h (identity) not read");
  }
  // Pages 01h, 02h and 11h exist only on paged memory (passive copper is flat).
  if (out.flat_memory) return;
  Page page1(read, {0x50, 1, 0});
  if (!page1.Fetch(128, 128)) {  // advertisements, static
    out.problems.push_back("page 01h (advertisements) not read: no lane monitors");
    return;
  }
  if (page0.byte(85) == 0x01 || page0.byte(85) == 0x02) {
    out.wavelength_nm = page1.u16(138) * 0.05;
  }
  out.rx_power_average = (page1.byte(151) & 0x10) != 0;
  const uint8_t monitors = page1.byte(160);
  const bool bias_monitor = (monitors & 0x01) != 0, tx_monitor = (monitors & 0x02) != 0,
             rx_monitor = (monitors & 0x04) != 0;
  // TxBiasCurrentScalingFactor: 0 -> x1, 1 -> x2, 2 -> x4 (3 reserved: not decoded).
  const uint8_t scale = (monitors >> 3) & 0x03;
  const double bias_factor = scale == 0 ? 1 : scale == 1 ? 2 : scale == 2 ? 4 : NAN;
  if (bias_monitor && std::isnan(bias_factor)) {
    out.problems.push_back("TX bias scaling factor 3 is reserved: bias not decoded");
  }
  const auto bias = [bias_factor](const Page& p, size_t at) {
    return Amperes(p, at) * bias_factor;
  };
  // Banks: page 01h byte 142 bits 1-0 (0: bank 0, 1: banks 0-1, 2: banks 0-3).
  const uint8_t bank_code = page1.byte(142) & 0x03;
  const int banks = bank_code == 0 ? 1 : bank_code == 1 ? 2 : bank_code == 2 ? 4 : 1;
  const int lanes = media_lanes >= 1 && media_lanes <= 8 && banks == 1 ? media_lanes : 8 * banks;
  for (int bank = 0; bank < banks; ++bank) {
    // Page 11h 154..201: TX power, TX bias and RX power of lanes 1..8; not 134..153 (latched
    // lane flags).
    Page page11(read, {0x50, 0x11, static_cast<uint8_t>(bank)});
    const bool read_bank = page11.Fetch(154, 48);
    const int in_bank = std::min(8, lanes - 8 * bank);
    for (int i = 0; i < in_bank; ++i) {
      ModuleLane lane;
      if (read_bank) {
        if (bias_monitor) lane.tx_bias_amperes = Finite(bias(page11, 170 + 2 * i));
        if (tx_monitor) lane.tx_power_watts = Watts(page11, 154 + 2 * i);
        if (rx_monitor) lane.rx_power_watts = Watts(page11, 186 + 2 * i);
      }
      out.lanes.push_back(lane);
    }
    if (!read_bank) {
      out.problems.push_back("page 11h of bank " + std::to_string(bank) +
                             " (lane monitors) not read");
    }
  }
  Page page2(read, {0x50, 2, 0});
  if (!page2.Fetch(128, 72)) {  // 128..199: module, then lane thresholds
    out.problems.push_back("page 02h (thresholds) not read");
    return;
  }
  out.temperature_thresholds = ThresholdsAt(page2, 128, Celsius);
  out.supply_thresholds = ThresholdsAt(page2, 136, Volts);
  out.tx_power_thresholds = ThresholdsAt(page2, 176, Watts);
  if (!std::isnan(bias_factor)) out.tx_bias_thresholds = ThresholdsAt(page2, 184, bias);
  out.rx_power_thresholds = ThresholdsAt(page2, 192, Watts);
}

}  // namespace

ModuleReading DecodeModule(const ModulePageReader& read) {
  ModuleReading out;
  Page page0(read, {0x50, 0, 0});
  if (!page0.Fetch(0, 1)) {
    out.problems.push_back("byte 0 not read: no module, or the driver gives no access");
    return out;
  }
  out.identifier = page0.byte(0);
  switch (out.identifier) {
    case 0x03:  // SFP/SFP+/SFP28 (SFF-8472)
      DecodeSff8472(read, page0, out);
      break;
    case 0x0c:  // QSFP
    case 0x0d:  // QSFP+
    case 0x11:  // QSFP28
      DecodeSff8636(read, page0, out);
      break;
    case 0x18:  // QSFP-DD
    case 0x19:  // OSFP
    case 0x1e:  // QSFP+ or later with CMIS
      DecodeCmis(read, page0, out);
      break;
    default:
      out.problems.push_back("identifier " + std::to_string(out.identifier) +
                             " (SFF-8024) is not a memory map this decoder knows");
  }
  return out;
}

std::optional<double> WattsToDbm(double watts) {
  if (!(watts > 0) || !std::isfinite(watts)) return std::nullopt;
  return 10 * std::log10(watts * 1000);
}

const char* StandardName(ModuleReading::Standard standard) {
  switch (standard) {
    case ModuleReading::Standard::kSff8472:
      return "SFF-8472";
    case ModuleReading::Standard::kSff8636:
      return "SFF-8636";
    case ModuleReading::Standard::kCmis:
      return "CMIS";
    default:
      return "unknown";
  }
}

}  // namespace rdmascope::sys
