#!/usr/bin/env bash
# The README's two commands on a truly fresh machine, as a new user runs them (issue 25):
# a fresh Debian bookworm tree (mmdebstrap --variant=apt, plus git to clone with), its root a
# mount point as a machine's is, this repository cloned into /root/rdmascope (mode 700: tests
# that drop privileges must not depend on where the clone lives), then, as root inside it:
#   1. ./packaging/install-deps.sh --build && cmake --workflow --preset release
#      && ./build/release/rdmascope serve      (answered /metrics, then stopped)
#   2. ./packaging/install-deps.sh && cmake --workflow --preset test
# and a summary: each step's time and exit status, ctest's totals and failed tests.
#
#   packaging/fresh-check.sh [--work DIR] [--ref REF] [--keep]
#   packaging/fresh-check.sh --work DIR --rerun [-- CTEST_ARGS...]
#
#   --work DIR   where the tree goes (default /var/tmp/rdmascope-fresh; ~15 GiB by the end)
#   --ref REF    what to clone (default: this repository's HEAD; commit first)
#   --keep       leave the tree for --rerun (default: removed after a passing run, kept after
#                a failing one)
#   --rerun      in a kept tree: fetch REF into the clone, rebuild, and run ctest with
#                CTEST_ARGS (e.g. -R host_mr_tracking), without a new tree or install
#
# Runs as root on the host: mmdebstrap, mounts, chroot. The tree shares the host's network (its
# tests scrape 127.0.0.1; the lab fetches a kernel from Debian's mirror) and kernel, as a
# machine's own root would; every process left in it is killed at the end. RDMASCOPE_MIRROR
# overrides Debian's mirror, as for the packaging tests. docs/testing.md says how long it takes.
set -euo pipefail

# All in main(), called on the last line: bash parses the whole file before running it, so the
# file can be edited (a pull, a checkout) while a run of an hour goes on.
main() {

source_repo=$(cd "$(dirname "$0")/.." && pwd)
work=/var/tmp/rdmascope-fresh
ref=HEAD
keep=0
rerun=0
ctest_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --ref) ref=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --rerun) rerun=1; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

