// sys/module_eeprom: pages written byte by byte as each spec lays them out, every decoded field
// checked against a value worked by hand in the comment beside it; the reads asked of the
// module checked too: never a latched flag byte.
#include "sys/module_eeprom.h"

#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/capture.h"
#include "core/redact.h"
#include "sys/ethtool_netlink.h"
#include "sys/module_eeprom_source.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"
#include "unit/module_eeprom_fixtures.h"

namespace rdmascope::sys {
namespace {

using testing::FakeModule;
using testing::InternallyCalibratedSfp;
using testing::Qsfp28;
using testing::QsfpDd;

constexpr double kTolerance = 1e-12;

// ---- SFF-8472

TEST(ModuleEeprom, Sff8472InternalCalibration) {
  FakeModule m = InternallyCalibratedSfp();
  const ModuleReading r = DecodeModule(m.Reader());
  EXPECT_EQ(r.standard, ModuleReading::Standard::kSff8472);
  EXPECT_EQ(r.vendor, "ACME OPTICS");
  EXPECT_EQ(r.oui, "00:90:65");
  EXPECT_EQ(r.part_number, "SFP-10G-SR");
  EXPECT_EQ(r.vendor_revision, "A");
  EXPECT_EQ(r.serial, "SN12345");
  EXPECT_EQ(r.date_code, "261206");
  EXPECT_EQ(r.media, "optical");
  EXPECT_EQ(r.wavelength_nm, 850);
  EXPECT_EQ(r.revision, "8");
  EXPECT_FALSE(r.external_calibration);
  EXPECT_TRUE(r.rx_power_average);
  EXPECT_EQ(r.temperature_celsius, 25.5);
  EXPECT_NEAR(*r.supply_volts, 3.3, kTolerance);
  ASSERT_EQ(r.lanes.size(), 1U);
  EXPECT_NEAR(*r.lanes[0].tx_bias_amperes, 0.012, kTolerance);
  EXPECT_NEAR(*r.lanes[0].tx_power_watts, 1e-3, kTolerance);
  EXPECT_NEAR(*r.lanes[0].rx_power_watts, 0.4e-3, kTolerance);
  // 10 log10(0.4 mW) = -3.9794 dBm; 1 mW = 0 dBm.
  EXPECT_NEAR(*WattsToDbm(*r.lanes[0].rx_power_watts), -3.979400087, 1e-9);
  EXPECT_NEAR(*WattsToDbm(1e-3), 0, kTolerance);
  EXPECT_FALSE(WattsToDbm(0));
  ASSERT_TRUE(r.temperature_thresholds);
  EXPECT_EQ(r.temperature_thresholds->high_alarm, 75);
  EXPECT_EQ(r.temperature_thresholds->low_alarm, -5);
  EXPECT_EQ(r.temperature_thresholds->high_warning, 70);
  EXPECT_EQ(r.temperature_thresholds->low_warning, 0);
  EXPECT_TRUE(r.temperature_thresholds->valid);
  ASSERT_TRUE(r.rx_power_thresholds);
  EXPECT_NEAR(r.rx_power_thresholds->high_alarm, 2e-3, kTolerance);
  EXPECT_NEAR(r.rx_power_thresholds->low_alarm, 10e-6, kTolerance);
  EXPECT_NEAR(r.rx_power_thresholds->high_warning, 1e-3, kTolerance);
  EXPECT_NEAR(r.rx_power_thresholds->low_warning, 20e-6, kTolerance);
  EXPECT_TRUE(r.rx_power_thresholds->valid);
  EXPECT_FALSE(r.supply_thresholds->valid);  // all zero
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
  EXPECT_FALSE(m.Touched(0x51, 0, 110, 117)) << "A2h status and flags were read";
}

// External calibration (A0h byte 92 = 0x58: diagnostics, external, average). The RX power
// coefficients are powers of two, exact in binary: Rx_PWR(4) = 2^-40, (3) = 2^-30, (2) = 2^-10,
// (1) = 2, (0) = 10. For a reading x = 1024 = 2^10 the polynomial is 2^-40 2^40 + 2^-30 2^30 +
// 2^-10 2^20 + 2 x 1024 + 10 = 1 + 1 + 1024 + 2048 + 10 = 3084 x 0.1 uW = 308.4 uW. ethtool's
// sfpdiag.c (10 + x (2 + 2^-10 + 2^-30), no Rx_PWR(4)) would say 2059, 205.9 uW.
TEST(ModuleEeprom, Sff8472ExternalCalibrationAsSection93DefinesIt) {
  FakeModule m = InternallyCalibratedSfp();
  m.Put(0x50, 0, 92, {0x58});
  m.Put(0x51, 0, 56, {0x2B, 0x80, 0x00, 0x00,    // Rx_PWR(4) = 2^-40
                      0x30, 0x80, 0x00, 0x00,    // Rx_PWR(3) = 2^-30
                      0x3A, 0x80, 0x00, 0x00,    // Rx_PWR(2) = 2^-10
                      0x40, 0x00, 0x00, 0x00,    // Rx_PWR(1) = 2
                      0x41, 0x20, 0x00, 0x00,    // Rx_PWR(0) = 10
                      0x02, 0x00, 0x00, 0x00,    // Tx_I slope 2.0, offset 0
                      0x00, 0x80, 0x03, 0xE8,    // Tx_PWR slope 0.5, offset 1000
                      0x01, 0x80, 0xFF, 0x00,    // T slope 1.5, offset -256
                      0x01, 0x00, 0x00, 0x64});  // V slope 1.0, offset 100
  // Raw readings: T 0x1000 = 4096 -> (1.5 x 4096 - 256) / 256 = 23 C; V 32900 -> 33000 x 100 uV
  // = 3.3 V; bias 3000 -> 6000 x 2 uA = 12 mA; TX 18000 -> 9000 + 1000 = 10000 x 0.1 uW = 1 mW;
  // RX 1024 -> 308.4 uW (above).
  m.Put(0x51, 0, 96, {0x10, 0x00, 0x80, 0x84, 0x0B, 0xB8, 0x46, 0x50, 0x04, 0x00});
  // RX thresholds, raw: high alarm 2048 = 2^11 -> 16 + 8 + 4096 + 4096 + 10 = 8226 (822.6 uW);
  // low alarm 0 -> 10 (1 uW); high warning 1024 -> 3084 (308.4 uW); low warning 512 -> 2^-4 +
  // 2^-3 + 256 + 1024 + 10 = 1290.1875 (129.01875 uW).
  m.Put(0x51, 0, 32, {0x08, 0x00, 0x00, 0x00, 0x04, 0x00, 0x02, 0x00});
  const ModuleReading r = DecodeModule(m.Reader());
  EXPECT_TRUE(r.external_calibration);
  EXPECT_EQ(r.temperature_celsius, 23);
  EXPECT_NEAR(*r.supply_volts, 3.3, kTolerance);
  EXPECT_NEAR(*r.lanes[0].tx_bias_amperes, 0.012, kTolerance);
  EXPECT_NEAR(*r.lanes[0].tx_power_watts, 1e-3, kTolerance);
  EXPECT_NEAR(*r.lanes[0].rx_power_watts, 308.4e-6, kTolerance);
  EXPECT_NEAR(r.rx_power_thresholds->high_alarm, 822.6e-6, kTolerance);
  EXPECT_NEAR(r.rx_power_thresholds->low_alarm, 1e-6, kTolerance);
  EXPECT_NEAR(r.rx_power_thresholds->high_warning, 308.4e-6, kTolerance);
  EXPECT_NEAR(r.rx_power_thresholds->low_warning, 129.01875e-6, kTolerance);
  EXPECT_TRUE(r.rx_power_thresholds->valid);
  // Temperature thresholds through the same line: 0x4B00 = 19200 -> (1.5 x 19200 - 256) / 256
  // = 111.5 C.
  EXPECT_EQ(r.temperature_thresholds->high_alarm, 111.5);
}

TEST(ModuleEeprom, Sff8472WithoutDiagnosticsOrA2h) {
  FakeModule m = InternallyCalibratedSfp();
  m.Drop(0x51, 0);
  const ModuleReading no_a2 = DecodeModule(m.Reader());
  EXPECT_TRUE(no_a2.lanes.empty());
  EXPECT_FALSE(no_a2.temperature_celsius);
  EXPECT_EQ(no_a2.vendor, "ACME OPTICS");
  ASSERT_FALSE(no_a2.problems.empty());
  m = InternallyCalibratedSfp();
  m.Put(0x50, 0, 92, {0x00});  // no diagnostics: A2h is not asked
  const ModuleReading no_dom = DecodeModule(m.Reader());
  EXPECT_FALSE(no_dom.temperature_celsius);
  EXPECT_FALSE(m.Touched(0x51, 0, 0, 255));
}

// ---- SFF-8636

TEST(ModuleEeprom, Sff8636PagedWithItsThresholds) {
  FakeModule m = Qsfp28();
  const ModuleReading r = DecodeModule(m.Reader());
  EXPECT_EQ(r.standard, ModuleReading::Standard::kSff8636);
  EXPECT_FALSE(r.flat_memory);
  EXPECT_EQ(r.vendor, "ACME");
  EXPECT_EQ(r.oui, "00:02:c9");
  EXPECT_EQ(r.part_number, "QSFP-100G-SR4");
  EXPECT_EQ(r.serial, "QS0001");
  EXPECT_EQ(r.media, "850 nm VCSEL");
  EXPECT_EQ(r.wavelength_nm, 850);
  EXPECT_EQ(r.temperature_celsius, 34);
  EXPECT_NEAR(*r.supply_volts, 3.29, kTolerance);
  ASSERT_EQ(r.lanes.size(), 4U);
  EXPECT_NEAR(*r.lanes[0].rx_power_watts, 0.5e-3, kTolerance);
  EXPECT_NEAR(*r.lanes[1].rx_power_watts, 0.4e-3, kTolerance);
  EXPECT_NEAR(*r.lanes[2].rx_power_watts, 0.3e-3, kTolerance);
  EXPECT_EQ(*r.lanes[3].rx_power_watts, 0);  // no light: a value, and no dBm
  EXPECT_FALSE(WattsToDbm(*r.lanes[3].rx_power_watts));
  EXPECT_NEAR(*r.lanes[2].tx_bias_amperes, 0.015, kTolerance);
  EXPECT_NEAR(*r.lanes[3].tx_power_watts, 1e-3, kTolerance);
  EXPECT_TRUE(r.temperature_thresholds->valid);
  EXPECT_NEAR(r.supply_thresholds->high_alarm, 3.6, kTolerance);
  EXPECT_NEAR(r.supply_thresholds->low_alarm, 3.0, kTolerance);
  EXPECT_NEAR(r.supply_thresholds->high_warning, 3.5, kTolerance);
  EXPECT_NEAR(r.supply_thresholds->low_warning, 3.1, kTolerance);
  EXPECT_TRUE(r.supply_thresholds->valid);
  EXPECT_NEAR(r.rx_power_thresholds->high_alarm, 2.5e-3, kTolerance);
  EXPECT_NEAR(r.rx_power_thresholds->low_alarm, 5e-6, kTolerance);
  EXPECT_TRUE(r.rx_power_thresholds->valid);
  EXPECT_FALSE(r.tx_bias_thresholds->valid);   // alarm inside warning
  EXPECT_FALSE(r.tx_power_thresholds->valid);  // all zero
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
  EXPECT_FALSE(m.Touched(0x50, 0, 3, 21)) << "latched interrupt flags were read";
}

TEST(ModuleEeprom, Sff8636FlatMemoryHasNoPage3) {
  FakeModule m = Qsfp28();
  m.Put(0x50, 0, 2, {0x04});  // Flat_mem
  const ModuleReading r = DecodeModule(m.Reader());
  EXPECT_TRUE(r.flat_memory);
  EXPECT_EQ(r.lanes.size(), 4U);
  EXPECT_FALSE(r.rx_power_thresholds);
  EXPECT_FALSE(m.Touched(0x50, 3, 128, 255));
  EXPECT_TRUE(r.problems.empty());
}

// ---- CMIS

TEST(ModuleEeprom, CmisLanesWithTheBiasMultiplied) {
  FakeModule m = QsfpDd();
  const ModuleReading r = DecodeModule(m.Reader());
  EXPECT_EQ(r.standard, ModuleReading::Standard::kCmis);
  EXPECT_EQ(r.revision, "5.0");
  EXPECT_EQ(r.cmis_module_state, 3);
  EXPECT_EQ(r.cmis_fault_cause, 0);
  EXPECT_EQ(r.firmware, "7.2");
  EXPECT_EQ(r.media, "single-mode fiber");
  EXPECT_EQ(r.vendor, "ACME");
  EXPECT_EQ(r.part_number, "QDD-400G-FR4");
  EXPECT_EQ(r.serial, "DD0001");
  EXPECT_NEAR(*r.wavelength_nm, 1311, 1e-9);
  EXPECT_EQ(r.temperature_celsius, 45.5);
  EXPECT_NEAR(*r.supply_volts, 3.285, kTolerance);
  ASSERT_EQ(r.lanes.size(), 4U);  // the application's media lanes, not 8
  EXPECT_NEAR(*r.lanes[0].tx_bias_amperes, 0.016, kTolerance);
  EXPECT_NEAR(*r.lanes[0].rx_power_watts, 0.8e-3, kTolerance);
  EXPECT_EQ(*r.lanes[1].rx_power_watts, 0);
  EXPECT_NEAR(*r.lanes[3].tx_power_watts, 1e-3, kTolerance);
  // Bias thresholds scaled alike: 10000 x 2 uA x 2 = 40 mA, 8000 -> 32 mA, 500 -> 2 mA.
  EXPECT_NEAR(r.tx_bias_thresholds->high_alarm, 0.040, kTolerance);
  EXPECT_NEAR(r.tx_bias_thresholds->high_warning, 0.032, kTolerance);
  EXPECT_NEAR(r.tx_bias_thresholds->low_warning, 0.002, kTolerance);
  EXPECT_TRUE(r.tx_bias_thresholds->valid);
  EXPECT_TRUE(r.temperature_thresholds->valid);
  EXPECT_FALSE(r.rx_power_thresholds->valid);
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
  EXPECT_FALSE(m.Touched(0x50, 0, 8, 13)) << "latched module flags were read";
  EXPECT_FALSE(m.Touched(0x50, 0x11, 134, 153)) << "latched lane flags were read";
}

TEST(ModuleEeprom, CmisBiasTimesFourAndTwoBanks) {
  FakeModule m = QsfpDd();
  m.Put(0x50, 1, 160, {0x17});  // factor 10b: x4
  EXPECT_NEAR(*DecodeModule(m.Reader()).lanes[0].tx_bias_amperes, 0.032, kTolerance);
  // Two banks (byte 142 = 1), eight media lanes per bank: 16 lanes, lane 9 from bank 1.
  m.Put(0x50, 1, 142, {0x01});
  m.Put(0x50, 0, 88, {0x88});
  m.Put(0x50, 0x11, 186, {0x03, 0xE8}, /*bank=*/1);  // 1000 -> 0.1 mW
  const ModuleReading r = DecodeModule(m.Reader());
  ASSERT_EQ(r.lanes.size(), 16U);
  EXPECT_NEAR(*r.lanes[8].rx_power_watts, 0.1e-3, kTolerance);
  EXPECT_NEAR(*r.lanes[0].rx_power_watts, 0.8e-3, kTolerance);
  // A bank the module does not answer: its lanes have no values, and the report says so.
  m.Drop(0x50, 0x11, 1);
  const ModuleReading missing = DecodeModule(m.Reader());
  ASSERT_EQ(missing.lanes.size(), 16U);
  EXPECT_FALSE(missing.lanes[8].rx_power_watts);
  EXPECT_EQ(missing.problems.size(), 1U);
}

TEST(ModuleEeprom, NothingMadeUpFromNothing) {
  FakeModule empty;
  const ModuleReading none = DecodeModule(empty.Reader());
  EXPECT_EQ(none.standard, ModuleReading::Standard::kUnknown);
  EXPECT_FALSE(none.problems.empty());
  FakeModule unknown;
  unknown.Put(0x50, 0, 0, {0x7f});
  EXPECT_FALSE(DecodeModule(unknown.Reader()).problems.empty());
  // A reserved bias factor (11b) leaves bias out rather than guess.
  FakeModule reserved = QsfpDd();
  reserved.Put(0x50, 1, 160, {0x1F});
  const ModuleReading r = DecodeModule(reserved.Reader());
  EXPECT_FALSE(r.lanes[0].tx_bias_amperes);
  EXPECT_FALSE(r.tx_bias_thresholds);
  EXPECT_TRUE(r.lanes[0].rx_power_watts);
}

// ---- ethtool netlink: the requests as the kernel parses them, the replies as it sends them

// The attributes of a built MODULE_EEPROM_GET request, read back.
struct ParsedRequest {
  std::string dev;
  uint32_t offset = 0, length = 0;
  uint8_t page = 0, bank = 0, i2c = 0;
};
int OnRequestHeader(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) == ETHTOOL_A_HEADER_DEV_NAME) {
    static_cast<ParsedRequest*>(data)->dev = mnl_attr_get_str(attr);
  }
  return MNL_CB_OK;
}

