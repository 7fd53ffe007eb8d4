"""The link sources of a synthetic capture (issue 40): ethtool generic netlink replies built
byte for byte as the kernel builds them, and module pages as `rdmascope capture` stores them.

Netlink (docs/capture.md "netlink"; what sys/netlink_capture.cc records and ReplayNetlink
hands to the parsers):
- netlink/ethtool/fec_get.bin: the ETHTOOL_MSG_FEC_GET dump the link collector asks with
  ETHTOOL_FLAG_STATS (sys/ethtool_fec.cc). One FEC_GET_REPLY per interface whose driver has
  get_fecparam, in ifindex order (net/ethtool/netlink.c ethnl_default_dumpit; the others are
  skipped: -EOPNOTSUPP), each as ethnl_default_dump_one puts it: nlmsghdr (the family id, the
  request's seq and port id, NLM_F_MULTI), genlmsghdr (cmd, version 1), the reply header nest
  (ethnl_fill_reply_header: DEV_INDEX u32, DEV_NAME string), then fec_fill_reply: MODES (a
  verbose bitset: the request does not ask for compact ones, ethnl_put_bitset32 with no mask:
  NOMASK, SIZE, BITS of BIT {INDEX, NAME}), AUTO u8, ACTIVE u32 (absent when no mode is
  active), and with the stats flag STATS {CORRECTED, UNCORR, CORR_BITS: u64 arrays, total first
  then lanes, empty when the driver did not set them (fec_stats_recalc); from 6.18 one HIST
  nest per bin (fec_put_hist: BIN_LOW, BIN_HIGH u32, BIN_VAL nla_put_uint, BIN_VAL_PER_LANE)}.
  x86_64 has efficient unaligned access: nla_put_64bit adds no pad attribute. The dump ends
  with NLMSG_DONE (netlink_dump_done: an int 0, NLM_F_MULTI).
- netlink/ethtool/linkmodes_get.bin: ETHTOOL_MSG_LINKMODES_GET dump with
  ETHTOOL_FLAG_COMPACT_BITSETS (sys/ethtool_linkmodes.cc), every interface with
  get_link_ksettings, linkmodes_fill_reply: AUTONEG u8, OURS (compact: SIZE, VALUE =
  advertised, MASK = supported, 32-bit words), PEER (compact, NOMASK, only when the partner
  advertised anything), SPEED u32 (SPEED_UNKNOWN while down), DUPLEX u8, LANES u32 (when the
  driver says), RATE_MATCHING u8 (Linux 6.1+: always).
- netlink/ethtool/linkstate_get-IF.bin: ETHTOOL_MSG_LINKSTATE_GET of one interface (a doit:
  genlmsg_put_reply, flags 0, no ack), linkstate_fill_reply: LINK u8 (absent without
  get_link), EXT_STATE and EXT_SUBSTATE u8 (only while the driver names a reason; the substate
  only when non-zero), EXT_DOWN_CNT u32 (6.2+, asked with ETHTOOL_FLAG_STATS, drivers with
  get_link_ext_stats). Before 6.2 the kernel refuses the stats flag and the collector asks
  again without it; only that answer is recorded.
Each .bin has the recorder's .json beside it (DecodeNetlinkJson's layout: json.dumps with
indent 1 gives nlohmann's dump(1)). Replay rewrites seq and port id; the family id is kept.

Module pages (ethtool/IF/module/i2c-0xAA.page-0xPP.bank-B.lower|upper, 128 bytes each):
the fixtures of tests/unit/module_eeprom_fixtures.h (module_fixtures.py), with the latched
flag bytes stored as 0 as the recorder stores bytes it never read (docs/capture.md "Module
EEPROM"); `.errno` for a read the kernel refused (EIO: no module plugged)."""

import copy
import json
import os
import re
import struct

import module_fixtures

