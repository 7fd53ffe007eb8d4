#!/usr/bin/env bash
# A libc++ build of yaml-cpp for the libFuzzer build's web_config target (fuzz/README.md):
# Debian's libyaml-cpp is built against libstdc++, whose types cannot cross into libc++ code.
# Builds the version Debian ships (0.7.0) with clang-16, -stdlib=libc++ and the fuzzing build's
# instrumentation (ASan, UBSan, coverage), static, into PREFIX:
#   build_yamlcpp_libcxx.sh SOURCE PREFIX
# SOURCE: a yaml-cpp source tree (e.g. `apt-get source yaml-cpp`), a .tar.gz of one, or a git
# repository of it (its tag yaml-cpp-0.7.0 is used). Then configure the fuzzing build with
# -DRDMASCOPE_FUZZ_YAMLCPP_LIBCXX=PREFIX.
set -euo pipefail
src=$1 prefix=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -f $src ]]; then
  tar -xf "$src" -C "$work" --strip-components=1
elif git -C "$src" rev-parse --verify -q yaml-cpp-0.7.0 >/dev/null 2>&1; then
  git -C "$src" archive yaml-cpp-0.7.0 | tar -x -C "$work"
else
  cp -r "$src/." "$work/"
fi
flags="-stdlib=libc++ -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -g -O1"
CC=clang-16 CXX=clang++-16 cmake -S "$work" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_INSTALL_PREFIX="$prefix" -DYAML_BUILD_SHARED_LIBS=OFF \
  -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF -DYAML_CPP_BUILD_CONTRIB=OFF \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON >/dev/null
cmake --build "$work/build" -j"${JOBS:-2}"
cmake --install "$work/build" >/dev/null
echo "yaml-cpp (libc++) installed in $prefix"
