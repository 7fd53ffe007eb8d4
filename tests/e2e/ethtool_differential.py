#!/usr/bin/env python3
"""Our decoded ethtool netlink replies against what the ethtool tool prints for the same bytes
(issue 40, "Proof without hardware").

The test writes one capture (docs/capture.md) whose bytes are built here as the kernel builds
them: an ETHTOOL_MSG_FEC_GET dump (mlx5 RS totals only, mlx5 FC/BaseR with lanes, ice totals, a
driver without statistics, bnxt's Linux 6.18 histogram), a LINKMODES_GET dump, LINKSTATE_GET
per interface (sample 1 up, sample 2 down: no cable; link training failure with its substate
and EXT_DOWN_CNT) and the module EEPROM half pages of a QSFP28 (SFF-8636) and a QSFP-DD
(CMIS 5), the fixtures of tests/unit/module_eeprom_fixtures.h. Then:
  - rdmascope serve --replay of the capture, scraped once per sample (and /debug/links);
  - ethtool 6.1 run under tests/e2e/fake_genetlink.c (LD_PRELOAD), whose NETLINK_GENERIC
    socket is answered from the same capture files: --json --include-statistics --show-fec,
    `ethtool IF` (link modes, link state: text, 6.1 has no --json there) and `ethtool -m IF`
    (text); the link mode names ethtool asks with STRSET_GET are the kernel's
    (net/ethtool/common.c link_mode_names), from a reply built here outside the capture.
Every value both print is asserted equal; where they differ by design (CMIS TX bias scaling,
docs/link-health.md; ethtool's rounding of what it prints) the difference is asserted as
documented. What to compare is read from the capture's bytes (interfaces, module maps), so each
capture under CAPTURES_DIR (tests/captures/) whose first sample holds ethtool netlink replies or
module pages is compared the same way. Skipped (77) when ethtool is absent.

Usage: ethtool_differential.py RDMASCOPE FAKE_GENETLINK_SO [CAPTURES_DIR] [--keep DIR]
"""

import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

# ---- netlink encoding (include/uapi/linux/netlink.h, genetlink.h)

NLM_F_MULTI = 0x2
NLMSG_ERROR, NLMSG_DONE = 2, 3
FAMILY_ID = 0x15  # whatever the capturing host's controller assigned; the shim rewrites it
ETHTOOL_GENL_VERSION = 1


def align4(data):
    return data + b"\0" * (-len(data) % 4)


def attr(kind, payload):
    return align4(struct.pack("=HH", 4 + len(payload), kind) + payload)


def nest(kind, *attrs):
    return attr(kind, b"".join(attrs))


def u8(kind, value):
    return attr(kind, struct.pack("=B", value))


def u32(kind, value):
    return attr(kind, struct.pack("=I", value))


def u64(kind, value):
    return attr(kind, struct.pack("=Q", value))


def strz(kind, text):
    return attr(kind, text.encode() + b"\0")


def u64_array(kind, values):
    return attr(kind, struct.pack(f"={len(values)}Q", *values))


def message(cmd, *attrs, flags=NLM_F_MULTI, seq=7):
    """One genetlink message of ethtool's family: nlmsghdr, genlmsghdr, attributes."""
    body = struct.pack("=BBH", cmd, ETHTOOL_GENL_VERSION, 0) + b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), FAMILY_ID, flags, seq, 4242) + body


def done(seq=7):
    """NLMSG_DONE as the kernel ends a dump (netlink_dump_done: an int, 0)."""
    return struct.pack("=IHHIIi", 20, NLMSG_DONE, NLM_F_MULTI, seq, 4242, 0)


# ---- ethtool's attributes (include/uapi/linux/ethtool_netlink.h as Linux 6.1 defines them;
# the 6.2 and 6.18 additions as those kernels number them)

HEADER_DEV_INDEX, HEADER_DEV_NAME = 1, 2
BITSET_NOMASK, BITSET_SIZE, BITSET_VALUE, BITSET_MASK = 1, 2, 4, 5
BITSET_BITS, BITSET_BITS_BIT, BIT_INDEX, BIT_NAME = 3, 1, 1, 2
MSG_STRSET_GET_REPLY, MSG_LINKMODES_GET_REPLY, MSG_LINKSTATE_GET_REPLY = 1, 4, 6
MSG_FEC_GET_REPLY = 30
LINKMODES_HEADER, LINKMODES_AUTONEG, LINKMODES_OURS, LINKMODES_PEER = 1, 2, 3, 4
LINKMODES_SPEED, LINKMODES_DUPLEX, LINKMODES_LANES = 5, 6, 9
LINKSTATE_HEADER, LINKSTATE_LINK, LINKSTATE_EXT_STATE, LINKSTATE_EXT_SUBSTATE = 1, 2, 5, 6
LINKSTATE_EXT_DOWN_CNT = 7  # Linux 6.2
FEC_HEADER, FEC_MODES, FEC_AUTO, FEC_ACTIVE, FEC_STATS = 1, 2, 3, 4, 5
FEC_STAT_PAD, FEC_STAT_CORRECTED, FEC_STAT_UNCORR, FEC_STAT_CORR_BITS = 1, 2, 3, 4
FEC_STAT_HIST = 5  # Linux 6.18 (ethtool_netlink_generated.h), with the bin's attributes:
FEC_HIST_PAD, FEC_HIST_BIN_LOW, FEC_HIST_BIN_HIGH, FEC_HIST_BIN_VAL = 1, 2, 3, 4
FEC_HIST_BIN_VAL_PER_LANE = 5
STRSET_STRINGSETS, STRINGSETS_STRINGSET = 2, 1
STRINGSET_ID, STRINGSET_COUNT, STRINGSET_STRINGS = 1, 2, 3
STRINGS_STRING, STRING_INDEX, STRING_VALUE = 1, 1, 2
ETH_SS_LINK_MODES = 9

# Link mode bits (include/uapi/linux/ethtool.h enum ethtool_link_mode_bit_indices) and their
# names as the kernel's link_mode_names table gives them to STRSET_GET (net/ethtool/common.c).
LINK_MODE_NAMES = {
    6: "Autoneg", 13: "Pause", 14: "Asym_Pause",
    38: "100000baseCR4/Full", 49: "None", 50: "RS", 51: "BASER",
    66: "200000baseCR4/Full", 73: "400000baseCR8/Full", 74: "LLRS", 84: "200000baseCR2/Full",
    89: "400000baseCR4/Full",
}
LINK_MODE_BITS = 93  # __ETHTOOL_LINK_MODE_MASK_NBITS of Linux 6.1
FEC_NONE, FEC_RS, FEC_BASER, FEC_LLRS = 49, 50, 51, 74
DUPLEX_FULL, AUTONEG_ENABLE = 1, 1


def header(kind, ifindex, ifname):
    """ethnl_fill_reply_header: the device's index and name, always both."""
    return nest(kind, u32(HEADER_DEV_INDEX, ifindex), strz(HEADER_DEV_NAME, ifname))