# A family id the generic netlink controller gave ethtool on some host: any number from
# GENL_MIN_ID on; replay reads the command from genlmsghdr, never this.
ETHTOOL_FAMILY = 21
PORT_ID = 4242  # the requesting socket's port id as the kernel echoes it; replay rewrites it

NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_MULTI = 2
NLA_F_NESTED = 0x8000
ETHTOOL_GENL_VERSION = 1
# include/uapi/linux/ethtool_netlink.h (bookworm's 6.1 headers; later ones as sys/*.h define)
FEC_GET, FEC_GET_REPLY = 29, 30
LINKMODES_GET_REPLY, LINKSTATE_GET_REPLY = 4, 6
HEADER_DEV_INDEX, HEADER_DEV_NAME = 1, 2
BITSET_NOMASK, BITSET_SIZE, BITSET_BITS, BITSET_VALUE, BITSET_MASK = 1, 2, 3, 4, 5
BITSET_BITS_BIT, BIT_INDEX, BIT_NAME = 1, 1, 2
FEC_HEADER, FEC_MODES, FEC_AUTO, FEC_ACTIVE, FEC_STATS = 1, 2, 3, 4, 5
FEC_STAT_CORRECTED, FEC_STAT_UNCORR, FEC_STAT_CORR_BITS, FEC_STAT_HIST = 2, 3, 4, 5
HIST_BIN_LOW, HIST_BIN_HIGH, HIST_BIN_VAL, HIST_BIN_VAL_PER_LANE = 2, 3, 4, 5  # sys/ethtool_fec.h
(LINKMODES_HEADER, LINKMODES_AUTONEG, LINKMODES_OURS, LINKMODES_PEER, LINKMODES_SPEED,
 LINKMODES_DUPLEX, LINKMODES_LANES, LINKMODES_RATE_MATCHING) = 1, 2, 3, 4, 5, 6, 9, 10
LINKSTATE_HEADER, LINKSTATE_LINK, LINKSTATE_EXT_STATE, LINKSTATE_EXT_SUBSTATE = 1, 2, 5, 6
LINKSTATE_EXT_DOWN_CNT = 7  # Linux 6.2 (sys/ethtool_linkstate.cc kLinkStateExtDownCount)
SPEED_UNKNOWN, DUPLEX_FULL, DUPLEX_UNKNOWN = 0xFFFFFFFF, 1, 0xFF

# __ETHTOOL_LINK_MODE_MASK_NBITS by kernel: the size every link-mode bitset is sent with.
LINK_MODE_BITS = {"6.1": 93, "6.18": 125}
# Link mode bits that are no speed (include/uapi/linux/ethtool.h), by the kernel's names
# (net/ethtool/common.c link_mode_names: what a verbose bitset's BIT_NAME says).
SPECIAL_MODES = {"Autoneg": 6, "TP": 7, "FIBRE": 10, "Pause": 13, "Asym_Pause": 14,
                 "Backplane": 16, "FEC_NONE": 49, "FEC_RS": 50, "FEC_BASER": 51, "FEC_LLRS": 74}
FEC_NAMES = {"off": ("FEC_NONE", "None"), "rs": ("FEC_RS", "RS"),
             "baser": ("FEC_BASER", "BASER"), "llrs": ("FEC_LLRS", "LLRS")}
# enum ethtool_link_ext_state (sys/ethtool_linkstate.cc kStates).
EXT_STATES = ["autoneg_failure", "link_training_failure", "link_logical_mismatch",
              "bad_signal_integrity", "no_cable", "cable_issue", "eeprom_issue",
              "calibration_failure", "power_budget_exceeded", "overheat", "module",
              "otp_speed_violation", "bmc_request_down"]
ERRNOS = {"EIO", "EOPNOTSUPP", "ENODEV"}
NOT_MODELLED = "EOPNOTSUPP"  # make_capture.py's: a source the spec does not model

