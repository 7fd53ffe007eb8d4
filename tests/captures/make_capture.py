#!/usr/bin/env python3
"""Builds the vendor matrix's captures (tests/captures/<shape>/, docs/vendor-matrix.md) from
their specs (tests/captures/specs/<shape>.json), as format-1 capture directories
(docs/capture.md) that `rdmascope serve --replay` and `check --replay` read.

A spec names, per shape:
  hostname, origin      index.json's; origin {"kind": "synthetic", "from": "<driver sources>"}
  trees                 [{"tree": "tests/fixtures/sysfs/X.tree", "devices": [...],
                          "netdevs": [...]}]: of each tree (the format of
                          tests/unit/fixture_tree.cc), the lines of the RDMA devices named, the
                          lines of the netdevs they name (device/net/N, gid_attrs/ndevs/*) and
                          of the netdevs listed
  entries               more tree lines of this shape's own
  netdevs               {NAME: {"driver", "version", "firmware", "bus", "mtu", "statistics"}}:
                        every interface under class/net, as `ethtool -i` and SIOCGIFMTU give it;
                        "statistics" a file of `ethtool -S` text (tests/fixtures/ethtool/)
  sample2               {"sys/...": "value"}: the files that move between the two samples
  kernel                the kernel release the shape claims ("6.1.0"): what its link replies
                        may hold (no FEC histogram before 6.18, no EXT_DOWN_CNT before 6.2)
  netdevs.NAME.link     the interface's link sources (issue 40; link_replies.py writes them as
                        the kernel and `rdmascope capture` do):
                          fec {modes, auto, active, stats {corrected_blocks, uncorrectable_
                            blocks, corrected_bits: {"total": N} or {"lanes": [...]}, absent
                            when the driver does not set it; histogram [{low, high, value,
                            lanes}]}}: in the FEC_GET dump (absent: a driver without
                            get_fecparam, not in the dump);
                          linkmodes {autoneg, speed (Mb/s, null while down), lanes, supported,
                            advertised, peer: link mode names}: in the LINKMODES_GET dump;
                          state {link, ext_state, ext_substate, down_count}: LINKSTATE_GET;
                          module {"fixture": NAME of tests/unit/module_eeprom_fixtures.h,
                            "put": [[i2c, page, offset, [bytes]]]} or {"errno": "EIO"};
                          sample2: the same keys, laid over the others in the second sample.
                        A shape without any `link` answers every link request EOPNOTSUPP (not
                        modelled).

Every interface answers SIOCGIFINDEX with its device/net/N/ifindex from the tree (else the next
free number from 100), `ethtool -i` with its spec; `ethtool -S` without a statistics file, -c and
--show-priv-flags are EOPNOTSUPP (not modelled: the collectors read the sysfs counters then), as
are the RDMA and DCB netlink sockets (the port netdevs come from sysfs alone, as the matrix's rows
say). index.json lists each of those under not_recorded.

An empty directory of a spec's tree is written with the capture format's `.listed` marker in it
(docs/capture.md "A listing"), so that git keeps it.

Usage: make_capture.py SOURCE_DIR [SHAPE...]            writes tests/captures/SHAPE/
       make_capture.py SOURCE_DIR --check [SHAPE...]    exit 1 if a committed capture differs
       make_capture.py SOURCE_DIR --output DIR SHAPE    writes DIR (a capture of one shape)"""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import link_replies  # noqa: E402

SAMPLES = ("0001", "0002")
# Two samples 10 s apart, as `rdmascope capture` takes them by default: doctor --replay's rates
# are over this window.
TIMES = ("2026-12-06T12:00:00.000Z", "2026-12-06T12:00:10.000Z")
FORMAT_VERSION = 1
NOT_MODELLED = "EOPNOTSUPP"


class SpecError(Exception):
    pass


def parse_tree_line(line):
    """(path, kind, value): kind "file" (value: its text), "dir" or "link" (value: target)."""
    if " -> " in line and " = " not in line:
        path, target = line.split(" -> ", 1)
        return path, "link", target
    if " = " not in line and line.endswith("/"):
        return line.rstrip("/"), "dir", None
    if " = " in line:
        path, content = line.split(" = ", 1)
    elif line.endswith(" ="):
        path, content = line[:-2], ""
    else:
        raise SpecError(f"bad tree line: {line!r}")
    return path, "file", content + "\n"


