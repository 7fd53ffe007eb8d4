# mr_start_churn (issue 27): the exporter started again and again while a program loops
# ibv_reg_mr/ibv_dereg_mr of one 8 KiB region (a registration cache churning). After each
# start the loop stops and the program registers and holds 25 regions: the exporter must
# count exactly 25, every time, whatever instant each probe went live. Killing the exporter
# detaches everything during the churn too: the attach/detach stress. The guest's kernel log
# is printed at the end for soft lockups, hung tasks and RCU stalls (the host reads it).
#
# rdmascope.start_path=kernel|uprobes (run_scenario.py --append): one path (default both);
# rdmascope.starts=N: starts per path (default 20).
. /scenarios/lib.sh
HOLD=25
SIZE=8192
PATHS=$(sed -n 's/.*rdmascope\.start_path=\([a-z][a-z]*\).*/\1/p' /proc/cmdline)
PATHS=${PATHS:-"kernel uprobes"}
STARTS=$(sed -n 's/.*rdmascope\.starts=\([0-9][0-9]*\).*/\1/p' /proc/cmdline)
STARTS=${STARTS:-20}
echo "@@@STARTS $STARTS"
dmesg -c >/dev/null  # the boot's messages: what follows is the test's

# value METRIC PID: the sample of METRIC for pid PID in /tmp/scrape, or "missing".
value() {
  v=$(grep "^$1{" /tmp/scrape | grep "pid=\"$2\"" | head -n 1 | sed 's/.* //')
  echo "${v:-missing}"
}

# Every start gets its own port, and the previous exporter is not waited for: its detach
# (fexit trampolines wait for RCU tasks on TCG) overlaps the next attach, more stress and
# less wall time. lib.sh's helpers use `i` as their loop variable: not ours.
serve_on() {
  rdmascope serve --web.listen-address=:$1 --collector.mr.tracking=$2 >/tmp/rdmascope.log 2>&1 &
  exporter=$!
  for try in $(seq 600); do
    wget -q -O /tmp/scrape http://127.0.0.1:$1/metrics 2>/dev/null && return 0
    sleep 0.1
  done
  cat /tmp/rdmascope.log
  echo "@@@LAB-ERROR rdmascope did not start on :$1"
  return 1
}
exporters=""
for path in $PATHS; do
  n=1
  while [ "$n" -le "$STARTS" ]; do
    port=$((9880 + n % 4))
    rm -f /tmp/churn.stop /tmp/churn.ready
    mr_churn rxe0 1 $HOLD $SIZE /tmp/churn.stop /tmp/churn.ready >/tmp/churn.out 2>&1 &
    churner=$!
    # The loop runs before, during and after the attach; the start is staggered a little
    # each time so that the attach meets the loop at another instant.
    sleep "$(printf '0.%03d' $((n * 37 % 400 + 50)))"
    t0=$(date +%s)
    serve_on $port $path || exit 1
    t1=$(date +%s)
    exporters="$exporters $exporter"
    sleep 0.3
    touch /tmp/churn.stop
    wait_file /tmp/churn.ready 60 || { cat /tmp/churn.out; echo "@@@LAB-ERROR churner never held"; }
    wget -q -O /tmp/scrape http://127.0.0.1:$port/metrics
    [ "$n" = 1 ] && block restrack_sample rdma res show mr
    # restrack names the registering thread, which has exited (mr_churn registers from a
    # pthread): no pid in the listing. Only the churner registers 8 KiB regions here.
    restrack=$(rdma res show mr | grep -c "mrlen $SIZE ")
    echo "@@@ITER path=$path i=$n pid=$churner start_s=$((t1 - t0)) restrack=$restrack" \
      "regions=$(value rdma_mr_outstanding_regions $churner)" \
      "bytes=$(value rdma_mr_outstanding_bytes $churner)" \
      "registrations=$(value rdma_mr_registrations_total $churner)" \
      "deregistrations=$(value rdma_mr_deregistrations_total $churner)" \
      "kernel_path=$(grep -c '^rdmascope_probe_attached{probe="mr_kernel"} 1' /tmp/scrape)"
    kill $exporter $churner
    wait $churner 2>/dev/null
    n=$((n + 1))
  done
done
for pid in $exporters; do wait $pid 2>/dev/null; done
block exporter_log cat /tmp/rdmascope.log
block kernel_log dmesg