int OnRequestAttribute(const nlattr* attr, void* data) {
  auto* out = static_cast<ParsedRequest*>(data);
  switch (mnl_attr_get_type(attr)) {
    case ETHTOOL_A_MODULE_EEPROM_HEADER:
      mnl_attr_parse_nested(attr, OnRequestHeader, out);
      break;
    case ETHTOOL_A_MODULE_EEPROM_OFFSET:
      out->offset = mnl_attr_get_u32(attr);
      break;
    case ETHTOOL_A_MODULE_EEPROM_LENGTH:
      out->length = mnl_attr_get_u32(attr);
      break;
    case ETHTOOL_A_MODULE_EEPROM_PAGE:
      out->page = mnl_attr_get_u8(attr);
      break;
    case ETHTOOL_A_MODULE_EEPROM_BANK:
      out->bank = mnl_attr_get_u8(attr);
      break;
    case ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS:
      out->i2c = mnl_attr_get_u8(attr);
      break;
  }
  return MNL_CB_OK;
}

ParsedRequest ParseRequest(const std::vector<char>& buf, size_t len) {
  ParsedRequest out;
  const auto* message = reinterpret_cast<const nlmsghdr*>(buf.data());
  EXPECT_EQ(message->nlmsg_len, len);
  mnl_attr_parse(message, sizeof(genlmsghdr), OnRequestAttribute, &out);
  return out;
}