def compact_bitset(kind, value_bits, mask_bits=None, size=LINK_MODE_BITS):
    """ethnl_put_bitset, compact (the request's ETHTOOL_FLAG_COMPACT_BITSETS): SIZE, VALUE and
    MASK as 32-bit words, or NOMASK for a list."""
    words = (size + 31) // 32

    def pack(bits):
        out = [0] * words
        for bit in bits:
            out[bit // 32] |= 1 << (bit % 32)
        return struct.pack(f"={words}I", *out)

    parts = [] if mask_bits is not None else [attr(BITSET_NOMASK, b"")]
    parts += [u32(BITSET_SIZE, size), attr(BITSET_VALUE, pack(value_bits))]
    if mask_bits is not None:
        parts.append(attr(BITSET_MASK, pack(mask_bits)))
    return nest(kind, *parts)


# ---- the inputs

# FEC_GET_REPLY per interface, in fec_fill_reply's order (net/ethtool/fec.c): FEC_MODES as a
# verbose list (the request asks no compact bitsets), AUTO, ACTIVE (absent when no mode is
# active), STATS: each array the total then the lanes (fec_stats_recalc), empty when the driver
# did not set it; from 6.18 a nest per histogram bin (fec_put_hist).
FEC_PORTS = [
    # mlx5 in RS mode: totals of PPCNT's RS counters (en_stats.c mlx5e_get_fec_stats).
    dict(ifindex=4, name="ens1f0np0", active=FEC_RS, auto=0,
         corrected=[1234], uncorr=[5], bits=[98765], hist=[]),
    # mlx5 in FC-FEC/BaseR: per-lane blocks, the kernel's sum as the total; no corrected bits.
    dict(ifindex=5, name="ens1f1np1", active=FEC_BASER, auto=1, pad=True,
         corrected=[100, 10, 20, 30, 40], uncorr=[1, 0, 1, 0, 0], bits=[], hist=[]),
    # ice: totals, no corrected bits.
    dict(ifindex=6, name="ens2f0", active=FEC_RS, auto=1,
         corrected=[77], uncorr=[0], bits=[], hist=[]),
    # bnxt_en of Linux 6.18: 16 single-count bins (bnxt_ethtool.c), bin 0 over 2^32 (an
    # 8-byte BIN_VAL), and per-lane values on bin 1.
    dict(ifindex=3, name="ens3f0np0", active=FEC_RS, auto=1,
         corrected=[136], uncorr=[0], bits=[150],
         hist=[(i, i, 5_000_000_000_000 if i == 0 else 16 - i,
                [8, 7, 0, 0] if i == 1 else []) for i in range(16)]),
    # A driver without get_fec_stats, link down: three empty arrays, no active mode.
    dict(ifindex=7, name="eno1", active=0, auto=0, corrected=[], uncorr=[], bits=[], hist=[]),
]


def fec_reply(p):
    modes = nest(FEC_MODES, attr(BITSET_NOMASK, b""), u32(BITSET_SIZE, LINK_MODE_BITS),
                 nest(BITSET_BITS, nest(BITSET_BITS_BIT, u32(BIT_INDEX, FEC_RS),
                                        strz(BIT_NAME, "RS"))))
    stats = [attr(FEC_STAT_PAD, b"")] if p.get("pad") else []
    stats += [u64_array(FEC_STAT_CORRECTED, p["corrected"]),
              u64_array(FEC_STAT_UNCORR, p["uncorr"]),
              u64_array(FEC_STAT_CORR_BITS, p["bits"])]
    for low, high, value, lanes in p["hist"]:
        # nla_put_uint: 4 bytes when the value fits.
        val = u32(FEC_HIST_BIN_VAL, value) if value < 2**32 else u64(FEC_HIST_BIN_VAL, value)
        parts = [u32(FEC_HIST_BIN_LOW, low), u32(FEC_HIST_BIN_HIGH, high), val]
        if lanes:
            parts.append(u64_array(FEC_HIST_BIN_VAL_PER_LANE, lanes))
        stats.append(nest(FEC_STAT_HIST, *parts))
    attrs = [header(FEC_HEADER, p["ifindex"], p["name"]), modes, u8(FEC_AUTO, p["auto"])]
    if p["active"]:
        attrs.append(u32(FEC_ACTIVE, p["active"]))
    attrs.append(nest(FEC_STATS, *stats))
    return message(MSG_FEC_GET_REPLY, *attrs)


# LINKMODES_GET_REPLY (net/ethtool/linkmodes.c linkmodes_fill_reply): AUTONEG, OURS
# (advertised as the value, supported as the mask), PEER (a list), SPEED, LANES, DUPLEX.
LINKMODE_PORTS = [
    # 100G over 4 x 25G, 200G supported; the partner advertises 100G.
    dict(ifindex=4, name="ens1f0np0", speed=100000, lanes=4, advertised=[6, 38],
         supported=[6, 38, 66], peer=[6, 38]),
    # 400G over 4 lanes, the partner advertises 400G in both lane counts.
    dict(ifindex=3, name="ens3f0np0", speed=400000, lanes=4, advertised=[6, 89, 73],
         supported=[6, 89, 73], peer=[6, 89, 73]),
    # 200G, lanes not said by the driver: the advertised 200G mode has 4 lanes.
    dict(ifindex=5, name="ens1f1np1", speed=200000, lanes=None, advertised=[66, 38],
         supported=[66, 84, 38], peer=None),
]


def linkmodes_reply(p):
    attrs = [header(LINKMODES_HEADER, p["ifindex"], p["name"]),
             u8(LINKMODES_AUTONEG, AUTONEG_ENABLE),
             compact_bitset(LINKMODES_OURS, p["advertised"], p["supported"])]
    if p["peer"] is not None:
        attrs.append(compact_bitset(LINKMODES_PEER, p["peer"]))
    attrs.append(u32(LINKMODES_SPEED, p["speed"]))
    if p["lanes"] is not None:
        attrs.append(u32(LINKMODES_LANES, p["lanes"]))
    attrs.append(u8(LINKMODES_DUPLEX, DUPLEX_FULL))
    return message(MSG_LINKMODES_GET_REPLY, *attrs)


# LINKSTATE_GET_REPLY (net/ethtool/linkstate.c linkstate_fill_reply), one interface, no dump:
# sample 1 up, sample 2 down with the driver's reason (enum ethtool_link_ext_state:
# NO_CABLE 4, LINK_TRAINING_FAILURE 1 with substate KR_LINK_INHIBIT_TIMEOUT 2) and
# EXT_DOWN_CNT where the driver keeps one (mlx5: PPCNT link_down_events).
LINKSTATE_PORTS = {
    "ens1f0np0": dict(ifindex=4, down=dict(state=4, substate=None, down_count=None)),
    "ens3f0np0": dict(ifindex=3, down=dict(state=1, substate=2, down_count=3)),
}


def linkstate_reply(name, up):
    p = LINKSTATE_PORTS[name]
    attrs = [header(LINKSTATE_HEADER, p["ifindex"], name), u8(LINKSTATE_LINK, 1 if up else 0)]
    down = p["down"]
    if not up:
        attrs.append(u8(LINKSTATE_EXT_STATE, down["state"]))
        if down["substate"]:
            attrs.append(u8(LINKSTATE_EXT_SUBSTATE, down["substate"]))
    if down["down_count"] is not None:
        attrs.append(u32(LINKSTATE_EXT_DOWN_CNT, down["down_count"] + (0 if up else 1)))
    return message(MSG_LINKSTATE_GET_REPLY, *attrs, flags=0)


def strset_reply():
    """STRSET_GET_REPLY of the link mode names (net/ethtool/strset.c strset_fill_set): the
    set's id and count and each string with its index; the names this test uses. A request
    without a device gets a reply without a header (ethnl_fill_reply_header: no device, no
    nest): ethtool 6.1's strset_reply_cb skips a reply whose header names no device."""
    strings = [nest(STRINGS_STRING, u32(STRING_INDEX, index), strz(STRING_VALUE, name))
               for index, name in sorted(link_mode_names().items())]
    count = max(LINK_MODE_BITS, max(link_mode_names()) + 1)
    stringset = nest(STRINGSETS_STRINGSET, u32(STRINGSET_ID, ETH_SS_LINK_MODES),
                     u32(STRINGSET_COUNT, count), nest(STRINGSET_STRINGS, *strings))
    return message(MSG_STRSET_GET_REPLY, nest(STRSET_STRINGSETS, stringset), flags=0)


# ---- module EEPROM: tests/unit/module_eeprom_fixtures.h, byte for byte


class Module:
    def __init__(self):
        self.pages = {}

    def page(self, i2c, page=0, bank=0):
        return self.pages.setdefault((i2c, page, bank), bytearray(256))

    def put(self, i2c, page, offset, data, bank=0):
        self.page(i2c, page, bank)[offset:offset + len(data)] = bytes(data)

    def text(self, i2c, page, offset, width, text):
        self.put(i2c, page, offset, text.ljust(width).encode())

    def halves(self, flag_ranges):
        """The capture's half pages: the lower half once per I2C address (page 0 bank 0), each
        page's upper half; the latched flags zero, as rdmascope never reads them."""
        out = {}
        for (i2c, page, bank), data in self.pages.items():
            data = bytearray(data)
            for (flag_i2c, flag_page, first, last) in flag_ranges:
                if flag_i2c == i2c and flag_page == page:
                    data[first:last + 1] = bytes(last + 1 - first)
            if page == 0 and bank == 0:
                out[f"i2c-0x{i2c:02x}.page-0x00.bank-0.lower"] = bytes(data[:128])
            out[f"i2c-0x{i2c:02x}.page-0x{page:02x}.bank-{bank}.upper"] = bytes(data[128:])
        return out


def qsfp28():
    """A QSFP28 SR4 (identifier 0x11), paged memory."""
    m = Module()
    m.put(0x50, 0, 0, [0x11, 0x08, 0x00])
    m.put(0x50, 0, 3, [0xFF] * 19)  # latched flags
    m.put(0x50, 0, 22, [0x22, 0x00])  # 34.0 C
    m.put(0x50, 0, 26, [0x80, 0x84])  # 32900 x 100 uV = 3.29 V
    # RX power lanes 1-4: 5000, 4000, 3000, 0 x 0.1 uW; bias 7500 x 2 uA = 15 mA; TX 1 mW.
    m.put(0x50, 0, 34, [0x13, 0x88, 0x0F, 0xA0, 0x0B, 0xB8, 0x00, 0x00])
    m.put(0x50, 0, 42, [0x1D, 0x4C] * 4)
    m.put(0x50, 0, 50, [0x27, 0x10] * 4)
    m.put(0x50, 0, 147, [0x00])  # 850 nm VCSEL
    m.text(0x50, 0, 148, 16, "ACME")
    m.put(0x50, 0, 165, [0x00, 0x02, 0xC9])
    m.text(0x50, 0, 168, 16, "QSFP-100G-SR4")
    m.text(0x50, 0, 184, 2, "B")
    m.put(0x50, 0, 186, [0x42, 0x68])  # 17000 / 20 = 850 nm
    m.text(0x50, 0, 196, 16, "QS0001")
    m.text(0x50, 0, 212, 8, "26120601")
    m.put(0x50, 0, 220, [0x08])  # average RX power
    # Page 03h: temperature 75 / -5 / 70 / 0 C; supply 3.6 / 3.0 / 3.5 / 3.1 V; RX 2.5 mW /
    # 5 uW / 2 mW / 10 uW; bias high alarm 20 mA below its high warning 30 mA; TX all zero.
    m.put(0x50, 3, 128, [0x4B, 0x00, 0xFB, 0x00, 0x46, 0x00, 0x00, 0x00])
    m.put(0x50, 3, 144, [0x8C, 0xA0, 0x75, 0x30, 0x88, 0xB8, 0x79, 0x18])
    m.put(0x50, 3, 176, [0x61, 0xA8, 0x00, 0x32, 0x4E, 0x20, 0x00, 0x64])
    m.put(0x50, 3, 184, [0x27, 0x10, 0x00, 0x00, 0x3A, 0x98, 0x00, 0x00])
    return m.halves([(0x50, 0, 3, 21)])


def qsfp_dd():
    """A QSFP-DD 400G-FR4 (CMIS 5.0): four media lanes on bank 0, TX bias in 2 uA x 2."""
    m = Module()
    m.put(0x50, 0, 0, [0x18, 0x50, 0x00, 0x06])  # CMIS 5.0, paged, module state 3 (ready)
    m.put(0x50, 0, 8, [0xFF] * 6)  # latched module flags
    m.put(0x50, 0, 14, [0x2D, 0x80, 0x80, 0x52])  # 45.5 C; 32850 -> 3.285 V
    m.put(0x50, 0, 39, [0x07, 0x02, 0x00])  # firmware 7.2, no fault
    m.put(0x50, 0, 85, [0x02, 0x1C, 0x10, 0x44])  # SMF; application 1: 4 host, 4 media lanes
    m.text(0x50, 0, 129, 16, "ACME")
    m.put(0x50, 0, 145, [0x00, 0x02, 0xC9])
    m.text(0x50, 0, 148, 16, "QDD-400G-FR4")
    m.text(0x50, 0, 164, 2, "C")
    m.text(0x50, 0, 166, 16, "DD0001")
    m.put(0x50, 1, 138, [0x66, 0x6C])  # 26220 x 0.05 = 1311 nm
    m.put(0x50, 1, 142, [0x00])  # bank 0 only
    m.put(0x50, 1, 151, [0x10])  # average RX power
    m.put(0x50, 1, 160, [0x0F])  # bias, TX and RX power monitors; bias factor 01b (x2)
    for lane in range(8):
        m.put(0x50, 0x11, 154 + 2 * lane, [0x27, 0x10])  # TX 1 mW
        m.put(0x50, 0x11, 170 + 2 * lane, [0x0F, 0xA0])  # bias raw 4000
    m.put(0x50, 0x11, 186, [0x1F, 0x40])  # RX lane 1: 8000 -> 0.8 mW; lanes 2-8 0
    m.put(0x50, 0x11, 134, [0xFF] * 20)  # latched lane flags
    # Page 02h: temperature 75 / -5 / 70 / 0 C; bias high alarm raw 10000, low alarm 0, high
    # warning 8000, low warning 500; RX all zero.
    m.put(0x50, 2, 128, [0x4B, 0x00, 0xFB, 0x00, 0x46, 0x00, 0x00, 0x00])
    m.put(0x50, 2, 184, [0x27, 0x10, 0x00, 0x00, 0x1F, 0x40, 0x01, 0xF4])
    return m.halves([(0x50, 0, 8, 13), (0x50, 0x11, 134, 153)])


def sfp(external):
    """An SFP+ SR optic; A0h byte 93 bit 7 says alarm and warning flags are implemented (else
    ethtool's sfpdiag.c prints no thresholds; our decoder does not read byte 93)."""
    m = Module()
    m.put(0x50, 0, 0, [0x03, 0x04])  # SFP; 04h: defined by the two-wire ID (SFF-8472 5-2)
    m.text(0x50, 0, 20, 16, "ACME OPTICS")
    m.put(0x50, 0, 37, [0x00, 0x90, 0x65])
    m.text(0x50, 0, 40, 16, "SFP-10G-SR")
    m.text(0x50, 0, 56, 4, "A")
    m.put(0x50, 0, 60, [0x03, 0x52])  # 850 nm
    m.text(0x50, 0, 68, 16, "SN12345")
    m.text(0x50, 0, 84, 8, "261206")
    m.put(0x50, 0, 92, [0x58 if external else 0x68, 0x80, 0x08])
    m.put(0x51, 0, 112, [0xFF] * 6)  # flags
    if not external:
        # Internal calibration: temperature 75 / -5 / 70 / 0 C; supply all zero; RX power
        # 2 mW, 10 uW, 1 mW, 20 uW. Monitors 25.5 C, 3.3 V, 12 mA, TX 1 mW, RX 0.4 mW.
        m.put(0x51, 0, 0, [0x4B, 0x00, 0xFB, 0x00, 0x46, 0x00, 0x00, 0x00])
        m.put(0x51, 0, 32, [0x4E, 0x20, 0x00, 0x64, 0x27, 0x10, 0x00, 0xC8])
        m.put(0x51, 0, 96, [0x19, 0x80, 0x80, 0xE8, 0x17, 0x70, 0x27, 0x10, 0x0F, 0xA0])
    else:
        # module_eeprom_test.cc Sff8472ExternalCalibrationAsSection93DefinesIt: RX power
        # coefficients 2^-40, 2^-30, 2^-10, 2, 10 (IEEE-754, big-endian); bias slope 2;
        # TX slope 0.5 offset 1000; T slope 1.5 offset -256; V slope 1 offset 100.
        m.put(0x51, 0, 0, [0x4B, 0x00, 0xFB, 0x00, 0x46, 0x00, 0x00, 0x00])
        m.put(0x51, 0, 56, [0x2B, 0x80, 0, 0, 0x30, 0x80, 0, 0, 0x3A, 0x80, 0, 0,
                            0x40, 0x00, 0, 0, 0x41, 0x20, 0, 0, 0x02, 0x00, 0x00, 0x00,
                            0x00, 0x80, 0x03, 0xE8, 0x01, 0x80, 0xFF, 0x00, 0x01, 0x00, 0x00, 0x64])
        m.put(0x51, 0, 96, [0x10, 0x00, 0x80, 0x84, 0x0B, 0xB8, 0x46, 0x50] +
              list(struct.pack(">H", RX_POWER_READING)))
        m.put(0x51, 0, 32, [0x08, 0x00, 0x00, 0x00, 0x04, 0x00, 0x02, 0x00])
    return m.halves([(0x51, 0, 112, 117)])


# The externally calibrated SFP's raw RX reading (A2h 104..105).
RX_POWER_READING = 1024


def external_rx(coefficients, raw):
    """(ours, ethtool's) RX power in watts of a raw reading, from Rx_PWR(0) .. Rx_PWR(4): SFF-8472
    section 9.3's polynomial; sfpdiag.c's sff8472_calibration, which adds Rx_PWR(0), then
    x Rx_PWR(1), (2), (3) into the u16 reading (each sum truncated), and leaves Rx_PWR(4) out."""
    ours = sum(c * raw**i for i, c in enumerate(coefficients))
    theirs = int(coefficients[0]) & 0xFFFF
    for c in coefficients[1:4]:
        theirs = int(theirs + raw * c) & 0xFFFF
    return ours * 1e-7, theirs * 1e-7


MODULES = {"ens1f0np0": qsfp28(), "ens3f0np0": qsfp_dd(), "ens4f0": sfp(external=False),
           "ens4f1": sfp(external=True)}
# Per standard, ethtool's labels of a lane's TX bias, TX power and RX power (qsfp.c, cmis.c,
# sfpdiag.c; SFF-8472 has one lane and no channel number).
LANE_LABELS = {
    "sff8636": ("Laser tx bias current (Channel {})", "Transmit avg optical power (Channel {})",
                "Rcvr signal avg optical power(Channel {})"),
    "cmis": ("Laser tx bias current (Channel {})", "Transmit avg optical power (Channel {})",
             "Rcvr signal avg optical power (Channel {})"),
    "sff8472": ("Laser bias current", "Laser output power",
                "Receiver signal average optical power"),
}

# ---- the capture (docs/capture.md, format 1): two samples, the link collector only

INTERFACES = {"ens1f0np0": 4, "ens1f1np1": 5, "ens2f0": 6, "ens3f0np0": 3, "eno1": 7,
              "ens4f0": 8, "ens4f1": 9}


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def make_capture(root):
    index = {
        "format_version": 1, "rdmascope_version": "ethtool_differential.py",
        "created": "2026-12-07T00:00:00.000Z", "hostname": "ethtool-differential",
        "kernel": {"release": "synthetic", "version": "", "machine": ""}, "redacted": False,
        "samples": [{"name": "0001", "time": "2026-12-07T00:00:00.000Z"},
                    {"name": "0002", "time": "2026-12-07T00:00:10.000Z"}],
        "collectors_replayed": ["link"], "netdevs": {}, "not_recorded": [],
    }
    write(os.path.join(root, "index.json"), json.dumps(index, indent=2) + "\n")
    for sample_name, up in (("0001", True), ("0002", False)):
        sample = os.path.join(root, "samples", sample_name)
        for name in INTERFACES:
            net = os.path.join(sample, "sys", "class", "net", name)
            write(os.path.join(net, "device", ".listed"), "")  # a physical interface
            write(os.path.join(net, "flags"), "0x1003\n")  # IFF_UP: not an admin down
            linkstate_port = name in LINKSTATE_PORTS
            carrier_up = up or not linkstate_port
            write(os.path.join(net, "carrier"), "1\n" if carrier_up else "0\n")
            write(os.path.join(net, "carrier_changes"), "1\n" if carrier_up else "2\n")
            write(os.path.join(net, "operstate"), "up\n" if carrier_up else "down\n")
            if linkstate_port:
                reply = linkstate_reply(name, up)
            else:  # a driver without get_link_ext_state, link up
                reply = message(MSG_LINKSTATE_GET_REPLY,
                                header(LINKSTATE_HEADER, INTERFACES[name], name),
                                u8(LINKSTATE_LINK, 1), flags=0)
            write(os.path.join(sample, "netlink", "ethtool", f"linkstate_get-{name}.bin"), reply)
        write(os.path.join(sample, "netlink", "ethtool", "fec_get.bin"),
              b"".join(fec_reply(p) for p in FEC_PORTS) + done())
        write(os.path.join(sample, "netlink", "ethtool", "linkmodes_get.bin"),
              b"".join(linkmodes_reply(p) for p in LINKMODE_PORTS) + done())
        for name, halves in MODULES.items():
            for leaf, data in halves.items():
                write(os.path.join(sample, "ethtool", name, "module", leaf), data)
        for name in INTERFACES:
            if name not in MODULES:  # no module access through ethtool (EOPNOTSUPP)
                write(os.path.join(sample, "ethtool", name, "module",
                                   "i2c-0x50.page-0x00.bank-0.lower.errno"), "EOPNOTSUPP\n")


# ---- ethtool under the seam


class Ethtool:
    def __init__(self, program, shim, sample, extra, log):
        self.program = program
        self.env = {**os.environ, "LD_PRELOAD": shim, "FAKE_GENETLINK_DIRS": f"{sample}:{extra}",
                    "FAKE_GENETLINK_LOG": log, "LC_ALL": "C"}
        self.log = log

    def run(self, *args):
        out = subprocess.run([self.program, *args], env=self.env, capture_output=True, text=True,
                             timeout=30)
        return out.returncode, out.stdout, out.stderr

    def log_lines(self):
        with open(self.log, encoding="utf-8") as f:
            return f.read().splitlines()


def module_fields(text):
    """`ethtool -m` text: {label: value}, the label as printed (sff-common.c: "\\t%-41s : ")."""
    fields = {}
    for line in text.splitlines():
        label, sep, value = line.strip().partition(" : ")
        if sep:
            fields[label.strip()] = value.strip()
    return fields


def number(text, unit):
    """The number before `unit` in an ethtool value ("15.000 mA", "850.000nm", "1.0 mW / ..")."""
    match = re.match(r"(-?[0-9.]+|-inf)\s*" + re.escape(unit), text)
    if not match:
        raise ValueError(f"no {unit} in {text!r}")
    return match.group(1)


def printed(fields, name, label):
    """Whether ethtool printed `label` (it leaves out what the module does not advertise: an
    SFP's identity unless A0h byte 1 is 04h, thresholds unless A0h byte 93 bit 7, a copper
    cable's wavelength); what it does not print is not compared, and said."""
    if label in fields:
        return True
    print(f"note: {name}: ethtool prints no {label!r}: not compared")
    return False


def settings_fields(text):
    """`ethtool IF` text: {label: [values]}; a label's continuation lines (a tab, then spaces
    to the first value's column: settings.c dump_link_modes) add values."""
    fields, label = {}, None
    for line in text.splitlines():
        head = re.match(r"\t([^ \t][^:]*):\s*(.*)$", line)
        if head:
            label = head.group(1)
            fields[label] = [head.group(2).strip()] if head.group(2).strip() else []
        elif label is not None and line.startswith("\t ") and line.strip():
            fields[label].append(line.strip())
    return fields


def mode_speed_mbps(name):
    """The speed of a link mode as the kernel names it ("400000baseCR4/Full": 400000)."""
    return int(re.match(r"(\d+)base", name).group(1))


def mode_lanes(name):
    """The lanes of a link mode's name: the digit after its medium ("CR4": 4, "DR": 1)."""
    match = re.match(r"\d+base[A-Z]+?(\d*)(?:_\w+)?/", name)
    return int(match.group(1)) if match.group(1) else 1


# ---- reading a capture's bytes back (which interfaces, what a reply holds), so that the
# comparison runs on any capture: ours, and tests/captures/'s where they hold ethtool replies


def netlink_messages(data):
    """(type, attributes after the genlmsghdr) of each whole message."""
    at = 0
    while at + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, at)
        if length < 16 or at + length > len(data):
            return
        if kind >= 16:  # NLMSG_MIN_TYPE: a reply, not a control message
            yield kind, data[at + 20:at + length]
        at += (length + 3) & ~3


