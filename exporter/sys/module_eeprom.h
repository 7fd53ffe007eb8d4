// What a pluggable module (SFP, QSFP, QSFP-DD, OSFP) says about itself and its lanes, decoded
// from the raw pages of its management interface (issue 40: optics per module and lane): the
// kernel's ETHTOOL_MSG_MODULE_EEPROM_GET hands out 128-byte halves of pages by I2C address,
// page and bank, and `ethtool -m IF raw on` prints the same bytes. Three memory maps:
// - SFF-8472 (SFP, SFP+: identifier 0x03): A0h (I2C 0x50) identity, A2h (0x51) diagnostics,
//   internally or externally calibrated. External calibration as SFF-8472 section 9.3 defines
//   it: RX power the 4th-degree polynomial of the raw reading, Rx_PWR(4) x^4 + ... +
//   Rx_PWR(0), coefficients IEEE-754 big-endian at A2h 56..75 (ethtool's sfpdiag.c sums
//   Rx_PWR(1..3) x without powers and drops Rx_PWR(4)); bias, TX power, temperature and supply
//   as slope (unsigned 8.8 fixed point) x raw + offset (signed); thresholds through the same
//   conversion as the value they bound.
// - SFF-8636 (QSFP+, QSFP28: 0x0C, 0x0D, 0x11): lower page monitors, upper page 00h identity,
//   page 03h thresholds (absent on flat memory: byte 2 bit 2).
// - CMIS 4.0/5.x (QSFP-DD 0x18, OSFP 0x19, QSFP+ CMIS 0x1E): lower page state and monitors, page
//   01h advertisements (banks, monitors, TxBiasCurrentScalingFactor x1/x2/x4 in byte 160 bits
//   4-3: the bias LSB is 2 uA times that factor, so the raw reading is multiplied; ethtool's
//   cmis.c shifts it right, dividing), page 02h thresholds, page 11h of each bank the lanes'
//   monitors (8 lanes per bank; as many as the default application's media lanes are read).
// Latched flags (clear-on-read: SFF-8636 lower page bytes 3-21, CMIS lower page 8-13 and page
// 11h 134-153; SFF-8472's A2h 110-117 alike) are never read, not even inside a larger read:
// they belong to the NIC firmware and other agents; values are compared with thresholds
// instead. Every page is hostile input: any bytes decode to a reading, with what
// was not there or made no sense left out (nullopt) and said in `problems`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace rdmascope::sys {

// Where a read goes, as MODULE_EEPROM_GET addresses it: bytes 0..127 are the lower page (the
// same whatever the page), 128..255 the upper half of `page` in `bank`. SFF-8472's A2h is I2C
// address 0x51, everything else 0x50.
struct ModulePageKey {
  uint8_t i2c_address = 0x50;
  uint8_t page = 0;
  uint8_t bank = 0;
  auto operator<=>(const ModulePageKey&) const = default;
};
// Reads `length` bytes at `offset` (0..255, never across 127/128) of `key`'s page into `out`;
// false when the module, the kernel or a capture has none. The decoder asks only for the
// ranges it decodes: never a latched flag byte (clear-on-read).
using ModulePageReader =
    std::function<bool(const ModulePageKey& key, uint8_t offset, uint8_t length, uint8_t* out)>;

// A quantity's four thresholds as the module states them (same unit as the value), and whether
// they make sense: not all zero, low alarm <= low warning < high warning <= high alarm.
struct ModuleThresholds {
  double high_alarm = 0, low_alarm = 0, high_warning = 0, low_warning = 0;
  bool valid = false;
};

struct ModuleLane {
  std::optional<double> tx_bias_amperes;
  std::optional<double> tx_power_watts;
  std::optional<double> rx_power_watts;
};

struct ModuleReading {
  enum class Standard { kUnknown, kSff8472, kSff8636, kCmis };
  Standard standard = Standard::kUnknown;
  uint8_t identifier = 0;  // SFF-8024 byte 0
  std::string revision;    // CMIS "5.0", SFF-8636 revision compliance byte, SFF-8472 compliance
  // Identity (ASCII fields trimmed, non-printable bytes replaced by '?').
  std::string vendor, part_number, serial, vendor_revision, date_code;
  std::string oui;    // "00:02:c9"
  std::string media;  // CMIS module media type, SFF-8636/8472 transmitter technology
  std::optional<double> wavelength_nm;
  std::string firmware;  // CMIS active firmware "major.minor"; empty elsewhere
  bool flat_memory = false;
  bool external_calibration = false;  // SFF-8472 only
  bool rx_power_average = true;       // false: OMA (optical modulation amplitude)
  // CMIS: module state (1 low power, 2 powering up, 3 ready, 4 powering down, 5 fault) and the
  // fault cause byte (0 none, 1 TEC runaway, 2 data memory, 3 program memory).
  std::optional<uint8_t> cmis_module_state;
  std::optional<uint8_t> cmis_fault_cause;
  std::optional<double> temperature_celsius;
  std::optional<double> supply_volts;
  std::vector<ModuleLane> lanes;
  std::optional<ModuleThresholds> temperature_thresholds, supply_thresholds, tx_bias_thresholds,
      tx_power_thresholds, rx_power_thresholds;
  // The fastest Ethernet speed the module advertises, Mb/s (sys/module_speed.h: CMIS
  // applications, SFF-8636 compliance codes or nominal rate, SFF-8472 nominal rate); none when
  // it advertises nothing decodable.
  std::optional<uint32_t> max_speed_mbps;
  std::vector<std::string> problems;  // what could not be read or made no sense
};

// The module behind `read`: byte 0 first (the identifier says the memory map), then the ranges
// that map and the module's advertisements call for; a range `read` does not have leaves what
// it holds out, and says so in `problems`.
ModuleReading DecodeModule(const ModulePageReader& read);

// Watts -> dBm (10 log10(mW)); nullopt for 0 or less (no light is not a number of dBm).
std::optional<double> WattsToDbm(double watts);

// "SFF-8472", "SFF-8636", "CMIS" or "unknown".
const char* StandardName(ModuleReading::Standard standard);

}  // namespace rdmascope::sys