# Latched flag bytes (clear on read): the link collector never reads them, so a capture
# stores them as 0 (docs/link-health.md "Latched flags are never read"). By identifier:
# {(i2c, page, bank): [(first, last), ...]}.
LATCHED = {
    0x03: {(0x51, 0, 0): [(112, 117)]},  # SFF-8472 A2h alarm and warning flags
    0x0c: {(0x50, 0, 0): [(3, 21)]}, 0x0d: {(0x50, 0, 0): [(3, 21)]},
    0x11: {(0x50, 0, 0): [(3, 21)]},  # SFF-8636 lower page interrupt flags
    0x18: {(0x50, 0, 0): [(8, 13)], (0x50, 0x11, 0): [(134, 153)]},  # CMIS
    0x19: {(0x50, 0, 0): [(8, 13)], (0x50, 0x11, 0): [(134, 153)]},
    0x1e: {(0x50, 0, 0): [(8, 13)], (0x50, 0x11, 0): [(134, 153)]},
}


class LinkSpecError(Exception):
    pass


def kernel_series(kernel):
    match = re.match(r"(\d+)\.(\d+)", kernel or "")
    if not match:
        raise LinkSpecError(f"a shape with link sources names its kernel (\"kernel\": "
                            f"\"6.1.0\"), not {kernel!r}")
    return int(match.group(1)), int(match.group(2))


def link_mode_bits(source):
    """{name: bit} of every speed mode (sys/ethtool_linkmodes.cc's kModes, whose comments name
    each bit as the kernel does) and the special bits."""
    with open(os.path.join(source, "exporter", "sys", "ethtool_linkmodes.cc"),
              encoding="utf-8") as f:
        text = f.read()
    modes = {name: int(bit) for bit, name in
             re.findall(r"\{(\d+), \d+, \d+\},\s*// (\w+)", text)}
    return {**modes, **SPECIAL_MODES}


# ---- netlink encoding

def attr(kind, payload, nested=False):
    header = struct.pack("=HH", 4 + len(payload), kind | (NLA_F_NESTED if nested else 0))
    return header + payload + b"\0" * ((4 - len(payload) % 4) % 4)


def nest(kind, *children):
    return attr(kind, b"".join(children), nested=True)


def u8(kind, value):
    return attr(kind, struct.pack("=B", value))


def u32(kind, value):
    return attr(kind, struct.pack("=I", value))


def u64s(kind, values):
    return attr(kind, b"".join(struct.pack("=Q", v) for v in values))


def uint(kind, value):
    """nla_put_uint: 4 bytes when the value fits, else 8."""
    return attr(kind, struct.pack("=I" if value <= 0xFFFFFFFF else "=Q", value))


def string(kind, text):
    return attr(kind, text.encode("ascii") + b"\0")


def message(kind, flags, seq, body):
    length = 16 + len(body)
    return struct.pack("=IHHII", length, kind, flags, seq, PORT_ID) + body + \
        b"\0" * ((4 - length % 4) % 4)


def genl(command, attributes, flags, seq):
    return message(ETHTOOL_FAMILY, flags, seq,
                   struct.pack("=BBH", command, ETHTOOL_GENL_VERSION, 0) + attributes)


def done(seq):
    return message(NLMSG_DONE, NLM_F_MULTI, seq, struct.pack("=i", 0))


def reply_header(kind, ifindex, name):
    return nest(kind, u32(HEADER_DEV_INDEX, ifindex), string(HEADER_DEV_NAME, name))


