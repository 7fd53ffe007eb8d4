#!/usr/bin/env python3
"""Our decoded ethtool netlink replies against what the ethtool tool prints for the same bytes
(issue 40, "Proof without hardware").

The test writes one capture (docs/capture.md) whose bytes are built here as the kernel builds
them: an ETHTOOL_MSG_FEC_GET dump (mlx5 RS totals only, mlx5 FC/BaseR with lanes, ice totals, a
driver without statistics, bnxt's Linux 6.18 histogram), a LINKMODES_GET dump, LINKSTATE_GET
per interface (sample 1 up, sample 2 down: no cable; link training failure with its substate
and EXT_DOWN_CNT) and the module EEPROM half pages of a QSFP28 (SFF-8636), a QSFP-DD (CMIS 5)
and an SFP calibrated internally and externally (SFF-8472), the fixtures of
tests/unit/module_eeprom_fixtures.h (tests/e2e/ethtool_replies.py builds all of it). Then:
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

import errno
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
from ethtool_replies import (  # noqa: E402
    FEC_HIST_BIN_HIGH, FEC_HIST_BIN_LOW, FEC_HIST_BIN_VAL, FEC_STAT_HIST, FEC_STATS,
    LINKSTATE_EXT_DOWN_CNT, LINKSTATE_LINK, external_rx, make_capture, module_shape,
    netlink_attrs, reply_by_name, strset_reply, write)


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
        # Replies only: a refused request is kept as `linkstate_get-IF.bin.errno`.
        names = sorted({leaf[len("linkstate_get-"):-len(".bin")] for leaf in os.listdir(
            os.path.join(samples[0], "netlink", "ethtool"))
            if leaf.startswith("linkstate_get-") and leaf.endswith(".bin")})
        compared = False
        for name in names:
            replies = [reply_by_name(os.path.join(sample, "netlink", "ethtool",
                                                  f"linkstate_get-{name}.bin")).get(name, {})
                       for sample in samples]
            link = [r.get(LINKSTATE_LINK, [b""])[0][:1] for r in replies]
            edges = [k for k in range(1, len(samples)) if link[k - 1] == b"\1" and link[k] == b"\0"]
            if not edges:
                continue
            k = edges[0]
            compared = True
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
                          (len(asked) > 0 or not compared,
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

    def no_module(self, ethtool, samples, name, error):
        """A module read the kernel refused (`error`: EOPNOTSUPP, a driver without module
        access; EIO, no module plugged): ethtool's error, our source 0 and no series."""
        rc, _, err = ethtool.run("-m", name)
        self.check.expect(f"{name}: ethtool -m fails: {err.strip()!r}",
                          (rc != 0, os.strerror(getattr(errno, error)) in err), (True, True))
        source = harness.value(samples, "rdma_link_source_available", netdev=name,
                               source="module")
        if source is None and not harness.series(samples, "rdma_link_source_available",
                                                 netdev=name):
            print(f"note: {name}: not a port we follow (no source series): not compared")
            return
        self.check.expect(f"{name}: module source", source, 0.0)
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
        elif os.path.exists(refused := os.path.join(interfaces, name, "module",
                                                    "i2c-0x50.page-0x00.bank-0.lower.errno")):
            with open(refused, encoding="ascii") as f:
                diff.no_module(ethtools[0], scrapes[0], name, f.read().strip())


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
