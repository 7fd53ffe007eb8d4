// sys/module_speed: the fastest speed a module advertises, from bytes laid out as CMIS,
// SFF-8636 and SFF-8472 place them, each expected value worked by hand from the specs in the
// comment beside it (SFF-8024 Table 4-5 host interfaces, Table 4-4 extended compliance).
#include "sys/module_speed.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "sys/module_eeprom.h"
#include "unit/module_eeprom_fixtures.h"

namespace rdmascope::sys {
namespace {

using testing::FakeModule;

// A CMIS 5.0 OSFP (identifier 0x19), flat memory (a DAC: no pages 01h, 02h, 11h to read), with
// `descriptors` at lower page bytes 86.. (four bytes each).
FakeModule FlatCmisModule(const std::vector<uint8_t>& descriptors) {
  FakeModule m;
  m.Put(0x50, 0, 0, {0x19, 0x50, 0x80, 0x06});  // OSFP, CMIS 5.0, flat memory, module ready
  m.Put(0x50, 0, 85, {0x03});                   // passive copper
  m.Put(0x50, 0, 86, descriptors);
  return m;
}

TEST(ModuleSpeed, HostInterfaceCodes) {
  EXPECT_EQ(HostInterfaceSpeedMbps(0x04), 10000U);        // SFI
  EXPECT_EQ(HostInterfaceSpeedMbps(0x0b), 100000U);       // CAUI-4 C2M
  EXPECT_EQ(HostInterfaceSpeedMbps(0x0d), 100000U);       // 100GAUI-2 C2M
  EXPECT_EQ(HostInterfaceSpeedMbps(0x0f), 200000U);       // 200GAUI-4 C2M
  EXPECT_EQ(HostInterfaceSpeedMbps(0x11), 400000U);       // 400GAUI-8 C2M
  EXPECT_EQ(HostInterfaceSpeedMbps(0x4f), 400000U);       // 400GAUI-4-S C2M
  EXPECT_EQ(HostInterfaceSpeedMbps(0x51), 800000U);       // 800GAUI-8 S C2M
  EXPECT_EQ(HostInterfaceSpeedMbps(0x83), 1600000U);      // 1.6TAUI-8 C2M
  EXPECT_EQ(HostInterfaceSpeedMbps(0x00), std::nullopt);  // undefined
  EXPECT_EQ(HostInterfaceSpeedMbps(0x29), std::nullopt);  // 64GFC: Fibre Channel
  EXPECT_EQ(HostInterfaceSpeedMbps(0x31), std::nullopt);  // IB HDR: no Ethernet speed
  EXPECT_EQ(HostInterfaceSpeedMbps(0x12), std::nullopt);  // reserved
}

// The fixture's QSFP-DD 400G-FR4: one application, host 0x11 400GAUI-8 C2M: 400 Gb/s.
TEST(ModuleSpeed, CmisOneApplication) {
  FakeModule m = testing::QsfpDd();
  EXPECT_EQ(DecodeModule(m.Reader()).max_speed_mbps, 400000U);
}

// A breakout-capable module: application 1 0x0D 100GAUI-2 (100G), 2 0x4F 400GAUI-4-S (400G),
// 3 0x4D 200GAUI-2-S (200G), then FFh ends the list: a 0x58 1.6TBASE-CR8 after it is no
// application. The highest: 400 Gb/s.
TEST(ModuleSpeed, CmisTheHighestApplicationUpToTheEndOfTheList) {
  FakeModule m = FlatCmisModule({0x0D, 0x00, 0x22, 0x01, 0x4F, 0x00, 0x44, 0x01, 0x4D, 0x00,
                                 0x22, 0x11, 0xFF, 0x00, 0x00, 0x00, 0x58, 0x00, 0x88, 0x01});
  const ModuleReading r = DecodeModule(m.Reader());
  EXPECT_EQ(r.standard, ModuleReading::Standard::kCmis);
  EXPECT_EQ(r.max_speed_mbps, 400000U);
  // The eight descriptors are read (86..117), never a byte past 117 of the lower page.
  EXPECT_TRUE(m.Touched(0x50, 0, 117, 117));
  EXPECT_FALSE(m.Touched(0x50, 0, 118, 127));
}

// InfiniBand HDR (0x31) and NDR (0x32) applications only, then undefined (0x00) descriptors:
// nothing with an Ethernet speed, so none (and no series).
TEST(ModuleSpeed, CmisAdvertisingNothingDecodableHasNone) {
  FakeModule ib = FlatCmisModule({0x31, 0x00, 0x44, 0x01, 0x32, 0x00, 0x44, 0x01});
  EXPECT_EQ(DecodeModule(ib.Reader()).max_speed_mbps, std::nullopt);
  FakeModule blank = FlatCmisModule({});
  EXPECT_EQ(DecodeModule(blank.Reader()).max_speed_mbps, std::nullopt);
  std::array<uint8_t, 32> ended{};
  ended.fill(0xFF);
  EXPECT_EQ(CmisMaxSpeedMbps(ended), std::nullopt);
}

// The fixture's QSFP28: byte 131 0x80 (extended), byte 192 0x02 "100GBASE-SR4 or 25GBASE-SR":
// 100 Gb/s in four lanes.
TEST(ModuleSpeed, Sff8636ExtendedCompliance) {
  FakeModule m = testing::Qsfp28();
  EXPECT_EQ(DecodeModule(m.Reader()).max_speed_mbps, 100000U);
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x80, 0x40, 0, 0), 200000U);  // 200GBASE-CR4 (QSFP56 DAC)
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x80, 0x48, 0, 0), 400000U);  // 400GBASE-FR4
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x80, 0x0c, 0, 0), 100000U);  // 25GBASE-CR CA-S: 4 x 25G
}

