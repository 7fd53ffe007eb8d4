#!/usr/bin/env bash
# Rebuilds the seed corpora fuzz/corpus/<target>/seed-* from the test fixtures (text values of
# tests/fixtures/sysfs/*.tree and tests/fixtures/web) and from make_seeds.c (binary netlink
# replies, mlx5 dumps, x86 code, a preload stats file, a small ELF, captured stacks). Regression
# inputs (corpus/<target>/regress-*: crashes once found) are kept. Run from anywhere; needs gcc
# and libmnl-dev. The result is checked in: review the diff.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
corpus=$here/corpus
fixtures=$root/tests/fixtures
targets=(sysfs_value rdma_netlink dcb_netlink mlx5_cq_dump elf_symbols x86_tail_jump pmu cpu_list
         perf_event_groups proc occupancy listen_address web_config serve_flags dwarf_unwinder
         elf_dwarf capture)
for t in "${targets[@]}"; do
  mkdir -p "$corpus/$t"
  find "$corpus/$t" -name 'seed-*' -delete
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Captures (core/capture.h): a selector byte (the file of sample 0001: 0 ethtool -S, 1 -i, 2 -c,
# 3 --show-priv-flags, 4 an RDMA netlink reply, 5 a sysfs file; +0x80 stored as .errno), the
# index, a NUL, the file.
index='{"format_version":1,"samples":[{"name":"0001","time":"2026-12-06T11:36:27.482Z"}]}'
capture_seed() { printf "$1"; printf '%s' "$index"; printf '\0'; printf "$2"; }
capture_seed '\x00' 'NIC statistics:\n     rx_packets: 12\n     tx_packets: 7\n' >"$corpus/capture/seed-stats"
capture_seed '\x01' 'driver: mlx5_core\nversion: 24.10\nfirmware-version: 28.39.1002 (MT_0000000838)\nbus-info: 0000:03:00.0\n' >"$corpus/capture/seed-driver"
capture_seed '\x02' 'Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\nrx-usecs: 8\ntx-usecs: 16\n' >"$corpus/capture/seed-coalesce"
capture_seed '\x03' 'Private flags for eth0:\nrx_cqe_compress: on\ntx_cqe_moder   : off\n' >"$corpus/capture/seed-priv-flags"
capture_seed '\x82' 'EOPNOTSUPP\n' >"$corpus/capture/seed-errno"
capture_seed '\x05' '1500\n' >"$corpus/capture/seed-mtu"
printf '\x00{"format_version":2,"samples":[{}]}' >"$corpus/capture/seed-newer"
# ... or a whole capture as a .tar.gz (the input starts with gzip's magic): with a top
# directory, without, and with a symbolic link entry (refused). Fixed times: reproducible bytes.
python3 "$here/make_capture_archives.py" "$corpus/capture" "$index"

# Binary seeds, written as the kernel / the preload library write them.
gcc -O1 -Wall -Werror -I"$root/preload" -o "$tmp/make_seeds" "$here/make_seeds.c" -lmnl
mkdir -p "$tmp/bin"
for t in "${targets[@]}"; do mkdir -p "$tmp/bin/$t"; done
"$tmp/make_seeds" "$tmp/bin"
for f in "$tmp"/bin/*/*; do
  t=$(basename "$(dirname "$f")")
  cp "$f" "$corpus/$t/seed-$(basename "$f")"
done
# The capture's netlink seed: rdma_netlink's device dump without its selector byte.
{ printf '\x04%s\0' "$index"; tail -c +2 "$corpus/rdma_netlink/seed-devices"; } \
  >"$corpus/capture/seed-netlink"

# A small shared object with a forwarder (ibv_reg_mr-like: moves, then jmp through the PLT)
# and versioned symbols, as libibverbs has.
cat >"$tmp/lib.c" <<'C'
int inner(int a, int b, int c);
int outer(int a, int b, int c) { return inner(c, a, b); }
int outer_v1(int a, int b) { return inner(b, a, 0); }
__asm__(".symver outer_v1,outer@LIB_1.0");
C
printf 'LIB_1.0 { global: outer; local: *; };\nLIB_1.1 { global: outer; } LIB_1.0;\n' >"$tmp/lib.map"
gcc -O2 -fPIC -shared -nostdlib -Wl,--version-script="$tmp/lib.map" -Wl,-z,noseparate-code \
    -o "$tmp/lib.so" "$tmp/lib.c"
strip --strip-unneeded "$tmp/lib.so"
cp "$tmp/lib.so" "$corpus/elf_symbols/seed-forwarder.so"

# ELF files for elf_dwarf_fuzzer.cc (16 bytes of ip and return offsets first): a small
# shared object with CFI, symbols and DWARF (an inlined function), the same with .debug_frame
# only, with compressed DWARF sections, and stripped to .eh_frame.
cat >"$tmp/dwarf.c" <<'C'
static inline __attribute__((always_inline)) int twice(int x) { return x * 2; }
__attribute__((noinline)) int leaf(int x) { return twice(x) + 1; }
int caller(int x) { return leaf(x) * leaf(x + 1); }
C
elf_seed() {  # NAME GCC_FLAGS...
  local name=$1
  shift
  gcc -O1 -fPIC -shared -nostdlib -Wl,--build-id -Wl,-z,noseparate-code "$@" \
      -o "$tmp/$name.so" "$tmp/dwarf.c"
  { printf '\0\0\0\0\0\0\x10\x40\0\0\0\0\0\0\x10\x60'; cat "$tmp/$name.so"; } \
    >"$corpus/elf_dwarf/seed-$name"
}
elf_seed dwarf -g
elf_seed debug_frame -g -fno-asynchronous-unwind-tables -fno-unwind-tables
elf_seed compressed -g -gz=zlib
gcc -O1 -fPIC -shared -nostdlib -Wl,--build-id -Wl,-z,noseparate-code -o "$tmp/stripped.so" \
    "$tmp/dwarf.c"
strip --strip-all "$tmp/stripped.so"
{ printf '\0\0\0\0\0\0\x10\x40\0\0\0\0\0\0\x10\x60'; cat "$tmp/stripped.so"; } \
  >"$corpus/elf_dwarf/seed-stripped"

# Text values: every distinct value of the fixture trees (at most 4 KiB, like an attribute).
n=0
while IFS= read -r value; do
  n=$((n + 1))
  printf '%s\n' "$value" >"$corpus/sysfs_value/seed-$n"
done < <(grep -h ' = ' "$fixtures"/sysfs/*.tree | sed 's/^[^=]* = //' | sort -u | head -300)

# CPU lists, PMU formats, events and specs from the PMU trees.
n=0
while IFS= read -r value; do
  n=$((n + 1))
  printf '%s\n' "$value" >"$corpus/cpu_list/seed-$n"
done < <(grep -hE '(cpulist|cpumask|online|local_cpulist) = ' "$fixtures"/sysfs/*.tree |
         sed 's/^[^=]* = //' | sort -u)
n=0
while IFS='|' read -r spec event scale format; do
  n=$((n + 1))
  # 8 bytes of a value for the format, then the lines pmu_fuzzer.cc reads.
  { printf '\0\0\0\0\0\0\0\x2a'; printf '%s\n%s\n%s\n%s\n%s\n' "$spec" "$event" "$scale" "$format" "$format"; } \
    >"$corpus/pmu/seed-$n"
done <<'PMU'
uncore_imc_0/cas_count_read/|event=0x04,umask=0x03|6.103515625e-5|config:0-7,32-35
cpu/event=0xc0,umask=0x00/|event=0x3c|1|config:8-15
fuzz/fuzz/|term=0x07|0.0000610351|config:0-7
fuzz/fuzz,term=3/|term=0x1|2e3|config1:0-3
amd_df/event=0x07,umask=0x38/|event=0x07|1|config:0-7,32-35,59-60
PMU
printf 'cycles\ninstructions\n' >"$corpus/perf_event_groups/seed-1"
printf '{cycles,instructions}\n' >"$corpus/perf_event_groups/seed-2"
printf 'uncore_imc_0/cas_count_read/\n{uncore_imc_0/cas_count_read/,uncore_imc_0/cas_count_write/}\n' \
  >"$corpus/perf_event_groups/seed-3"
printf 'cpu/event=0xc0,umask=0x00/\nLLC-load-misses\nINST_RETIRED:ANY_P\n' >"$corpus/perf_event_groups/seed-4"

# /proc files: a selector byte (the stat field) then the file, as proc_fuzzer.cc reads them.
for f in status limits stat; do
  { printf '\x16'; cat "/proc/self/$f"; } >"$corpus/proc/seed-$f"
done
{ printf '\x27'; head -c 4096 /proc/meminfo; } >"$corpus/proc/seed-meminfo"
{ printf '\x16'; printf '4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 4 0 12345 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n'; } \
  >"$corpus/proc/seed-stat-comm"
# /proc/<pid>/cgroup of a Kubernetes container (hybrid host, cgroupfs driver in v1), a Slurm
# step on cgroup v2 and this process.
{ printf '\x00'; printf '12:memory:/kubepods/burstable/pod0c1e3f3a-2b6d-4f6a-9d3e-7a2b1c0d9e8f/%064d\n1:name=systemd:/system.slice/containerd.service\n0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c1e3f3a_2b6d_4f6a_9d3e_7a2b1c0d9e8f.slice/cri-containerd-%064d.scope\n' 1 2; } \
  >"$corpus/proc/seed-cgroup-kubepods"
{ printf '\x00'; printf '0::/system.slice/slurmstepd.scope/job_4711/step_0+1/user/task_0 (deleted)\n'; } \
  >"$corpus/proc/seed-cgroup-slurm"
{ printf '\x00'; cat /proc/self/cgroup; } >"$corpus/proc/seed-cgroup"

# Listen addresses and serve flags.
i=0
for a in ':9879' '127.0.0.1:9879' '[::1]:9879' 'localhost:0' '[fe80::1%eth0]:80' ':65535'; do
  i=$((i + 1)); printf '%s' "$a" >"$corpus/listen_address/seed-$i"
done
printf -- '--web.listen-address=:0\n--path.sysfs=/sys\n--collector.ethtool\n' >"$corpus/serve_flags/seed-1"
printf -- '--no-collector.rdma\n--log.level=debug\n--web.max-requests=4\n' >"$corpus/serve_flags/seed-2"
printf -- '--collector.ethtool.metrics-include=^rx\n--perf.event={cycles,instructions}\n' \
  >"$corpus/serve_flags/seed-3"

# Web config files: ours, exporter-toolkit's test data (Debian's golang package, 0.8.2) and
# the fixtures of its current keys (inline cert/key, client_allowed_sans, rate_limit).
cp "$fixtures/web/web.yml" "$corpus/web_config/seed-web.yml"
toolkit=/usr/share/gocode/src/github.com/prometheus/exporter-toolkit/web/testdata
if [[ -d $toolkit ]]; then
  for f in "$toolkit"/*.yml; do cp "$f" "$corpus/web_config/seed-$(basename "$f")"; done
fi
for f in "$fixtures"/web/exporter-toolkit-master/*.y*ml; do
  cp "$f" "$corpus/web_config/seed-current-$(basename "$f")"
done
# Inline PEM from our fixtures (they match the fuzzer's certificate directory), and rate_limit
# values in each form yaml.v2 decodes: a Go duration, plain nanoseconds, a float, hex.
{
  echo "tls_server_config:"
  for k in cert:server.crt key:server.key client_ca:server.crt; do
    echo "  ${k%%:*}: |"
    sed 's/^/    /' "$fixtures/web/${k#*:}"
  done
  echo "  client_auth_type: RequireAndVerifyClientCert"
  printf 'rate_limit:\n  interval: 1m30s\n  burst: 20\n'
} >"$corpus/web_config/seed-inline.yml"
i=0
for r in 'interval: 500ms\n  burst: 0x10' 'interval: 1000000\n  burst: 2.9' \
         'interval: "1.5h"\n  burst: 1_000' 'interval: -1s\n  burst: -3' 'interval: 1e9'; do
  i=$((i + 1)); printf "rate_limit:\n  $r\n" >"$corpus/web_config/seed-rate-limit-$i.yml"
done
for t in "${targets[@]}"; do
  echo "$t: $(find "$corpus/$t" -type f | wc -l) inputs, $(du -sk "$corpus/$t" | cut -f1) KiB"
done
