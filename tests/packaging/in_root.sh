#!/bin/sh
# in_root.sh ROOT UID:GID PROGRAM [ARGS...]: runs PROGRAM inside the root file system ROOT (an
# mmdebstrap chroot, an unpacked image) as UID:GID, in a private mount namespace with the
# host's /proc, a read-only /sys, the few /dev nodes programs need and fresh /run and /tmp.
# The network namespace stays the host's, so that a test scrapes 127.0.0.1. exec all the way
# down: the PID the caller holds is PROGRAM's, so that stopping it stops PROGRAM.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 ROOT UID:GID PROGRAM [ARGS...]" >&2; exit 2; }
exec unshare --mount --propagation private sh -eu -c '
  root=$1 user=$2
  shift 2
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount -o remount,bind,ro "$root/sys"
  for node in null zero random urandom; do
    [ -e "$root/dev/$node" ] || touch "$root/dev/$node"
    mount --bind "/dev/$node" "$root/dev/$node"
  done
  mount -t tmpfs -o mode=0755 tmpfs "$root/run"
  mkdir -m 1777 "$root/run/rdmascope"
  mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
  exec chroot --userspec="$user" "$root" "$@"' in_root "$@"