def tree_lines(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                yield line


def select(source, spec_tree):
    """The lines of one tree the spec takes: its devices' and the netdevs they name."""
    lines = list(tree_lines(os.path.join(source, spec_tree["tree"])))
    devices = spec_tree.get("devices", [])
    netdevs = set(spec_tree.get("netdevs", []))
    taken = []
    for device in devices:
        prefix = f"class/infiniband/{device}/"
        own = [line for line in lines if line.startswith(prefix)]
        if not own:
            raise SpecError(f"{spec_tree['tree']}: no device {device}")
        taken += own
        for line in own:
            path, kind, value = parse_tree_line(line)
            parts = path[len(prefix):].split("/")
            if parts[:2] == ["device", "net"] and len(parts) > 2:
                netdevs.add(parts[2])
            if "/gid_attrs/ndevs/" in path and kind == "file":
                netdevs.add(value.strip())
    for netdev in sorted(netdevs):
        own = [line for line in lines if line.startswith(f"class/net/{netdev}/")]
        if not own and netdev in spec_tree.get("netdevs", []):
            raise SpecError(f"{spec_tree['tree']}: no netdev {netdev}")
        taken += own
    return taken


# core/capture.h kListedMarker: the file in a directory listed and not read beneath.
LISTED_MARKER = ".listed"


def sysfs_entries(source, spec):
    """{sample-relative path: (kind, value)} of the sysfs part, conflicts refused."""
    entries = {}
    lines = [line for t in spec.get("trees", []) for line in select(source, t)]
    for line in lines + spec.get("entries", []):
        path, kind, value = parse_tree_line(line)
        rel = "sys/" + path
        if ".." in rel.split("/") or path.startswith("/"):
            raise SpecError(f"path leaves the capture: {path}")
        if rel in entries and entries[rel] != (kind, value):
            raise SpecError(f"{path}: two trees disagree ({entries[rel]} and {(kind, value)})")
        entries[rel] = (kind, value)
    return entries


def class_net(entries):
    return sorted({rel.split("/")[3] for rel in entries if rel.startswith("sys/class/net/")})


def ifindexes(entries, netdevs):
    known = {}
    for rel, (kind, value) in entries.items():
        parts = rel.split("/")
        if (kind == "file" and len(parts) == 7 and parts[1:3] == ["class", "infiniband"]
                and parts[4] == "net" and parts[6] == "ifindex"):
            known[parts[5]] = int(value)
    free = 100
    for name in netdevs:
        if name not in known:
            while free in known.values():
                free += 1
            known[name] = free
    return known


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(text, bytes) else "w",
              **({} if isinstance(text, bytes) else {"encoding": "utf-8"})) as f:
        f.write(text)


def link_files(source, spec, netdevs, described, index_of, sample):
    """The link sources of one sample (link_replies.py): a path's bytes, or its errno name."""
    links = {name: described[name]["link"] for name in netdevs if "link" in described[name]}
    try:
        if not links:
            return link_replies.not_modelled_files(netdevs)
        return link_replies.sample_files(source, spec.get("kernel"), links, index_of, sample)
    except link_replies.LinkSpecError as e:
        raise SpecError(str(e)) from e


def build(source, shape, out):
    """Writes the capture of `shape` into the empty or absent directory `out`."""
    with open(os.path.join(source, "tests", "captures", "specs", shape + ".json"),
              encoding="utf-8") as f:
        spec = json.load(f)
    origin = spec.get("origin", {})
    if origin.get("kind") != "synthetic" or not origin.get("from"):
        raise SpecError(f"{shape}: a spec's origin is synthetic and says what it follows")
    entries = sysfs_entries(source, spec)
    netdevs = class_net(entries)
    described = spec.get("netdevs", {})
    if sorted(described) != netdevs:
        raise SpecError(f"{shape}: netdevs {sorted(described)} but class/net has {netdevs}")
    index_of = ifindexes(entries, netdevs)
    moved = spec.get("sample2", {})
    for rel in moved:
        if entries.get(rel, ("", None))[0] != "file":
            raise SpecError(f"{shape}: sample2 moves {rel}, which is no file of the trees")
    not_recorded = [{"source": "netlink rdma socket", "reason": NOT_MODELLED},
                    {"source": "netlink dcb socket", "reason": NOT_MODELLED}]
    for n, sample in enumerate(SAMPLES):
        root = os.path.join(out, "samples", sample)
        for rel, (kind, value) in sorted(entries.items()):
            path = os.path.join(root, rel)
            if kind == "dir":
                os.makedirs(path, exist_ok=True)
                if not any(other.startswith(rel + "/") for other in entries):
                    write(os.path.join(path, LISTED_MARKER), "")
            elif kind == "link":
                write(path + ".link", value)  # the target as readlink gives it, no newline
            else:
                write(path, moved[rel] + "\n" if n == 1 and rel in moved else value)
        for name in netdevs:
            about = described[name]
            base = os.path.join(root, "ethtool", name)
            write(os.path.join(base, "mtu"), f"{about.get('mtu', 1500)}\n")
            write(os.path.join(base, "ifindex"), f"{index_of[name]}\n")
            write(os.path.join(base, "driver"),
                  f"driver: {about['driver']}\nversion: {about.get('version', '')}\n"
                  f"firmware-version: {about.get('firmware', '')}\n"
                  f"bus-info: {about.get('bus', '')}\n")
            if "statistics" in about:
                with open(os.path.join(source, about["statistics"]), encoding="utf-8") as f:
                    write(os.path.join(base, "statistics"), f.read())
            else:
                write(os.path.join(base, "statistics.errno"), NOT_MODELLED)
            for what, flag in (("coalesce", "-c"), ("priv-flags", "--show-priv-flags")):
                write(os.path.join(base, what + ".errno"), NOT_MODELLED)
                if n == 0:
                    not_recorded.append({"source": f"ethtool {flag} {name}",
                                         "reason": NOT_MODELLED})
            if n == 0 and "statistics" not in about:
                not_recorded.append({"source": f"ethtool -S {name}", "reason": NOT_MODELLED})
        for family in ("rdma", "dcb"):
            write(os.path.join(root, "netlink", family, "socket.errno"), NOT_MODELLED)
        for rel, data in link_files(source, spec, netdevs, described, index_of, n).items():
            if isinstance(data, bytes):
                write(os.path.join(root, rel), data)
                continue
            # As the recorder keeps a refused request: the reply's path and `.errno`
            # (capture::Writer::Errno), "netlink KEY" in not_recorded (NetlinkRecording).
            write(os.path.join(root, rel + ".errno"), data)
            if n == 0 and rel.startswith("netlink/"):
                key = rel[len("netlink/"):].removesuffix(".bin")
                not_recorded.append({"source": "netlink " + key, "reason": data})
    index = {
        "format_version": FORMAT_VERSION,
        "rdmascope_version": "make_capture.py",
        "created": TIMES[0],
        "hostname": spec["hostname"],
        "kernel": {"release": spec.get("kernel", "synthetic"), "version": "", "machine": ""},
        "redacted": False,
        "origin": origin,
        "samples": [{"name": s, "time": t} for s, t in zip(SAMPLES, TIMES)],
        "collectors_replayed": ["rdma", "ethtool", "link"],
        "netdevs": {name: {"driver": described[name]["driver"],
                           "version": described[name].get("version", ""),
                           "firmware_version": described[name].get("firmware", "")}
                    for name in netdevs},
        "not_recorded": sorted(not_recorded, key=lambda r: (r["source"], r["reason"])),
    }
    write(os.path.join(out, "index.json"), json.dumps(index, indent=2) + "\n")