// Byte 131's own bits: 0x04 40GBASE-SR4 (40G); 0x14 adds 10GBASE-SR (bit 4): still 40G, the
// highest; 0x20 10GBASE-LR alone: 10G.
TEST(ModuleSpeed, Sff8636ComplianceBits) {
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x04, 0x00, 0, 0), 40000U);
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x14, 0x00, 0, 0), 40000U);
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x20, 0x00, 0, 0), 10000U);
}

// No code the table knows (0x29, "100GBASE-SR1, 200GBASE-SR2 or 400GBASE-SR4": one lane or
// four) falls back on the nominal rate: byte 140 FFh, byte 222 103 x 250 MBd = 25.75 GBd,
// within one unit of 25.78125 (25GBASE-R): 4 x 25 = 100 Gb/s. Byte 140 0x67 = 10.3 GBd: 4 x
// 10 = 40 Gb/s. A PAM4 baud, byte 222 106 = 26.5 GBd (0.72 from 25.78125, more than the unit),
// is no speed; neither is an unspecified rate (0).
TEST(ModuleSpeed, Sff8636NominalRate) {
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x80, 0x29, 0xFF, 103), 100000U);
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x00, 0x00, 0x67, 0), 40000U);
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x00, 0x00, 0xFF, 106), std::nullopt);
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x00, 0x00, 0x00, 0), std::nullopt);
  EXPECT_EQ(Sff8636MaxSpeedMbps(0x00, 0x02, 0x00, 0), std::nullopt);  // 192 without bit 7
}

// The fixture's SFP+: byte 12 0x67 = 10.3 GBd: 10 Gb/s. An SFP28: byte 12 FFh, byte 66 103 x
// 250 MBd = 25.75 GBd: 25 Gb/s. 1000BASE-SX: byte 12 13 = 1.3 GBd, 0.05 from 1.25: 1 Gb/s.
// An SFP56 (byte 66 106 = 26.5 GBd, PAM4) and a rate not given (0): none.
TEST(ModuleSpeed, Sff8472NominalRate) {
  FakeModule m = testing::InternallyCalibratedSfp();
  EXPECT_EQ(DecodeModule(m.Reader()).max_speed_mbps, 10000U);
  EXPECT_EQ(Sff8472MaxSpeedMbps(0xFF, 103), 25000U);
  EXPECT_EQ(Sff8472MaxSpeedMbps(13, 0), 1000U);
  EXPECT_EQ(Sff8472MaxSpeedMbps(0xFF, 106), std::nullopt);
  EXPECT_EQ(Sff8472MaxSpeedMbps(0, 0), std::nullopt);
  EXPECT_EQ(Sff8472MaxSpeedMbps(0xFF, 0), std::nullopt);
}

}  // namespace
}  // namespace rdmascope::sys