def netlink_attrs(data):
    """{type: [payload, ...]} of one level of attributes."""
    out, at = {}, 0
    while at + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, at)
        if length < 4 or at + length > len(data):
            break
        out.setdefault(kind & 0x3FFF, []).append(data[at + 4:at + length])
        at += (length + 3) & ~3
    return out


def reply_by_name(path):
    """{interface: its reply's top-level attributes} of an ethtool reply file (each message's
    header nest, attribute 1, names it: ETHTOOL_A_HEADER_DEV_NAME)."""
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        data = f.read()
    out = {}
    for _, body in netlink_messages(data):
        attrs = netlink_attrs(body)
        names = netlink_attrs(attrs.get(1, [b""])[0]).get(HEADER_DEV_NAME)
        if names:
            out[names[0].rstrip(b"\0").decode(errors="replace")] = attrs
    return out


def read_half(sample, name, i2c, page, upper, bank=0):
    """A half page of the capture (docs/capture.md "Module EEPROM"), or None."""
    leaf = (f"i2c-0x{i2c:02x}.page-0x{page if upper else 0:02x}.bank-{bank if upper else 0}."
            + ("upper" if upper else "lower"))
    path = os.path.join(sample, "ethtool", name, "module", leaf)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        data = f.read()
    return data if len(data) == 128 else None