TEST(EthtoolNetlink, ModuleEepromRequestsTheKernelAccepts) {
  std::vector<char> buf;
  const size_t len = BuildModuleEepromRequest(0x1f, "eth2", {0x50, 0x11, 1}, 154, 48, 7, buf);
  ASSERT_GT(len, 0U);
  const auto* message = reinterpret_cast<const nlmsghdr*>(buf.data());
  EXPECT_EQ(message->nlmsg_type, 0x1f);
  EXPECT_EQ(message->nlmsg_seq, 7U);
  const auto* genl = reinterpret_cast<const genlmsghdr*>(buf.data() + sizeof(nlmsghdr));
  EXPECT_EQ(genl->cmd, ETHTOOL_MSG_MODULE_EEPROM_GET);
  const ParsedRequest request = ParseRequest(buf, len);
  EXPECT_EQ(request.dev, "eth2");
  EXPECT_EQ(request.offset, 154U);
  EXPECT_EQ(request.length, 48U);
  EXPECT_EQ(request.page, 0x11);
  EXPECT_EQ(request.bank, 1);
  EXPECT_EQ(request.i2c, 0x50);
  // What the kernel refuses (net/ethtool/eeprom.c) is not sent: a read across the halves, the
  // lower half of a page other than 0, a name longer than IFNAMSIZ, a 7-bit address beyond.
  EXPECT_EQ(BuildModuleEepromRequest(0x1f, "eth2", {0x50, 0, 0}, 120, 16, 1, buf), 0U);
  EXPECT_EQ(BuildModuleEepromRequest(0x1f, "eth2", {0x50, 3, 0}, 0, 16, 1, buf), 0U);
  EXPECT_EQ(BuildModuleEepromRequest(0x1f, "a-name-too-long-for-a-netdev", {}, 0, 1, 1, buf), 0U);
  EXPECT_EQ(BuildModuleEepromRequest(0x1f, "eth2", {0x80, 0, 0}, 0, 1, 1, buf), 0U);
  EXPECT_EQ(BuildModuleEepromRequest(0x1f, "eth2", {0x50, 0, 0}, 0, 0, 1, buf), 0U);
}

