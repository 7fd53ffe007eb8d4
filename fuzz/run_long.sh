#!/usr/bin/env bash
# Long libFuzzer runs toward issue #18's 10 million executions per target (docs/testing.md,
# "Fuzzing"): each target in turn, niced, from a copy of its corpus, until -runs or SECONDS;
# then what the run found that adds coverage is merged back into fuzz/corpus/<target>
# (-merge=1: only inputs with new features, so the corpus stays small). A crash stops that
# target; its reproducer is left in BUILD_DIR/crashes/<target>/.
#   run_long.sh SOURCE_DIR BUILD_DIR SECONDS RUNS TARGET...
# NICE (default 19) sets the fuzzer's niceness: 0 on a machine given over to the run.
set -uo pipefail
nice=${NICE:-19}
src=$1 build=$2 seconds=$3 runs=$4
shift 4
for t in "$@"; do
  work=$build/long/$t
  rm -rf "$work" && mkdir -p "$work/corpus" "$build/crashes/$t"
  cp -r "$src/fuzz/corpus/$t/." "$work/corpus/"
  dict=()
  [[ -f $src/fuzz/$t.dict ]] && dict=(-dict="$src/fuzz/$t.dict")
  max_len=()
  [[ $t == occupancy ]] && max_len=(-max_len=8192)  # the sparse form (occupancy_fuzzer.cc)
  # web_config: with entropic scheduling, libFuzzer's UpdateFeatureFrequency took 57% of the
  # time (yaml-cpp's many features); without it the time goes to the parser.
  schedule=()
  [[ $t == web_config ]] && schedule=(-entropic=0)
  echo "== $t: $(date -u +%FT%TZ) up to ${seconds}s, $runs runs"
  nice -n "$nice" "$build/fuzz/${t}_fuzzer" "$work/corpus" "${dict[@]}" "${max_len[@]}" "${schedule[@]}" \
    -runs="$runs" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$build/crashes/$t/" -print_final_stats=1 >"$work/log" 2>&1
  echo "exit $?"
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|Done [0-9]+ runs)' \
    "$work/log"
  nice -n "$nice" "$build/fuzz/${t}_fuzzer" -merge=1 "${max_len[@]}" "$src/fuzz/corpus/$t" \
    "$work/corpus" >"$work/merge.log" 2>&1 && grep -E 'MERGE-OUTER: [0-9]+ new files' "$work/merge.log"
done