def words(bits, size):
    value = 0
    for bit in bits:
        if bit >= size:
            raise LinkSpecError(f"link mode bit {bit} past this kernel's {size} bits")
        value |= 1 << bit
    return b"".join(struct.pack("=I", (value >> (32 * w)) & 0xFFFFFFFF)
                    for w in range((size + 31) // 32))


def compact_bitset(kind, value_bits, mask_bits, size):
    """ethnl_put_bitset32, compact: NOMASK when there is no mask, SIZE, VALUE, MASK."""
    parts = [] if mask_bits is not None else [attr(BITSET_NOMASK, b"")]
    parts += [u32(BITSET_SIZE, size), attr(BITSET_VALUE, words(value_bits, size))]
    if mask_bits is not None:
        parts.append(attr(BITSET_MASK, words(mask_bits, size)))
    return nest(kind, *parts)


def verbose_list(kind, named_bits, size):
    """ethnl_put_bitset32, verbose, no mask (a list): NOMASK, SIZE, BITS of BIT {INDEX, NAME}."""
    bits = [nest(BITSET_BITS_BIT, u32(BIT_INDEX, bit), string(BIT_NAME, name))
            for bit, name in sorted(named_bits)]
    return nest(kind, attr(BITSET_NOMASK, b""), u32(BITSET_SIZE, size), nest(BITSET_BITS, *bits))


# ---- the replies

def counter(spec):
    """fec_stats_recalc: lanes given -> their sum then the lanes; a total alone -> [total]."""
    if spec is None:
        return []
    if "lanes" in spec:
        lanes = spec["lanes"]
        if not 1 <= len(lanes) <= 8:
            raise LinkSpecError(f"FEC lanes: 1 to 8 (ETHTOOL_MAX_LANES), not {lanes}")
        return [sum(lanes)] + list(lanes)
    return [spec["total"]]


def fec_reply(ifindex, name, fec, kernel, seq):
    size = LINK_MODE_BITS_OF(kernel)
    modes = []
    for mode in fec.get("modes", []):
        bit_name, shown = FEC_NAMES[mode]
        modes.append((SPECIAL_MODES[bit_name], shown))
    body = reply_header(FEC_HEADER, ifindex, name) + verbose_list(FEC_MODES, modes, size)
    body += u8(FEC_AUTO, 1 if fec.get("auto") else 0)
    if fec.get("active"):
        body += u32(FEC_ACTIVE, SPECIAL_MODES[FEC_NAMES[fec["active"]][0]])
    stats = fec.get("stats", {})  # the driver's get_fec_stats; {} when it has none
    parts = [u64s(FEC_STAT_CORRECTED, counter(stats.get("corrected_blocks"))),
             u64s(FEC_STAT_UNCORR, counter(stats.get("uncorrectable_blocks"))),
             u64s(FEC_STAT_CORR_BITS, counter(stats.get("corrected_bits")))]
    histogram = stats.get("histogram", [])
    if histogram and kernel < (6, 18):
        raise LinkSpecError(f"{name}: no driver answers a FEC histogram before Linux 6.18")
    for b in histogram:
        lanes = b.get("lanes", [])
        value = b["value"] if "value" in b else sum(lanes)
        parts.append(nest(FEC_STAT_HIST, u32(HIST_BIN_LOW, b["low"]),
                          u32(HIST_BIN_HIGH, b["high"]), uint(HIST_BIN_VAL, value),
                          *([u64s(HIST_BIN_VAL_PER_LANE, lanes)] if lanes else [])))
    body += nest(FEC_STATS, *parts)
    return genl(FEC_GET_REPLY, body, NLM_F_MULTI, seq)


def linkmodes_reply(ifindex, name, modes, kernel, bits_of, seq):
    size = LINK_MODE_BITS_OF(kernel)

    def bits(names):
        try:
            return [bits_of[n] for n in names]
        except KeyError as e:
            raise LinkSpecError(f"{name}: link mode {e} unknown") from e

    body = reply_header(LINKMODES_HEADER, ifindex, name)
    body += u8(LINKMODES_AUTONEG, 1 if modes.get("autoneg") else 0)
    body += compact_bitset(LINKMODES_OURS, bits(modes.get("advertised", [])),
                           bits(modes.get("supported", [])), size)
    if modes.get("peer"):
        body += compact_bitset(LINKMODES_PEER, bits(modes["peer"]), None, size)
    speed = modes.get("speed")
    body += u32(LINKMODES_SPEED, SPEED_UNKNOWN if speed is None else speed)
    body += u8(LINKMODES_DUPLEX, DUPLEX_FULL if speed is not None else DUPLEX_UNKNOWN)
    if modes.get("lanes"):
        body += u32(LINKMODES_LANES, modes["lanes"])
    body += u8(LINKMODES_RATE_MATCHING, 0)  # RATE_MATCH_NONE
    return genl(LINKMODES_GET_REPLY, body, NLM_F_MULTI, seq)


def linkstate_reply(ifindex, name, state, kernel, seq):
    body = reply_header(LINKSTATE_HEADER, ifindex, name)
    if "link" in state:
        body += u8(LINKSTATE_LINK, 1 if state["link"] else 0)
    if state.get("ext_state"):
        body += u8(LINKSTATE_EXT_STATE, EXT_STATES.index(state["ext_state"]))
        if state.get("ext_substate"):
            body += u8(LINKSTATE_EXT_SUBSTATE, state["ext_substate"])
    if "down_count" in state:
        if kernel < (6, 2):
            raise LinkSpecError(f"{name}: EXT_DOWN_CNT is Linux 6.2's")
        body += u32(LINKSTATE_EXT_DOWN_CNT, state["down_count"])
    return genl(LINKSTATE_GET_REPLY, body, 0, seq)


def LINK_MODE_BITS_OF(kernel):
    key = f"{kernel[0]}.{kernel[1]}"
    if key not in LINK_MODE_BITS:
        raise LinkSpecError(f"link mode bitset size of Linux {key} not known here "
                            f"({sorted(LINK_MODE_BITS)})")
    return LINK_MODE_BITS[key]


# ---- the recorder's JSON beside each .bin (sys/netlink_capture.cc DecodeNetlinkJson)

def _attributes(data):
    out = []
    while data:
        if len(data) < 4:
            return None
        length, kind = struct.unpack_from("=HH", data)
        if length < 4 or length > len(data):
            return None
        out.append((kind & 0x3FFF, data[4:length]))
        data = data[(length + 3) & ~3:]
    return out


def _decode_attributes(data, depth):
    out = []
    for kind, p in _attributes(data) or []:
        entry = {"type": kind, "length": len(p)}
        if len(p) == 4:
            entry["u32"] = struct.unpack("=I", p)[0]
        elif len(p) == 8:
            entry["u64"] = struct.unpack("=Q", p)[0]
        elif len(p) == 1:
            entry["u8"] = p[0]
        if len(p) > 1 and p[-1] == 0 and all(0x20 <= c < 0x7f for c in p[:-1]):
            entry["string"] = p[:-1].decode("ascii")
        elif depth < 8 and len(p) >= 4 and _attributes(p) is not None:
            entry["nested"] = _decode_attributes(p, depth + 1)
        entry["hex"] = p[:256].hex()
        out.append(entry)
    return out


def decode_json(data):
    messages = []
    while len(data) >= 16:
        length, kind, flags, seq, pid = struct.unpack_from("=IHHII", data)
        if length < 16 or length > len(data):
            messages.append({"malformed": f"header length {length} past the {len(data)} "
                                          "bytes left"})
            break
        entry = {"type": kind, "flags": flags, "seq": seq, "pid": pid}
        body = data[16:length]
        if kind == NLMSG_DONE:
            entry["done"] = True
        elif kind == NLMSG_ERROR and len(body) >= 4:
            entry["error"] = "0 (ack)"
        elif len(body) >= 4:
            entry["attributes"] = _decode_attributes(body[4:], 0)
        messages.append(entry)
        data = data[(length + 3) & ~3:]
    return json.dumps(messages, indent=1) + "\n"


# ---- a sample's files

def merged(base, overlay):
    """`base` with `overlay` (a spec's "sample2") laid over it: dicts merge, the rest replaces."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def module_halves(source, module):
    """{relative file: bytes or errno name} of one module's pages."""
    if "errno" in module:
        if module["errno"] not in ERRNOS:
            raise LinkSpecError(f"module errno {module['errno']} not one a read gives here")
        return {"i2c-0x50.page-0x00.bank-0.lower": module["errno"]}
    try:
        pages = module_fixtures.load(source, module["fixture"])
    except module_fixtures.FixtureError as e:
        raise LinkSpecError(str(e)) from e
    for i2c, page, offset, data in module.get("put", []):
        target = pages.setdefault((i2c, page, 0), bytearray(256))
        target[offset:offset + len(data)] = bytes(data)
    identifier = pages[(0x50, 0, 0)][0]
    for where, ranges in LATCHED.get(identifier, {}).items():
        for first, last in ranges:
            if where in pages:
                pages[where][first:last + 1] = bytes(last - first + 1)
    out = {}
    for (i2c, page, bank), data in sorted(pages.items()):
        name = f"i2c-0x{i2c:02x}.page-0x{page:02x}.bank-{bank}"
        if page == 0:  # the lower half is one whatever the page; stored as page 0's
            out[name + ".lower"] = bytes(data[:128])
        out[name + ".upper"] = bytes(data[128:])
    return out


def sample_files(source, kernel_text, netdevs, index_of, sample):
    """{sample-relative path: bytes, or an errno name (str) for PATH.errno} of the link
    sources for one sample.
    `netdevs`: {name: link spec (with its "sample2" not yet applied)}; sample 0 or 1."""
    kernel = kernel_series(kernel_text)
    bits_of = link_mode_bits(source)
    files = {}
    specs = {name: merged(spec, spec.get("sample2", {})) if sample == 1 else spec
             for name, spec in netdevs.items()}
    order = sorted(specs, key=lambda n: index_of[n])  # a dump walks the namespace by ifindex
    fec = b"".join(fec_reply(index_of[n], n, specs[n]["fec"], kernel, 1)
                   for n in order if "fec" in specs[n]) + done(1)
    modes = b"".join(linkmodes_reply(index_of[n], n, specs[n]["linkmodes"], kernel, bits_of, 2)
                     for n in order if "linkmodes" in specs[n]) + done(2)
    files["netlink/ethtool/fec_get.bin"] = fec
    files["netlink/ethtool/linkmodes_get.bin"] = modes
    for seq, name in enumerate(order, start=3):
        state = specs[name].get("state")
        if state is not None:
            files[f"netlink/ethtool/linkstate_get-{name}.bin"] = linkstate_reply(
                index_of[name], name, state, kernel, seq)
        else:
            files[f"netlink/ethtool/linkstate_get-{name}.bin"] = NOT_MODELLED
        # No module: what the kernel answers for a driver without module access.
        module = specs[name].get("module", {"errno": "EOPNOTSUPP"})
        for leaf, data in module_halves(source, module).items():
            files[f"ethtool/{name}/module/{leaf}"] = data
    # The recorder's review copy of each reply received (an errno has none).
    for path in [p for p, data in files.items() if p.endswith(".bin") and isinstance(data, bytes)]:
        files[path[:-4] + ".json"] = decode_json(files[path]).encode("ascii")
    return files


def not_modelled_files(netdevs):
    """A shape without link sources: every request answers EOPNOTSUPP, as make_capture.py's
    other unmodelled sources do (the collector then says each source is unavailable)."""
    files = {"netlink/ethtool/fec_get.bin": NOT_MODELLED,
             "netlink/ethtool/linkmodes_get.bin": NOT_MODELLED}
    for name in netdevs:
        files[f"netlink/ethtool/linkstate_get-{name}.bin"] = NOT_MODELLED
        files[f"ethtool/{name}/module/i2c-0x50.page-0x00.bank-0.lower"] = NOT_MODELLED
    return files