// A reply as the kernel builds it: nlmsghdr, genlmsghdr, then `data` as
// ETHTOOL_A_MODULE_EEPROM_DATA (absent when nullopt).
std::vector<char> EepromReply(std::optional<std::string> data) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = 0x1f;
  message->nlmsg_seq = 7;
  mnl_nlmsg_put_extra_header(message, sizeof(genlmsghdr));
  if (data) mnl_attr_put(message, ETHTOOL_A_MODULE_EEPROM_DATA, data->size(), data->data());
  buf.resize(message->nlmsg_len);
  return buf;
}

std::vector<char> ErrorReply(int error) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = NLMSG_ERROR;
  auto* err = static_cast<nlmsgerr*>(mnl_nlmsg_put_extra_header(message, sizeof(nlmsgerr)));
  err->error = -error;
  buf.resize(message->nlmsg_len);
  return buf;
}

TEST(EthtoolNetlink, ModuleEepromRepliesOfTheAskedLengthOnly) {
  const std::string page(48, '\x27');
  const auto whole = EepromReply(page);
  EXPECT_EQ(ParseModuleEepromReply(whole.data(), whole.size(), 48), page);
  // Success with 0 bytes (mlx5 before its 2025 fix) or fewer than asked: EIO, not zeros.
  const auto empty = EepromReply(std::string());
  EXPECT_EQ(ParseModuleEepromReply(empty.data(), empty.size(), 48).error(), EIO);
  EXPECT_EQ(ParseModuleEepromReply(whole.data(), whole.size(), 64).error(), EIO);
  const auto none = EepromReply(std::nullopt);
  EXPECT_EQ(ParseModuleEepromReply(none.data(), none.size(), 48).error(), EIO);
  const auto refused = ErrorReply(EOPNOTSUPP);
  EXPECT_EQ(ParseModuleEepromReply(refused.data(), refused.size(), 48).error(), EOPNOTSUPP);
  EXPECT_EQ(ParseModuleEepromReply(whole.data(), whole.size() - 3, 48).error(), EBADMSG);
  EXPECT_EQ(ParseModuleEepromReply(whole.data(), 0, 48).error(), EBADMSG);
}

