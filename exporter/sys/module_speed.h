// The fastest Ethernet speed a pluggable module says it carries (issue 40, item 5: a port is
// degraded below min(its fastest mode, its module's), where the link partner's modes are not
// reported). From the module's own advertisement, one decoder per memory map:
// - CMIS: the Application Descriptors of the lower page (bytes 86..117, four bytes each: host
//   interface ID, media interface ID, host and media lane counts, host lane options; host ID
//   FFh ends the list). The host electrical interface ID names the speed (SFF-8024 Table 4-5:
//   0x11 400GAUI-8 C2M, 0x4F 400GAUI-4-S C2M...); the highest of the advertised applications.
// - SFF-8636: byte 131 (Ethernet compliance: bits 0-3 40G, 4-6 10G; bit 7 says byte 192 holds
//   an extended code, SFF-8024 Table 4-4, as ethtool's qsfp.c reads them), read as four lanes
//   (a code "100GBASE-SR4 or 25GBASE-SR" in a QSFP is 100G); failing that the nominal
//   signalling rate per lane, byte 140 in units of 100 MBd, or byte 222 in 250 MBd when byte
//   140 is FFh (above 25.4 GBd), as 4 NRZ lanes.
// - SFF-8472: byte 12, the nominal signalling rate in 100 MBd, or byte 66 in 250 MBd when byte
//   12 is FFh, one lane.
// A signalling rate is a speed only where it is an NRZ Ethernet lane rate within the field's
// unit: 1.25 GBd (1000BASE-X, 8b/10b), 10.3125 (10GBASE-R) or 25.78125 GBd (25GBASE-R). A PAM4
// lane's baud (26.5625 GBd for 50 Gb/s) is ambiguous in these fields and is no speed here.
// What the module does not advertise in a form decoded here gives none, never a guess.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace rdmascope::sys {

// The Ethernet speed (Mb/s) of an SFF-8024 Table 4-5 host electrical interface code; none for
// codes that are no Ethernet speed (Fibre Channel, InfiniBand, CPRI, OTN, PCIe) or unknown.
std::optional<uint32_t> HostInterfaceSpeedMbps(uint8_t host_interface_id);

// CMIS lower page bytes 86..117 (eight descriptors): the highest speed of an application.
std::optional<uint32_t> CmisMaxSpeedMbps(std::span<const uint8_t> descriptors);

// SFF-8636 upper page 00h bytes 131, 192, 140 and 222.
std::optional<uint32_t> Sff8636MaxSpeedMbps(uint8_t compliance, uint8_t extended_compliance,
                                            uint8_t nominal_rate_100mbd,
                                            uint8_t nominal_rate_250mbd);

// SFF-8472 A0h bytes 12 and 66.
std::optional<uint32_t> Sff8472MaxSpeedMbps(uint8_t nominal_rate_100mbd,
                                            uint8_t nominal_rate_250mbd);

}  // namespace rdmascope::sys
