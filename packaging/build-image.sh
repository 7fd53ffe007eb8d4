#!/usr/bin/env bash
# Builds the OCI image dist/rdmascope-<version>.oci.tar without pulling any base image:
# mmdebstrap makes a minimal bookworm root file system from Debian's mirror with the .deb
# installed by apt, then buildah commits it FROM scratch (storage driver vfs, isolation
# chroot: no daemon, no overlay, no user namespace needed). Runs as root.
#
#   packaging/build-image.sh [DEB]     (default: DIST/rdmascope_<version>_<arch>.deb, made by
#                                       packaging/build-deb.sh)
# Environment: RDMASCOPE_DIST (default dist/), RDMASCOPE_MIRROR (default
# http://deb.debian.org/debian, and its -security), RDMASCOPE_IMAGE_WORKDIR.
#
# The image runs as the package's system user `rdmascope` (numeric, so that Kubernetes'
# runAsNonRoot can verify it) with the entrypoint `rdmascope serve`; arguments are flags.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^project(rdmascope VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
dist=$(realpath -m "${RDMASCOPE_DIST:-$root/dist}")
deb=$(realpath -m "${1:-$dist/rdmascope_${version}_${arch}.deb}")
work=${RDMASCOPE_IMAGE_WORKDIR:-$root/build/packaging/image}
mirror=${RDMASCOPE_MIRROR:-http://deb.debian.org/debian}
image=$dist/rdmascope-$version.oci.tar

[[ -f "$deb" ]] || { echo "build-image: no $deb (run packaging/build-deb.sh)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "build-image: run as root (mmdebstrap, buildah)" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work" "$dist"

# 1. The root file system: Debian's Essential:yes packages (no apt: apt runs outside, in
#    mmdebstrap, to resolve the .deb's dependencies), the package's run-time dependencies,
#    systemd's standalone sysusers/tmpfiles (the package's postinst creates its user with
#    them). Documentation, manuals and locales removed (copyright files stay).
# file-mirror-automount: dpkg runs chrooted and must see the .deb (mmdebstrap(1)).
mmdebstrap --variant=essential --mode=root --format=tar \
  --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
  --include=systemd-standalone-sysusers,systemd-standalone-tmpfiles \
  --include="$deb" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook='find "$1"/usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete' \
  --customize-hook='find "$1"/usr/share/doc -mindepth 1 -type d -empty -delete' \
  --customize-hook='rm -rf "$1"/usr/share/man/* "$1"/usr/share/locale/* "$1"/usr/share/info/*' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
  --customize-hook="chroot \"\$1\" id -u rdmascope > '$work/uid'" \
  --customize-hook="chroot \"\$1\" id -g rdmascope > '$work/gid'" \
  bookworm "$work/rootfs.tar" \
  "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
  "deb ${mirror%/debian}/debian-security bookworm-security main"
uid=$(cat "$work/uid")
gid=$(cat "$work/gid")
[[ "$uid" =~ ^[1-9][0-9]*$ ]] || { echo "build-image: no rdmascope user in the image" >&2; exit 1; }

# 2. The image: FROM scratch, one layer, with buildah's own storage under build/.
buildah_() {
  buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"
}
export BUILDAH_ISOLATION=chroot
ctr=$(buildah_ from scratch)
trap 'buildah_ rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah_ add "$ctr" "$work/rootfs.tar" /
buildah_ config \
  --entrypoint '["/usr/bin/rdmascope", "serve"]' --cmd '' \
  --user "$uid:$gid" --port 9879/tcp --workingdir / \
  --label org.opencontainers.image.title=rdmascope \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.description="Prometheus exporter for RDMA hosts" \
  "$ctr"
rm -f "$image"
buildah_ commit --format oci --squash "$ctr" "oci-archive:$image:rdmascope:$version"
echo "build-image: $image (user $uid:$gid)"