SFF8024_STANDARDS = {0x03: "sff8472", 0x0C: "sff8636", 0x0D: "sff8636", 0x11: "sff8636",
                     0x18: "cmis", 0x19: "cmis", 0x1E: "cmis"}


def module_shape(sample, name):
    """What the comparison needs to know of a captured module, from its bytes: the memory map
    (SFF-8024 identifier, byte 0), CMIS's TX bias factor (page 01h byte 160 bits 4-3) and
    media lanes (lower page byte 88, the default application's), SFF-8472's external RX power
    calibration (A0h byte 92 bit 4; A2h 56..75 Rx_PWR(4)..(0), IEEE-754 big-endian; the raw
    monitor at 104 and thresholds at 32..39). None: no module in the capture."""
    lower = read_half(sample, name, 0x50, 0, upper=False)
    if lower is None or lower[0] not in SFF8024_STANDARDS:
        return None
    shape = dict(standard=SFF8024_STANDARDS[lower[0]], bias_factor=1, media_lanes=None,
                 external=None)
    if shape["standard"] == "cmis":
        page1 = read_half(sample, name, 0x50, 1, upper=True)
        factor = (page1[160 - 128] >> 3) & 3 if page1 else 0
        shape["bias_factor"] = {0: 1, 1: 2, 2: 4}.get(factor)
        shape["media_lanes"] = lower[88] & 0x0F or None
    elif shape["standard"] == "sff8472" and lower[92] & 0x10 and not lower[92] & 0x20:
        a2 = read_half(sample, name, 0x51, 0, upper=False)
        if a2 is not None:
            coefficients = [struct.unpack_from(">f", a2, 72 - 4 * i)[0] for i in range(5)]
            thresholds = dict(zip([("alarm", "high"), ("alarm", "low"), ("warning", "high"),
                                   ("warning", "low")], struct.unpack_from(">4H", a2, 32)))
            shape["external"] = dict(coefficients=coefficients, thresholds=thresholds,
                                     reading=struct.unpack_from(">H", a2, 104)[0])
    return shape


