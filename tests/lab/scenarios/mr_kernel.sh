# mr_kernel: MR tracking from fentry/fexit on the guest kernel's uverbs/ib_core (Debian 6.1,
# BTF for the modules), over rxe0. A program loading its own copy of libibverbs (which the
# uprobes cannot see) is counted exactly, and cleaned up at its exit; then, in one run, the
# cost of a reg+dereg pair with no tracking, with uprobes and with the kernel path.
. /scenarios/lib.sh
PAIRS=2000

# A private copy of libibverbs, as a container or vendored rdma-core would have it.
mkdir -p /opt/x
for dir in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu; do
  [ -e $dir/libibverbs.so.1 ] && cp -L $dir/libibverbs.so.1 /opt/x/libibverbs.so.1 && break
done

# load NAME PAIRS FAILURES LEAKS [LD_LIBRARY_PATH]: mr_kernel_load in the background until its
# ready file appears; its pid in $load_pid, its output in /tmp/NAME.out.
load() {
  rm -f "/tmp/$1.ready"
  LD_LIBRARY_PATH=$5 mr_kernel_load rxe0 "$2" 65536 "$3" "$4" "/tmp/$1.ready" >"/tmp/$1.out" 2>&1 &
  load_pid=$!
  wait_file "/tmp/$1.ready" 60 || { cat "/tmp/$1.out"; echo "@@@LAB-ERROR $1 never got ready"; }
}
finish() { kill "$1"; wait "$1" 2>/dev/null; }
stop_exporter() { kill "$exporter"; wait "$exporter" 2>/dev/null; }
# Run time and run count of the exporter's BPF programs (kernel.bpf_stats_enabled), from the
# fdinfo of their file descriptors.
bpf_stats() { cat /proc/$exporter/fdinfo/* 2>/dev/null | grep -E '^(prog_type|run_time_ns|run_cnt)'; }
# rdmascope.bpf_stats=0 on the kernel command line (run_scenario.py --append): time the pairs
# without the statistics, which add two clock reads to every program run.
grep -q 'rdmascope.bpf_stats=0' /proc/cmdline && echo 0 >/proc/sys/kernel/bpf_stats_enabled ||
  echo 1 >/proc/sys/kernel/bpf_stats_enabled

# 1. No tracking.
load bench_none $PAIRS 0 0
finish $load_pid
block bench_none cat /tmp/bench_none.out

# 2. Uprobes (forced): they see the pairs through the system libibverbs, not the copy.
start_exporter --collector.mr.tracking=uprobes || exit 1
exporter=$!
load bench_uprobes $PAIRS 0 0
block scrape_uprobes_bench scrape
echo "@@@UPROBES-BENCH-PID $load_pid"
finish $load_pid
block bench_uprobes cat /tmp/bench_uprobes.out
block bpf_stats_uprobes bpf_stats
load copy_uprobes 5 0 3 /opt/x
echo "@@@UPROBES-COPY-PID $load_pid"
block scrape_uprobes_copy scrape
finish $load_pid
stop_exporter
block log_uprobes cat /tmp/rdmascope.log

# 3. Auto: the kernel path, chosen because ib_core has BTF and the trampolines attach. Debug
# log: the stacks cleanup's "mr stacks cleanup" lines (counts per walk of its maps).
start_exporter --log.level=debug || exit 1
exporter=$!
load bench_kernel $PAIRS 0 0
block scrape_kernel_bench scrape
echo "@@@KERNEL-BENCH-PID $load_pid"
finish $load_pid
block bench_kernel cat /tmp/bench_kernel.out
block bpf_stats_kernel bpf_stats

# The copy of libibverbs: 7 pairs, 2 registrations the kernel rejects, 12 x 64 KiB leaked.
load copy_kernel 7 2 12 /opt/x
leaker=$load_pid
echo "@@@KERNEL-COPY-PID $leaker"
block maps_copy grep libibverbs "/proc/$leaker/maps"
block scrape_kernel_copy scrape
block stacks wget -q -O - "http://127.0.0.1:9879/debug/mr/stacks?pid=$leaker"
finish $leaker
exit_lines=$(wc -l </tmp/rdmascope.log)
sleep 0.5
block scrape_kernel_after_exit scrape
# The stacks cleanup (exporter/bpf/stack_gc.cc, the kernel path's kcalls/kderegs read as
# in-flight references): an id is deleted at the second walk that finds it unreferenced, and
# walks are at least 5 s apart (StackGc min_gap, more after a slow walk). Scrapes every 2 s
# (no process registers meanwhile) until a walk after the exit leaves no candidate, 90 s at most.
for i in $(seq 45); do
  tail -n +$((exit_lines + 1)) /tmp/rdmascope.log | grep 'msg="mr stacks cleanup"' | tail -n 1 |
    grep -q ' candidates=0' && break
  sleep 2
  scrape >/dev/null
done
block log_kernel cat /tmp/rdmascope.log
block log_kernel_after_exit tail -n +$((exit_lines + 1)) /tmp/rdmascope.log
stop_exporter

# Both paths again without the stack copies for DWARF unwinding (issue 27): their cost.
for path in uprobes kernel; do
  start_exporter --collector.mr.tracking=$path --collector.mr.stack-bytes=0 || exit 1
  exporter=$!
  load bench_${path}_nostack $PAIRS 0 0
  finish $load_pid
  block bench_${path}_nostack cat /tmp/bench_${path}_nostack.out
  stop_exporter
done

# No tracking again: how much the untracked figure itself moves within the run.
load bench_none_again $PAIRS 0 0
finish $load_pid
block bench_none_again cat /tmp/bench_none_again.out