TEST(EthtoolNetlink, FamilyIdFromTheControllersReply) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = GENL_ID_CTRL;
  mnl_nlmsg_put_extra_header(message, sizeof(genlmsghdr));
  mnl_attr_put_strz(message, CTRL_ATTR_FAMILY_NAME, "ethtool");
  mnl_attr_put_u16(message, CTRL_ATTR_FAMILY_ID, 0x1f);
  EXPECT_EQ(ParseFamilyReply(buf.data(), message->nlmsg_len), 0x1f);
  const auto missing = ErrorReply(ENOENT);
  EXPECT_EQ(ParseFamilyReply(missing.data(), missing.size()).error(), ENOENT);
}

// The kernel itself: loopback has no module, so a well-formed request gets EOPNOTSUPP (or
// EPERM without CAP_NET_ADMIN); a malformed one would get EINVAL.
TEST(EthtoolNetlink, TheKernelParsesTheRequest) {
  auto netlink = EthtoolNetlink::Open();
  if (!netlink) GTEST_SKIP() << "no ethtool netlink here: " << std::strerror(netlink.error());
  const auto read = netlink->ReadModule("lo", {0x50, 0, 0}, 0, 1);
  ASSERT_FALSE(read);
  EXPECT_TRUE(read.error() == EOPNOTSUPP || read.error() == EPERM) << std::strerror(read.error());
  EXPECT_EQ(netlink->ReadModule("lo", {0x50, 3, 0}, 0, 1).error(), EINVAL);  // not sent
}

