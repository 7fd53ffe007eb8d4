#!/usr/bin/env bash
# ctest fuzz_libfuzzer_bounded: builds the libFuzzer targets with clang-16 + libc++ in their own
# build dir (RDMASCOPE_FUZZ=ON) and runs each for SECONDS from a copy of its seed corpus
# (the checked-in corpus is never written to). Exit 77 (skipped) without clang-16 or libc++-16.
# A crash fails the test; its reproducer is left in BUILD_DIR/crashes/<target>/.
#   run_bounded.sh SOURCE_DIR BUILD_DIR SECONDS [TARGET...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
src=$1 build=$2 seconds=$3
shift 3
if ! command -v clang++-16 >/dev/null || [[ ! -e /usr/lib/llvm-16/include/c++/v1/expected ]] ||
   ! ls /usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz: clang-16, libc++-16-dev and libclang-rt-16-dev are needed (install-deps.sh)"
  exit 77
fi
# ccache, where installed, comes from CMakeLists.txt (RDMASCOPE_CCACHE): keyed relative to the
# source tree, so a clone elsewhere (CI's) reuses what another clone compiled.
CC=clang-16 CXX=clang++-16 cmake -S "$src" -B "$build" -DRDMASCOPE_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(cd "$build/fuzz" && ls -- *_fuzzer | sed 's/_fuzzer$//')
fi
status=0
for t in "${targets[@]}"; do
  work=$build/runs/$t
  fuzz_prepare "$src" "$t" "$work" "$build/crashes/$t"
  echo "== $t: ${seconds}s"
  if ! "$build/fuzz/${t}_fuzzer" "$work/corpus" "${fuzz_dict[@]}" "${fuzz_max_len[@]}" \
       "${fuzz_schedule[@]}" -max_total_time="$seconds" "${fuzz_common[@]}" >"$work/log" 2>&1; then
    status=1
    echo "!! $t failed: reproducer in $build/crashes/$t/"
    tail -n 60 "$work/log"
  fi
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|#[0-9]+ *DONE)' \
    "$work/log" || true
done
exit $status
