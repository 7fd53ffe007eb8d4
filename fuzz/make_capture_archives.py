#!/usr/bin/env python3
"""Seed archives of the capture fuzzer (make_corpus.sh): a capture as .tar.gz, three ways.

    make_capture_archives.py CORPUS_DIR INDEX_JSON
"""
import gzip
import io
import sys
import tarfile

out, index = sys.argv[1], sys.argv[2].encode()


def archive(name, entries):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data, kind in entries:
            info = tarfile.TarInfo(path)
            info.mtime, info.mode = 0, 0o600
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o700
                tar.addfile(info)
            elif kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    with open(f"{out}/{name}", "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())


s = "cap/samples/0001/"
archive("seed-archive", [("cap", b"", "dir"), ("cap/index.json", index, "file"),
                         (s + "ethtool/eth0/statistics",
                          b"NIC statistics:\n     rx_packets: 12\n", "file"),
                         (s + "ethtool/eth0/coalesce.errno", b"EOPNOTSUPP\n", "file"),
                         (s + "sys/class/net/eth0/mtu", b"1500\n", "file"),
                         (s + "sys/class/net/eth0/device.link", b"../../../devices/x", "file")])
archive("seed-archive-flat", [("index.json", index, "file"),
                              ("samples/0001/sys/class/net/eth0/mtu", b"9000\n", "file")])
archive("seed-archive-symlink", [("index.json", index, "file"),
                                 ("samples/0001/sys/class/net/eth0/mtu", "/etc/passwd", "link")])