// ---- the host boundary: recorded as half pages, replayed from them

using Installed = testing::InstalledSession;

// The module's reads as ModuleEepromSource's live function: a FakeModule behind EthtoolNetlink.
ModuleEepromSource::LiveRead LiveFrom(FakeModule& module) {
  return [reader = module.Reader()](const ModulePageKey& key, uint8_t offset,
                                    uint8_t length) -> std::expected<std::string, int> {
    std::string bytes(length, '\0');
    if (!reader(key, offset, length, reinterpret_cast<uint8_t*>(bytes.data()))) {
      return std::unexpected(EIO);
    }
    return bytes;
  };
}

// Records `module` through the source into a capture in `dir` (optionally redacted), returns
// what was decoded live.
ModuleReading Record(FakeModule& module, const std::filesystem::path& dir,
                     std::shared_ptr<const redact::Redactor> redactor = nullptr) {
  auto writer = capture::Writer::Create(dir, false).value();
  if (redactor) writer->SetRedactor(redactor, true);
  ModuleReading live;
  {
    Installed session(capture::Session::Recording(capture::Layout("/sys", "/proc"), writer.get()));
    EXPECT_TRUE(writer->BeginSample(1).has_value());
    {
      ModuleEepromSource source("eth2", LiveFrom(module));
      live = DecodeModule(source.Reader());
    }
    EXPECT_TRUE(writer->CommitSample().has_value());
    EXPECT_TRUE(writer->WriteIndex("test", {}).has_value());
  }
  return live;
}