def link_mode_names():
    """The kernel's link mode names as STRSET_GET gives them (net/ethtool/common.c: its
    __DEFINE_LINK_MODE_NAME makes "<speed>base<type>/<duplex>" of the enum's
    ETHTOOL_LINK_MODE_<speed>base<type>_<duplex>_BIT; the special modes are named apart), for
    every bit the installed include/uapi/linux/ethtool.h defines, and the few this test uses
    beyond them."""
    special = {"FEC_NONE": "None", "FEC_RS": "RS", "FEC_BASER": "BASER", "FEC_LLRS": "LLRS"}
    names = dict(LINK_MODE_NAMES)
    try:
        with open("/usr/include/linux/ethtool.h", encoding="utf-8") as f:
            header_text = f.read()
    except OSError:
        return names
    for mode, bit in re.findall(r"ETHTOOL_LINK_MODE_(\w+)_BIT\s*=\s*(\d+)", header_text):
        full = re.fullmatch(r"(\d+base\w+)_(Full|Half)", mode)
        names[int(bit)] = f"{full.group(1)}/{full.group(2)}" if full else special.get(mode, mode)
    return names


class Differential:
    def __init__(self, checker):
        self.check = checker

    # -- FEC

    def fec(self, ethtool, samples, replies):
        """Each interface of the FEC dump `replies` ({name: attributes}) that we report."""
        names = {"RS": "rs", "BaseR": "baser", "None": "none", "Off": "off", "LLRS": "llrs"}
        for name, attrs in replies.items():
            if harness.value(samples, "rdma_link_source_available", netdev=name,
                             source="fec") is None:
                print(f"note: {name}: not a port we follow (no source series): not compared")
                continue
            rc, out, err = ethtool.run("--json", "--include-statistics", "--show-fec", name)
            self.check.expect(f"{name}: ethtool --show-fec exit status", (rc, err), (0, ""))
            if rc != 0:
                continue
            shown = json.loads(out)[0]
            info = harness.series(samples, "rdma_link_fec_info", netdev=name)
            modes = {dict(labels)["mode"]: dict(labels)["auto"] for labels in info}
            active = [names.get(a, a) for a in shown["active"]]
            self.check.expect(f"{name}: active FEC mode, ethtool {shown['active']}",
                              sorted(modes), active)
            self.check.expect(f"{name}: FEC auto, ethtool config {shown['config']}",
                              list(modes.values()), ["1" if "Auto" in shown["config"] else "0"])
            stats = shown.get("statistics", {})
            for key, series in (("corrected_blocks", "corrected_codewords"),
                                ("uncorrectable_blocks", "uncorrectable_codewords"),
                                ("corrected_bits", "corrected_bits")):
                total = harness.value(samples, f"rdma_link_fec_{series}_total", netdev=name)
                lanes = harness.series(samples, f"rdma_link_fec_lane_{series}_total", netdev=name)
                ours_lanes = [int(lanes[k]) for k in sorted(
                    lanes, key=lambda labels: int(dict(labels)["lane"]))]
                theirs = stats.get(key)
                # ethtool leaves an unreported counter out, as we leave its series out.
                self.check.expect(f"{name}: {key} total",
                                  None if total is None else int(total),
                                  theirs["total"] if theirs else None)
                self.check.expect(f"{name}: {key} lanes 0..", ours_lanes,
                                  theirs.get("lanes", []) if theirs else [])
            # ethtool 6.1 knows no ETHTOOL_A_FEC_STAT_HIST (its attr_cb drops attributes past
            # ETHTOOL_A_FEC_STAT_MAX, 4): the 6.18 histogram is ours alone, checked against the
            # reply's bins here; the rest of the reply ethtool prints equal (above).
            bins = []
            for stats_nest in attrs.get(FEC_STATS, []):
                for hist in netlink_attrs(stats_nest).get(FEC_STAT_HIST, []):
                    b = netlink_attrs(hist)
                    value = b[FEC_HIST_BIN_VAL][0]
                    bins.append((struct.unpack("=I", b[FEC_HIST_BIN_LOW][0])[0],
                                 struct.unpack("=I", b[FEC_HIST_BIN_HIGH][0])[0],
                                 struct.unpack("=I" if len(value) == 4 else "=Q", value)[0]))
            ours = {(int(dict(k)["bin_low"]), int(dict(k)["bin_high"])): v for k, v in
                    harness.series(samples, "rdma_link_fec_histogram_codewords_total",
                                   netdev=name).items()}
            self.check.expect(f"{name}: histogram bins of the reply (ethtool 6.1 prints none: "
                              f"{sorted(stats)})", ours, {(lo, hi): float(v) for lo, hi, v in bins})
            if bins:
                self.check.expect(f"{name}: ethtool's JSON has no histogram",
                                  [k for k in stats if "hist" in k], [])
        asked = [line for line in ethtool.log_lines() if line.startswith("fec_get ")]
        # get_stats_flag: the policy we gave says FEC_GET takes ETHTOOL_FLAG_STATS (4).
        self.check.expect("ethtool asked FEC_GET with ETHTOOL_FLAG_STATS each time",
                          (len(asked) > 0 or not replies,
                           [line for line in asked if "flags=0x4 " not in line]), (True, []))

    # -- link modes

    def linkmodes(self, ethtool, samples, names):
        for name in names:
            if harness.value(samples, "rdma_link_source_available", netdev=name,
                             source="linkmodes") is None:
                print(f"note: {name}: not a port we follow (no source series): not compared")
                continue
            rc, out, err = ethtool.run(name)
            self.check.expect(f"{name}: ethtool exit status", (rc, err), (0, ""))
            f = settings_fields(out)
            shown = f.get("Speed", ["Unknown!"])[0]
            speed = None if shown == "Unknown!" else int(number(shown, "Mb/s"))
            self.check.expect(f"{name}: speed, ethtool {shown}",
                              harness.value(samples, "rdma_link_speed_bits_per_second",
                                            netdev=name), None if speed is None else speed * 1e6)
            # A mode ethtool has no name for prints as BIT<n>: no speed of ours to compare.
            def modes(label):
                return [m for m in f.get(label, []) if re.match(r"\d+base", m)]
            if "Lanes" in f:
                lanes = int(f["Lanes"][0])
            else:
                # No ETHTOOL_A_LINKMODES_LANES: ethtool prints none; ours is the one lane count
                # of the advertised modes of the active speed (docs/link-health.md), here read
                # from the mode names ethtool prints.
                lanes = {mode_lanes(m) for m in modes("Advertised link modes")
                         if mode_speed_mbps(m) == speed}
                lanes = lanes.pop() if len(lanes) == 1 else None
            self.check.expect(f"{name}: lanes (ethtool: {f.get('Lanes', 'not printed')})",
                              harness.value(samples, "rdma_link_lanes", netdev=name),
                              None if lanes is None or speed is None else float(lanes))
            supported = modes("Supported link modes")
            self.check.expect(f"{name}: fastest supported mode of {supported}",
                              harness.value(samples, "rdma_link_max_speed_bits_per_second",
                                            netdev=name),
                              max(mode_speed_mbps(m) for m in supported) * 1e6 if supported
                              else None)
            partner = modes("Link partner advertised link modes")
            common = [m for m in modes("Advertised link modes") if m in partner]
            self.check.expect(f"{name}: fastest mode both ends advertise, partner {partner}",
                              harness.value(samples, "rdma_link_common_max_speed_bits_per_second",
                                            netdev=name),
                              max(mode_speed_mbps(m) for m in common) * 1e6 if common else None)

    # -- link state

    def linkstate(self, ethtools, scrapes, samples, links):
        """The first up-to-down edge of each interface with a LINKSTATE reply in every sample:
        ethtool's "Link detected" before and at it, against our down events then."""
        names = sorted({leaf[len("linkstate_get-"):-len(".bin")] for leaf in os.listdir(
            os.path.join(samples[0], "netlink", "ethtool")) if leaf.startswith("linkstate_get-")})
        for name in names:
            replies = [reply_by_name(os.path.join(sample, "netlink", "ethtool",
                                                  f"linkstate_get-{name}.bin")).get(name, {})
                       for sample in samples]
            link = [r.get(LINKSTATE_LINK, [b""])[0][:1] for r in replies]
            edges = [k for k in range(1, len(samples)) if link[k - 1] == b"\1" and link[k] == b"\0"]
            if not edges:
                continue
            k = edges[0]
            ethtool_up, ethtool_down, up, down = ethtools[k - 1], ethtools[k], scrapes[k - 1], \
                scrapes[k]
            _, out, _ = ethtool_up.run(name)
            self.check.expect(f"{name}: sample {k} ethtool", settings_fields(out)["Link detected"],
                              ["yes"])
            self.check.expect(f"{name}: sample {k} no down event",
                              harness.series(up, "rdma_link_down_events_total", netdev=name), {})
            _, out, _ = ethtool_down.run(name)
            detected = settings_fields(out)["Link detected"][0]
            match = re.fullmatch(r"no \(([^,)]+)(?:, ([^)]+))?\)", detected)
            self.check.expect(f"{name}: ethtool says why: {detected!r}", bool(match), True)
            if not match:
                continue
            # ethtool's words for the kernel's enum names (settings.c names_link_ext_state and
            # the substates): lower case, spaces as underscores, for the states used here.
            reason = match.group(1).lower().replace(" ", "_")
            substate = (match.group(2) or "").lower().replace(" ", "_")
            events = harness.series(down, "rdma_link_down_events_total", netdev=name)
            self.check.expect(f"{name}: down events by reason", {
                (dict(k)["reason"], dict(k)["substate"]): v for k, v in events.items()},
                {(reason, substate): 1.0})
            first = [e for e in links.get(name, {}).get("events", [])
                     if e.get("direction") == "down"]
            self.check.expect(f"{name}: /debug/links first down reason",
                              (first[0].get("reason"), first[0].get("substate", "")) if first
                              else None, (reason, substate))
            # EXT_DOWN_CNT (Linux 6.2): ethtool 6.1 prints no count (linkstate_reply_cb knows
            # LINK, EXT_STATE, EXT_SUBSTATE, SQI), so it is ours alone; the rest above is equal.
            count = replies[k].get(LINKSTATE_EXT_DOWN_CNT)
            self.check.expect(f"{name}: PHY down count of the reply (ethtool 6.1 prints none)",
                              harness.value(down, "rdma_link_phy_down_events_total", netdev=name),
                              float(struct.unpack("=I", count[0])[0]) if count else None)
            self.check.expect(f"{name}: ethtool prints no down count",
                              [line for line in out.splitlines() if "down" in line.lower()
                               and "Link detected" not in line], [])
        # ethtool 6.1's gset_request asks LINKSTATE without ETHTOOL_FLAG_STATS (a kernel would
        # then leave EXT_DOWN_CNT out); the seam answers with the capture's reply, which has it.
        asked = [line for ethtool in ethtools for line in ethtool.log_lines()
                 if line.startswith("linkstate_get ")]
        self.check.expect("ethtool asked LINKSTATE_GET without statistics each time",
                          (len(asked) > 0 or not names,
                           [line for line in asked if " flags=0x0 " not in line]), (True, []))

    # -- module EEPROM

    def module(self, ethtool, samples, name, shape):
        standard, external = shape["standard"], shape["external"]
        rc, out, err = ethtool.run("-m", name)
        self.check.expect(f"{name}: ethtool -m exit status", (rc, err), (0, ""))
        if rc != 0:
            return
        f = module_fields(out)
        key = dict(netdev=name)
        # ethtool prints with fixed decimals (sff-common.c: temperature %.02f C, voltage %.04f V,
        # bias %.03f mA, power %.04f mW and %.02f dBm; qsfp.c / cmis.c the same): ours, printed
        # so, must read the same, digit for digit.
        for label, metric, unit, fmt in (
                ("Module temperature", "rdma_link_module_temperature_celsius", "degrees C", "%.2f"),
                ("Module voltage", "rdma_link_module_supply_voltage_volts", "V", "%.4f")):
            if printed(f, name, label):
                ours = harness.value(samples, metric, **key)
                self.check.expect(f"{name}: {label}, ethtool {f[label]}",
                                  None if ours is None else fmt % ours, number(f[label], unit))
        lanes = harness.series(samples, "rdma_link_module_lane_rx_power_watts", **key)
        ours_lanes = sorted(int(dict(labels)["lane"]) for labels in lanes)
        labels = LANE_LABELS[standard]
        if "{}" in labels[0]:
            channels = sorted(lane for lane in range(1, 9) if labels[0].format(lane) in f)
        else:
            channels = [1] if labels[0] in f else []
        if standard == "cmis" and shape["media_lanes"]:
            # ethtool prints the 8 lanes of page 11h; we report the media lanes of the default
            # application (lower page byte 88: 4 for a 400G-FR4), docs/link-health.md.
            self.check.expect(f"{name}: lanes, ours the {shape['media_lanes']} media lanes of "
                              f"ethtool's {channels}", ours_lanes,
                              channels[:shape["media_lanes"]])
        else:
            self.check.expect(f"{name}: lanes", ours_lanes, channels)
        # CMIS page 01h byte 160 bits 4-3: the bias LSB is 2 uA times the factor (1, 2, 4).
        # ethtool's cmis.c shifts the reading right by it instead (divides): ours is ethtool's
        # times the factor squared, exactly. No factor (reserved 3): we report no bias.
        factor = shape["bias_factor"]
        bias_factor = factor * factor if factor else None
        for lane in [lane for lane in ours_lanes if lane in channels]:  # a mismatch failed above
            bias = harness.value(samples, "rdma_link_module_lane_tx_bias_amperes", lane=str(lane),
                                 **key)
            shown = f[labels[0].format(lane)]
            self.check.expect(f"{name}: lane {lane} TX bias, ethtool {shown}"
                              + (f" x {bias_factor} (CMIS scaling)" if bias_factor != 1 else ""),
                              None if bias is None else "%.3f" % (bias * 1e3),
                              None if bias_factor is None else
                              "%.3f" % (float(number(shown, "mA")) * bias_factor))
            for direction, label in (("tx", labels[1]), ("rx", labels[2])):
                watts = harness.value(samples, f"rdma_link_module_lane_{direction}_power_watts",
                                      lane=str(lane), **key)
                if not printed(f, name, label.format(lane)):
                    continue
                shown = f[label.format(lane)]
                theirs_mw = number(shown, "mW")
                if watts is None:
                    self.check.expect(f"{name}: lane {lane} {direction.upper()} power", None,
                                      theirs_mw)
                    continue
                if direction == "rx" and external:
                    # SFF-8472 external calibration: ours is section 9.3's polynomial, ethtool's
                    # sfpdiag.c Rx_PWR(0) + x (Rx_PWR(1) + Rx_PWR(2) + Rx_PWR(3)) into a u16
                    # (docs/link-health.md). Each side is its own formula of the same bytes.
                    ours_w, theirs_w = external_rx(external["coefficients"], external["reading"])
                    self.check.expect(f"{name}: RX power is section 9.3's polynomial",
                                      "%.4f" % (watts * 1e3), "%.4f" % (ours_w * 1e3))
                    self.check.expect(f"{name}: ethtool's RX power is sfpdiag.c's formula "
                                      f"({shown})", theirs_mw, "%.4f" % (theirs_w * 1e3))
                    self.check.expect(f"{name}: the two differ", theirs_mw != "%.4f" % (
                        watts * 1e3), ours_w != theirs_w)
                    continue
                self.check.expect(f"{name}: lane {lane} {direction.upper()} power, ethtool {shown}",
                                  "%.4f" % (watts * 1e3), theirs_mw)
                # dBm: ours from the recording rule's 10 log10(W) + 30 of a positive reading;
                # ethtool prints -inf for 0 mW, where the rule gives no dBm (no light).
                dbm = re.search(r"/ (\S+) dBm", shown).group(1)
                self.check.expect(f"{name}: lane {lane} {direction.upper()} dBm",
                                  "%.2f" % (10 * math.log10(watts) + 30) if watts > 0 else "-inf",
                                  dbm)
        self.thresholds(name, f, samples, key, bias_factor, external)
        self.identity(name, f, samples, key, standard)

    def no_module(self, ethtool, samples, name):
        """A driver without module access: ethtool's error, our source 0 and no series."""
        rc, _, err = ethtool.run("-m", name)
        self.check.expect(f"{name}: ethtool -m fails: {err.strip()!r}",
                          (rc != 0, "Operation not supported" in err), (True, True))
        self.check.expect(f"{name}: module source", harness.value(
            samples, "rdma_link_source_available", netdev=name, source="module"), 0.0)
        self.check.expect(f"{name}: no module series", harness.series(
            samples, "rdma_link_module_info", netdev=name), {})

    def thresholds(self, name, f, samples, key, bias_factor, external):
        quantities = [
            ("temperature", "rdma_link_module_temperature_threshold_celsius", "Module temperature",
             "degrees C", 1, "%.2f"),
            ("supply_voltage", "rdma_link_module_supply_voltage_threshold_volts", "Module voltage",
             "V", 1, "%.4f"),
            ("tx_bias", "rdma_link_module_tx_bias_threshold_amperes", "Laser bias current",
             "mA", 1e3, "%.3f"),
            ("tx_power", "rdma_link_module_tx_power_threshold_watts", "Laser output power",
             "mW", 1e3, "%.4f"),
            ("rx_power", "rdma_link_module_rx_power_threshold_watts", "Laser rx power",
             "mW", 1e3, "%.4f"),
        ]
        for quantity, metric, label, unit, scale, fmt in quantities:
            if quantity == "tx_bias" and bias_factor is None:
                continue  # no bias scale: neither ours nor a comparison
            if not printed(f, name, f"{label} high alarm threshold"):
                continue
            shown = {(level, bound): float(number(f[f"{label} {bound} {level} threshold"], unit))
                     * (bias_factor if quantity == "tx_bias" else 1)
                     for level in ("alarm", "warning") for bound in ("high", "low")}
            if quantity == "rx_power" and external:
                # The thresholds are raw readings too: ethtool's formula against ours, each
                # checked as its own (the RX power above), then ours compared as ours.
                for (level, bound), raw in external["thresholds"].items():
                    ours_w, theirs_w = external_rx(external["coefficients"], raw)
                    self.check.expect(f"{name}: ethtool's rx {level} {bound} threshold is "
                                      "sfpdiag.c's formula", "%.4f" % shown[level, bound],
                                      "%.4f" % (theirs_w * 1e3))
                    shown[level, bound] = ours_w * 1e3
            # Our rule (docs/link-health.md): valid when not all zero and low alarm <= low
            # warning < high warning <= high alarm; applied here to the numbers ethtool prints.
            valid = (any(shown.values()) and shown["alarm", "low"] <= shown["warning", "low"]
                     < shown["warning", "high"] <= shown["alarm", "high"])
            self.check.expect(f"{name}: {quantity} thresholds valid, ethtool's {shown}",
                              harness.value(samples, "rdma_link_module_thresholds_valid",
                                            quantity=quantity, **key), 1.0 if valid else 0.0)
            ours = harness.series(samples, metric, **key)
            if not valid:
                # A table that makes no sense gives no threshold series (only the 0 above).
                self.check.expect(f"{name}: no {quantity} threshold series", ours, {})
                continue
            for (level, bound), value in shown.items():
                got = harness.value(samples, metric, level=level, bound=bound, **key)
                self.check.expect(f"{name}: {quantity} {level} {bound} threshold",
                                  None if got is None else fmt % (got * scale), fmt % value)

    def identity(self, name, f, samples, key, standard):
        info = harness.series(samples, "rdma_link_module_info", **key)
        self.check.expect(f"{name}: one rdma_link_module_info", len(info), 1)
        if len(info) != 1:
            return
        labels = dict(next(iter(info)))
        for ours, theirs in (("vendor", "Vendor name"), ("oui", "Vendor OUI"),
                             ("part", "Vendor PN"), ("revision", "Vendor rev"),
                             ("serial", "Vendor SN")):
            if printed(f, name, theirs):
                self.check.expect(f"{name}: {ours}", labels.get(ours), f[theirs])
        if printed(f, name, "Laser wavelength"):
            self.check.expect(f"{name}: wavelength, ethtool {f['Laser wavelength']}",
                              labels.get("wavelength_nm"),
                              "%g" % float(number(f["Laser wavelength"], "nm")))
        if standard == "cmis" and printed(f, name, "Module State"):
            # "0x03 (ModuleReady)": CMIS Table 8-7's module state, ours by number.
            state = int(f["Module State"].split()[0], 16)
            self.check.expect(f"{name}: CMIS module state, ethtool {f['Module State']}",
                              harness.value(samples, "rdma_link_module_state", **key),
                              float(state))


