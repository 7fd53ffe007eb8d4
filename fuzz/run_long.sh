#!/usr/bin/env bash
# Long libFuzzer runs toward issue #18's 10 million executions per target (docs/testing.md,
# "Fuzzing"): each target in turn, niced, from a copy of its corpus, until -runs or SECONDS;
# then what the run found that adds coverage is merged back into fuzz/corpus/<target>
# (-merge=1: only inputs with new features, so the corpus stays small). A crash stops that
# target; its reproducer is left in BUILD_DIR/crashes/<target>/.
#   run_long.sh SOURCE_DIR BUILD_DIR SECONDS RUNS TARGET...
# NICE (default 19) sets the fuzzer's niceness: 0 on a machine given over to the run.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
nice=${NICE:-19}
src=$1 build=$2 seconds=$3 runs=$4
shift 4
for t in "$@"; do
  work=$build/long/$t
  fuzz_prepare "$src" "$t" "$work" "$build/crashes/$t"
  echo "== $t: $(date -u +%FT%TZ) up to ${seconds}s, $runs runs"
  nice -n "$nice" "$build/fuzz/${t}_fuzzer" "$work/corpus" "${fuzz_dict[@]}" "${fuzz_max_len[@]}" \
    "${fuzz_schedule[@]}" -runs="$runs" -max_total_time="$seconds" "${fuzz_common[@]}" \
    >"$work/log" 2>&1
  echo "exit $?"
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|Done [0-9]+ runs)' \
    "$work/log"
  nice -n "$nice" "$build/fuzz/${t}_fuzzer" -merge=1 "${fuzz_max_len[@]}" "$src/fuzz/corpus/$t" \
    "$work/corpus" >"$work/merge.log" 2>&1 && grep -E 'MERGE-OUTER: [0-9]+ new files' "$work/merge.log"
done
