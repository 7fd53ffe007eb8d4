"""The inputs of tests/e2e/ethtool_differential.py: ethtool netlink replies built as the kernel
builds them (a small nlmsghdr/genlmsghdr/nlattr encoder, attribute numbers of Linux 6.1's
include/uapi/linux/ethtool_netlink.h and the 6.2 and 6.18 additions), the module EEPROM
fixtures of tests/unit/module_eeprom_fixtures.h, the capture (docs/capture.md) that holds them,
and the reading back of any capture's bytes (which interfaces, which module maps)."""

import json
import os
import re
import struct

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
