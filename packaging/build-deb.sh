#!/usr/bin/env bash
# Builds the Debian package: dist/rdmascope_<version>_amd64.deb (and its -dbgsym .deb).
#
#   packaging/build-deb.sh [DIST_DIR]
#
# debhelper with CMake, the Debian way (docs/packaging.md): packaging/debian/ is copied into a
# clean copy of the working tree under build/packaging/deb/ and built there with
# `dpkg-buildpackage -b` (dpkg-buildflags: hardening, -O2), so that the source tree gets no
# debian/ directory and dpkg-buildpackage writes nothing next to the repository.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dist=$(realpath -m "${1:-$root/dist}")
work=${RDMASCOPE_DEB_WORKDIR:-$root/build/packaging/deb}

version=$(sed -n 's/^project(rdmascope VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
deb_version=$(dpkg-parsechangelog -l "$root/packaging/debian/changelog" -S Version)
if [[ "$version" != "$deb_version" ]]; then
  echo "build-deb: CMakeLists.txt says $version, packaging/debian/changelog $deb_version:" \
       "add a changelog entry (dch -v $version)" >&2
  exit 1
fi

src=$work/rdmascope-$version
rm -rf "$work"
mkdir -p "$src" "$dist"
# The files git tracks or would add (uncommitted work included, build outputs excluded).
if [[ "$(git -C "$root" rev-parse --show-toplevel 2>/dev/null)" == "$root" ]]; then
  revision=$(git -C "$root" rev-parse --short=12 HEAD)
  git -C "$root" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -f "$root/$f" ]] && printf '%s\0' "$f"; done |
    tar -C "$root" --null -T - -cf - | tar -C "$src" -xf -
else
  revision=unknown
  tar -C "$root" --exclude=./build --exclude=./dist --exclude=./.git -cf - . | tar -C "$src" -xf -
fi
rm -rf "$src/debian"
cp -a "$root/packaging/debian" "$src/debian"

# debhelper (compat 13) points HOME at a scratch directory while it builds, and ccache keeps its
# cache under HOME: name the caller's cache, so that building the same sources again (CI's
# clone after the developer's tree) compiles only what changed (CMakeLists.txt: RDMASCOPE_CCACHE).
if command -v ccache >/dev/null 2>&1 && [[ -z "${CCACHE_DIR:-}" ]]; then
  CCACHE_DIR=$(ccache -k cache_dir) && export CCACHE_DIR
fi

echo "build-deb: building rdmascope $version (revision $revision) in $src"
(cd "$src" && RDMASCOPE_REVISION=$revision \
   DEB_BUILD_OPTIONS="parallel=${RDMASCOPE_JOBS:-2} ${DEB_BUILD_OPTIONS:-}" \
   dpkg-buildpackage -b -us -uc)

arch=$(dpkg-architecture -qDEB_HOST_ARCH)
for deb in "$work/rdmascope_${version}_${arch}.deb" "$work/rdmascope-dbgsym_${version}_${arch}.deb"; do
  [[ -f "$deb" ]] && cp "$deb" "$dist/"
done
echo "build-deb: $dist/rdmascope_${version}_${arch}.deb"