def holds_ethtool(sample):
    """Whether a capture's sample holds ethtool netlink replies or module pages."""
    interfaces = os.path.join(sample, "ethtool")
    return os.path.isdir(os.path.join(sample, "netlink", "ethtool")) or any(
        os.path.isdir(os.path.join(interfaces, name, "module"))
        for name in (os.listdir(interfaces) if os.path.isdir(interfaces) else []))


def compare_capture(capture, rdmascope, shim, program, extra, work, checker):
    """Replays `capture` (scraped once per sample) and runs ethtool on each of its samples'
    files; compares every interface whose replies or module pages it holds."""
    samples = sorted(os.path.join(capture, "samples", n)
                     for n in os.listdir(os.path.join(capture, "samples")))
    with harness.Exporter(rdmascope, ["--replay", capture]) as exporter:
        scrapes = [harness.parse(exporter.metrics()) for _ in samples]
        status, body = exporter.get("/debug/links")
    checker.expect(f"{capture}: /debug/links status", status, 200)
    links = {port["netdev"]: port for port in json.loads(body)["ports"]} if status == 200 \
        else {}
    logs = [os.path.join(work, f"fake_genetlink-{i}.log") for i in range(len(samples))]
    ethtools = []
    for sample, log in zip(samples, logs):
        open(log, "w").close()
        ethtools.append(Ethtool(program, shim, sample, extra, log))
    diff = Differential(checker)
    # Sample 1's replies against the first scrape; the link state's edges over the samples.
    replies = os.path.join(samples[0], "netlink", "ethtool")
    diff.fec(ethtools[0], scrapes[0], reply_by_name(os.path.join(replies, "fec_get.bin")))
    diff.linkmodes(ethtools[0], scrapes[0],
                   list(reply_by_name(os.path.join(replies, "linkmodes_get.bin"))))
    if os.path.isdir(replies):
        diff.linkstate(ethtools, scrapes, samples, links)
    interfaces = os.path.join(samples[0], "ethtool")
    for name in sorted(os.listdir(interfaces)) if os.path.isdir(interfaces) else []:
        if not os.path.isdir(os.path.join(interfaces, name, "module")):
            continue
        shape = module_shape(samples[0], name)
        if shape is not None:
            diff.module(ethtools[0], scrapes[0], name, shape)
        elif os.path.exists(os.path.join(interfaces, name, "module",
                                         "i2c-0x50.page-0x00.bank-0.lower.errno")):
            diff.no_module(ethtools[0], scrapes[0], name)