fail() { echo "fresh-check: $*" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || fail "run as root (mmdebstrap, mount, chroot)"
for tool in mmdebstrap git unshare chroot curl; do
  command -v "$tool" >/dev/null || fail "$tool not found (packaging/install-deps.sh installs it)"
done
work=$(realpath -m "$work")
root=$work/root
clone=/root/rdmascope
log=$work/fresh-check.log
mirror=${RDMASCOPE_MIRROR:-http://deb.debian.org/debian}
security=${mirror%/debian}/debian-security
commit=$(git -C "$source_repo" rev-parse --verify "$ref^{commit}") || fail "no commit '$ref'"

# Every process whose root is the tree (a daemon a test left, a hung step) is killed, so that
# the tree's mount namespace goes away with its mounts and the tree can be removed.
kill_tree_processes() {
  local pid proc_root killed=0 tree_id
  # The tree is the root of its own namespace (pivot_root): readlink of /proc/PID/root says "/"
  # there, so processes are matched by their root directory's device and inode; nested chroots
  # below the tree (mmdebstrap's) by path.
  tree_id=$(stat -c '%d:%i' "$root" 2>/dev/null) || return 0
  for pid in /proc/[0-9]*; do
    [[ "$pid" != "/proc/$$" ]] || continue
    if [[ "$(stat -L -c '%d:%i' "$pid/root" 2>/dev/null)" != "$tree_id" ]]; then
      proc_root=$(readlink "$pid/root" 2>/dev/null) || continue
      [[ "$proc_root" == "$root"/* ]] || continue
    fi
    kill -KILL "${pid#/proc/}" 2>/dev/null && killed=$((killed + 1))
  done
  [[ $killed -eq 0 ]] || echo "fresh-check: killed $killed process(es) left in the tree"
}

remove_tree() {
  kill_tree_processes
  local mount
  # Detach anything still mounted below the tree, so that rm never descends into /sys or /dev.
  for mount in $(awk -v r="$root" '$5 == r || index($5, r "/") == 1 {print $5}' \
                 /proc/self/mountinfo | sort -r); do
    umount --lazy --recursive "$mount" 2>/dev/null || true
  done
  rm -rf --one-file-system "$root"
}

# What a machine of this kind has beyond Debian, and a fresh one too: the environment variables
# that point programs at the CA bundle and at a proxy (this workplace reaches the package
# registries through a TLS proxy whose CA is in the machines' local CAs, copied below).
machine_env=()
for name in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE REQUESTS_CA_BUNDLE \
            GIT_SSL_CAINFO PIP_CERT http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY \
            NO_PROXY; do
  [[ -n "${!name:-}" ]] && machine_env+=("$name=${!name}")
done

# Runs a shell command as root inside the tree, as on a machine of its own: the tree the root
# of its own mount namespace (a bind mount of itself made the root with pivot_root, the host's
# tree detached, as a container runtime does: a plain chroot leaves the namespace's root at the
# host's /, and then setns() into a nested container's service, as packaging_systemd does,
# lands in the host's /), the host's kernel interfaces (/proc, /sys with bpf, tracefs and
# cgroups, /dev), a fresh /run, and a login-like environment (none of this shell's variables
# but the machine's above).
in_tree() {
  unshare --mount --propagation private sh -eu -c '
    root=$1; shift
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
    mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
    mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root/run"
    mkdir -p "$root/run/lock" "$root/run/fresh-check-host"
    cd "$root"
    pivot_root . run/fresh-check-host
    # A fresh tree has no umount (the mount package is not Essential): the host'"'"'s, run from
    # the old root before it goes (lazily: this very program is still mapped from it).
    /run/fresh-check-host/usr/bin/umount -l /run/fresh-check-host
    rmdir /run/fresh-check-host
    command=$1; shift
    exec /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
      TERM=dumb LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      "$@" /bin/bash -c "$command"' fresh-check "$root" "$1" "${machine_env[@]}"
}

# The machine's locally trusted CAs (/usr/local/share/ca-certificates), added to the tree's
# bundle as update-ca-certificates adds them on every machine of this kind.
trust_machine_cas() {
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    in_tree "update-ca-certificates >/dev/null"
  fi
}

declare -A took status
step() {  # step NAME COMMAND: runs COMMAND in the tree, records its time and status
  local name=$1 started=$SECONDS rc=0
  echo "=== fresh-check: $name: $2"
  in_tree "$2" || rc=$?
  took[$name]=$((SECONDS - started))
  status[$name]=$rc
  echo "=== fresh-check: $name: exit $rc after ${took[$name]} s"
  return 0
}

mkdir -p "$work"
# This run's lines start after what earlier runs (kept tree, --rerun) left in the log.
local first_line=1
[[ ! -f "$log" ]] || first_line=$(( $(wc -l <"$log") + 1 ))
exec > >(tee -a "$log") 2>&1
echo "fresh-check: $(date -u '+%F %T') UTC, commit $commit, tree $root"
total_started=$SECONDS

if [[ $rerun -eq 0 ]]; then
  remove_tree
  started=$SECONDS
  # A machine as a new user has it: Debian's apt variant (what the issue's tree was), git to
  # clone with and the CA certificates a clone over https needs. Nothing else.
  mmdebstrap --variant=apt --mode=root --format=directory --include=git,ca-certificates \
    bookworm "$root" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  [[ -s "$root/etc/hosts" ]] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
  chmod 700 "$root/root"
  trust_machine_cas
  took[tree]=$((SECONDS - started))
  echo "=== fresh-check: tree: ${took[tree]} s"

  # The clone: from this repository, by the tree's own git, into root's home (mode 700).
  mkdir -p "$root/mnt/source"
  git clone --quiet --bare --no-hardlinks "$source_repo" "$root/mnt/source/rdmascope.git"
  git -C "$root/mnt/source/rdmascope.git" update-ref refs/heads/fresh-check "$commit"
  step clone "git clone --quiet --branch fresh-check /mnt/source/rdmascope.git $clone"

  if curl -s --max-time 2 -o /dev/null http://127.0.0.1:9879/; then
    fail "something already answers on port 9879: the README's exporter could not listen there"
  fi
  # README: install, build and run the exporter. It serves until stopped: the host (same
  # network) scrapes it, then it is stopped.
  started=$SECONDS
  echo "=== fresh-check: run command"
  in_tree "cd $clone && ./packaging/install-deps.sh --build && cmake --workflow --preset release && ./build/release/rdmascope serve" &
  runner=$!
  status[run]=1
  while kill -0 "$runner" 2>/dev/null; do
    if curl -sf --max-time 5 http://127.0.0.1:9879/metrics | grep -q '^rdmascope_build_info'; then
      status[run]=0
      echo "=== fresh-check: run command: serving /metrics after $((SECONDS - started)) s"
      break
    fi
    sleep 2
  done
  took[run]=$((SECONDS - started))
  pkill -TERM -f "^./build/release/rdmascope serve" || true
  wait "$runner" || true
  kill_tree_processes

  step test "cd $clone && ./packaging/install-deps.sh && cmake --workflow --preset test"
else
  [[ -d "$root$clone" ]] || fail "no kept tree at $root (run without --rerun first)"
  trust_machine_cas
  git -C "$root/mnt/source/rdmascope.git" fetch --quiet "$source_repo" "+$commit:refs/heads/fresh-check"
  step update "cd $clone && git fetch --quiet origin fresh-check && git reset --quiet --hard FETCH_HEAD"
  local quoted=""
  [[ ${#ctest_args[@]} -eq 0 ]] || quoted=$(printf ' %q' "${ctest_args[@]}")
  step test "cd $clone && ./packaging/install-deps.sh && cmake --build --preset release && ctest --preset release$quoted"
fi
kill_tree_processes

echo
echo "=== fresh-check summary (commit ${commit:0:12}, clone $clone, $(nproc) cores)"
for name in tree clone update run test; do
  [[ -n "${took[$name]:-}" ]] || continue
  echo "  $name: ${took[$name]} s, exit ${status[$name]:-0}"
done
testlog=$root$clone/build/release/Testing/Temporary/LastTest.log
if [[ -f "$testlog" ]]; then
  tail -n +"$first_line" "$log" | grep -E '^[0-9]+% tests passed' | tail -1 | sed 's/^/  ctest: /'
  tail -n +"$first_line" "$log" | sed -n '/^The following tests FAILED:/,/^Errors while running/p' |
    sed 's/^/  /'
fi
echo "  total: $((SECONDS - total_started)) s; log: $log"

ok=1
for name in clone update run test; do
  [[ "${status[$name]:-0}" -eq 0 ]] || ok=0
done
if [[ $ok -eq 1 && $keep -eq 0 && $rerun -eq 0 ]]; then
  remove_tree
  echo "fresh-check: PASSED (tree removed)"
elif [[ $ok -eq 1 ]]; then
  echo "fresh-check: PASSED (tree kept at $root)"
else
  echo "fresh-check: FAILED (tree kept at $root: --rerun -- -R NAME runs tests again)"
  exit 1
fi
}

main "$@"
