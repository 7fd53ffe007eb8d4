# mr_dwarf (issue 27): leak call sites of a program built without frame pointers, through
# Debian's libibverbs (no frame pointers either), on both MR paths. mr_leaker_nofp is
# tests/lab/helpers/mr_leaker.c built -O2 -fomit-frame-pointer, no -g, not stripped: it
# leaks 6 x 64 KiB from leak_one_region, called from main. /debug/mr/stacks must name both
# ("unwind": "dwarf"); the kernel path's stack starts in libc's ioctl, inside the system call.
# Then `rdmascope profile -- mr_leaker_nofp` with its default tracking: pprof and folded
# stacks name the leaking function.
. /scenarios/lib.sh

for path in kernel uprobes; do
  start_exporter --collector.mr.tracking=$path || exit 1
  exporter=$!
  rm -f /tmp/nofp.ready
  mr_leaker_nofp rxe0 6 65536 /tmp/nofp.ready >/tmp/nofp.out 2>&1 &
  leaker=$!
  wait_file /tmp/nofp.ready 30 || { cat /tmp/nofp.out; echo "@@@LAB-ERROR leaker never ready"; }
  echo "@@@LEAKER-$path $leaker"
  scrape >/dev/null  # a collection takes the stack samples in
  block "stacks_$path" wget -q -O - "http://127.0.0.1:9879/debug/mr/stacks?pid=$leaker"
  block "figures_$path" sh -c "wget -q -O - http://127.0.0.1:9879/metrics | grep -E '^(rdmascope_mr_stack|rdmascope_probe_attached)'"
  kill $leaker
  wait $leaker 2>/dev/null
  kill $exporter
  wait $exporter 2>/dev/null
done

# For the record (docs/benchmarks.md): the kernel path with frame pointers alone (what it did
# before: --collector.mr.stack-bytes=0) on the same program, and DWARF on mr_leaker, which is
# built with frame pointers.
# run_one NAME EXPORTER_ARGS... -- PROGRAM: /debug/mr/stacks of PROGRAM's 6 leaks as block NAME.
run_one() {
  name=$1; shift
  args=""
  while [ "$1" != "--" ]; do args="$args $1"; shift; done
  shift
  # shellcheck disable=SC2086
  start_exporter $args || exit 1
  exporter=$!
  rm -f /tmp/one.ready
  "$1" rxe0 6 65536 /tmp/one.ready >/tmp/one.out 2>&1 &
  leaker=$!
  wait_file /tmp/one.ready 30
  scrape >/dev/null
  block "$name" wget -q -O - "http://127.0.0.1:9879/debug/mr/stacks?pid=$leaker"
  kill $leaker
  wait $leaker 2>/dev/null
  kill $exporter
  wait $exporter 2>/dev/null
}
run_one stacks_kernel_fp_only --collector.mr.tracking=kernel --collector.mr.stack-bytes=0 -- mr_leaker_nofp
run_one stacks_kernel_fp_program --collector.mr.tracking=kernel -- mr_leaker

rm -f /tmp/nofp.ready
rdmascope profile --collector.disable-defaults --collector.mr --interval 250ms --duration 60s \
  --output /tmp/prof_nofp -- mr_leaker_nofp rxe0 6 65536 /tmp/nofp.ready >/tmp/prof.out 2>/tmp/prof.err &
profile=$!
wait_file /tmp/nofp.ready 30
sleep 2
kill "$(pidof mr_leaker_nofp)"
wait $profile
echo "@@@EXIT-PROFILE $?"
block profile_log cat /tmp/prof.err
block profile_summary cat /tmp/prof.out
block profile_files ls -la /tmp/prof_nofp
block profile_folded cat /tmp/prof_nofp/outstanding_bytes.folded
block profile_pprof sh -c 'zcat /tmp/prof_nofp/profile.pb.gz | strings'