def main(argv):
    """RDMASCOPE SHIM [CAPTURES_DIR] [--keep DIR]: the capture built here, then each capture
    under CAPTURES_DIR (tests/captures/) whose first sample holds ethtool replies or pages."""
    args = [a for i, a in enumerate(argv[1:], 1) if a != "--keep" and argv[i - 1] != "--keep"]
    if len(args) < 2:
        print(__doc__)
        return 2
    rdmascope, shim = args[0], args[1]
    captures_dir = args[2] if len(args) > 2 else None
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    # /usr/sbin is not on every user's PATH (Debian's ethtool lives there).
    program = shutil.which("ethtool") or shutil.which("ethtool", path="/usr/sbin:/sbin")
    if program is None:
        print("SKIP: no ethtool (Debian: apt install ethtool)")
        return harness.SKIP
    version = subprocess.run([program, "--version"], capture_output=True, text=True).stdout
    print("ethtool:", version.strip())
    work = keep or tempfile.mkdtemp(prefix="rdmascope-ethtool-diff-")
    try:
        capture = os.path.join(work, "capture")
        shutil.rmtree(capture, ignore_errors=True)
        make_capture(capture)
        # Replies a capture does not hold: the link mode names ethtool asks by STRSET_GET.
        extra = os.path.join(work, "not-in-capture")
        write(os.path.join(extra, "netlink", "ethtool", "strset_get.bin"), strset_reply())
        checker = harness.Checker()
        compare_capture(capture, rdmascope, shim, program, extra, work, checker)
        for name in sorted(os.listdir(captures_dir)) if captures_dir else []:
            if holds_ethtool(os.path.join(captures_dir, name, "samples", "0001")):
                print(f"-- {name}")
                compare_capture(os.path.join(captures_dir, name), rdmascope, shim, program, extra,
                                work, checker)
        return checker.result()
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