def shapes(source):
    specs = os.path.join(source, "tests", "captures", "specs")
    return sorted(name[:-5] for name in os.listdir(specs) if name.endswith(".json"))


def files(root):
    """{relative path: bytes} of every file under root, and the directories as None."""
    out = {}
    for parent, dirs, names in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(parent, name), root)] = None
        for name in names:
            with open(os.path.join(parent, name), "rb") as f:
                out[os.path.relpath(os.path.join(parent, name), root)] = f.read()
    return out


def differences(made, committed):
    """Paths that differ between the capture made and the one committed (bytes, presence)."""
    want, got = files(made), files(committed)
    out = [f"{rel} (only made)" for rel in sorted(set(want) - set(got))]
    out += [f"{rel} (only committed)" for rel in sorted(set(got) - set(want))]
    out += [f"{rel} (differs)" for rel in sorted(set(want) & set(got)) if want[rel] != got[rel]]
    return out


def unspecified(source):
    """Captures under tests/captures/ without a spec must say they came from hardware, and who
    sent them (index.json "origin"); the messages for those that do not."""
    root = os.path.join(source, "tests", "captures")
    out = []
    for name in sorted(os.listdir(root)):
        index = os.path.join(root, name, "index.json")
        if name in shapes(source) or not os.path.isfile(index):
            continue
        with open(index, encoding="utf-8") as f:
            origin = json.load(f).get("origin")
        if (not isinstance(origin, dict) or origin.get("kind") != "hardware"
                or not origin.get("reported_by")):
            out.append(f"{name}: FAIL: no spec, and its index.json origin is not "
                       '{"kind": "hardware", "reported_by": ...}')
    return out


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    source, args = argv[0], argv[1:]
    check = "--check" in args
    output = None
    if "--output" in args:
        at = args.index("--output")
        output = args[at + 1]
        del args[at:at + 2]
    named = [a for a in args if not a.startswith("--")]
    names = named or shapes(source)
    if output and len(names) != 1:
        print("--output takes one shape")
        return 2
    failed = False
    if check and not named:
        for line in unspecified(source):
            print(line)
            failed = True
    for shape in names:
        committed = os.path.join(source, "tests", "captures", shape)
        try:
            if output:
                build(source, shape, output)
            elif check:
                with tempfile.TemporaryDirectory(prefix="make-capture-") as work:
                    made = os.path.join(work, shape)
                    build(source, shape, made)
                    diff = differences(made, committed) if os.path.isdir(committed) else [
                        committed + " (absent)"]
                for line in diff:
                    print(f"{shape}: {line}")
                failed |= bool(diff)
                print(f"{shape}: " + ("FAIL: not what make_capture.py makes" if diff else "ok"))
            else:
                shutil.rmtree(committed, ignore_errors=True)
                build(source, shape, committed)
                print(f"wrote {committed}")
        except (SpecError, KeyError, OSError, ValueError) as e:
            print(f"{shape}: FAIL: {e}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