ModuleReading Replay(const std::filesystem::path& dir, int* error = nullptr) {
  Installed session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                capture::Reader::Open(dir).value()));
  ModuleEepromSource source("eth2", [](const ModulePageKey&, uint8_t, uint8_t) {
    ADD_FAILURE() << "the live read was asked under replay";
    return std::expected<std::string, int>(std::unexpected(EIO));
  });
  ModuleReading reading = DecodeModule(source.Reader());
  if (error != nullptr) *error = source.first_error();
  return reading;
}

std::string FileText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ModuleEepromSource, RecordedAsHalfPagesAndReplayedAlike) {
  testing::TempDir dir;
  FakeModule module = QsfpDd();
  module.Drop(0x50, 2);  // no thresholds page: recorded as the read's error
  const ModuleReading live = Record(module, dir.path() / "cap");
  const auto half = dir.path() / "cap/samples/0001/ethtool/eth2/module";
  const std::string lower = FileText(half / "i2c-0x50.page-0x00.bank-0.lower");
  ASSERT_EQ(lower.size(), 128U);
  EXPECT_EQ(static_cast<uint8_t>(lower[0]), 0x18);
  EXPECT_EQ(lower.substr(8, 6), std::string(6, '\0'));  // latched flags: not read, stored 0
  EXPECT_EQ(FileText(half / "i2c-0x50.page-0x11.bank-0.upper").size(), 128U);
  EXPECT_EQ(FileText(half / "i2c-0x50.page-0x02.bank-0.upper.errno"), "EIO\n");
  const ModuleReading replayed = Replay(dir.path() / "cap");
  EXPECT_EQ(replayed.vendor, live.vendor);
  EXPECT_EQ(replayed.serial, "DD0001");
  EXPECT_EQ(replayed.temperature_celsius, live.temperature_celsius);
  ASSERT_EQ(replayed.lanes.size(), live.lanes.size());
  for (size_t i = 0; i < live.lanes.size(); ++i) {
    EXPECT_EQ(replayed.lanes[i].rx_power_watts, live.lanes[i].rx_power_watts) << i;
    EXPECT_EQ(replayed.lanes[i].tx_bias_amperes, live.lanes[i].tx_bias_amperes) << i;
  }
  EXPECT_FALSE(replayed.rx_power_thresholds);
  EXPECT_EQ(replayed.problems, live.problems);
}

TEST(ModuleEepromSource, RedactedSerialAndHostileHalves) {
  testing::TempDir dir;
  FakeModule module = Qsfp28();
  auto redactor = std::make_shared<const redact::Redactor>(
      redact::Redactor::WithKey("0123456789abcdef-fleet-key").value());
  Record(module, dir.path() / "cap", redactor);
  const ModuleReading replayed = Replay(dir.path() / "cap");
  EXPECT_NE(replayed.serial, "QS0001");
  EXPECT_EQ(replayed.serial.size(), std::string("QS0001").size());
  EXPECT_EQ(replayed.vendor, "ACME");  // kept: vendors are not identifiers
  EXPECT_EQ(replayed.part_number, "QSFP-100G-SR4");
  // A half of another size is refused, not padded or cut.
  const auto upper =
      dir.path() / "cap/samples/0001/ethtool/eth2/module/i2c-0x50.page-0x00.bank-0.upper";
  std::ofstream(upper, std::ios::binary | std::ios::trunc) << std::string(127, 'x');
  int error = 0;
  const ModuleReading cut = Replay(dir.path() / "cap", &error);
  EXPECT_EQ(cut.vendor, "");
  EXPECT_TRUE(cut.temperature_celsius);  // the lower page still reads
  EXPECT_EQ(error, EINVAL);
  EXPECT_FALSE(ModuleHalfPath("../x", {}, false));
  EXPECT_FALSE(ModuleHalfPath("a/b", {}, false));
  EXPECT_EQ(ModuleHalfPath("eth2", {0x51, 0, 0}, false),
            "ethtool/eth2/module/i2c-0x51.page-0x00.bank-0.lower");
}

}  // namespace
}  // namespace rdmascope::sys
