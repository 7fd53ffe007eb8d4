# Sourced by run_long.sh and run_bounded.sh: how one libFuzzer target is run, whatever for long.
# fuzz_prepare SOURCE_DIR TARGET WORK_DIR CRASH_DIR copies the checked-in corpus into
# WORK_DIR/corpus (the fuzzer writes there, never into fuzz/corpus) and sets:
#   fuzz_dict      -dict=fuzz/TARGET.dict, if there is one
#   fuzz_max_len   the target's -max_len, if it needs one (also for -merge)
#   fuzz_schedule  the target's scheduling options
#   fuzz_common    limits and outputs every run has; crashes go to CRASH_DIR
fuzz_prepare() {
  local src=$1 target=$2 work=$3 crashes=$4
  rm -rf "$work" && mkdir -p "$work/corpus" "$crashes"
  cp -r "$src/fuzz/corpus/$target/." "$work/corpus/"
  fuzz_dict=()
  if [[ -f $src/fuzz/$target.dict ]]; then fuzz_dict=(-dict="$src/fuzz/$target.dict"); fi
  fuzz_max_len=()
  # occupancy: the sparse form (occupancy_fuzzer.cc) needs room.
  if [[ $target == occupancy ]]; then fuzz_max_len=(-max_len=8192); fi
  # web_config: with entropic scheduling, libFuzzer's UpdateFeatureFrequency took 57% of the
  # time (yaml-cpp's many features); without it the time goes to the parser.
  fuzz_schedule=()
  if [[ $target == web_config ]]; then fuzz_schedule=(-entropic=0); fi
  fuzz_common=(-rss_limit_mb=2048 -timeout=10 -artifact_prefix="$crashes/" -print_final_stats=1)
  # Leaks of the libraries' own, each explained in the file.
  export LSAN_OPTIONS="suppressions=$src/fuzz/lsan.supp:print_suppressions=0"
}
