# doctor: `rdmascope doctor` on a real soft-RoCE host. (a) Under a running exporter, with an
# undersized CQ and a leaking program: the report from /doctor names both with their pid, and
# the MTU pitfall (eth0 1500, active MTU 1024). (b) Without an exporter: the same MTU findings,
# the history checks skipped with the reason. (c) eth0 MTU raised to 4200 before the rxe link
# is made: no MTU finding.
. /scenarios/lib.sh
COLLECTORS="--collector.disable-defaults --collector.rdma --collector.ethtool --collector.mr \
  --collector.verbs --collector.resources"
# shellcheck disable=SC2086  # word splitting of $COLLECTORS is meant
start_exporter $COLLECTORS --collector.mr.leak-age=5s || exit 1
exporter=$!

# After the exporter's first snapshot: a CQ of 16 entries fed by 128 WRs, and a program that
# leaks one 16 KiB region a second.
cq_undersized rxe0 >/tmp/cq.out 2>&1 &
cq=$!
rm -f /tmp/leaker.ready
mr_leaker rxe0 150 16384 /tmp/leaker.ready 1000 &
leaker=$!
for i in $(seq 100); do grep -q READY /tmp/cq.out && [ -e /tmp/leaker.ready ] && break; sleep 0.1; done
echo "@@@CQ-PID $cq"
echo "@@@LEAKER-PID $leaker"
block helper_ready cat /tmp/cq.out
# The exporter keeps a history snapshot a minute: wait for one that holds the leaker.
sleep 65
block doctor_exporter sh -c "rdmascope doctor --format json --exporter.timeout=60s 2>/tmp/a.err; echo \"@@@EXIT \$?\""
block doctor_exporter_log cat /tmp/a.err

# (b) No exporter: doctor collects itself (the default address refuses).
kill $exporter
wait $exporter 2>/dev/null
# shellcheck disable=SC2086
block doctor_local sh -c "rdmascope doctor --format json --window 2s $COLLECTORS 2>/tmp/b.err; echo \"@@@EXIT \$?\""
block doctor_local_log cat /tmp/b.err
kill $cq $leaker
wait $cq $leaker 2>/dev/null

# (c) A healthy MTU: eth0 at 4200 before rxe0 is made again (rxe takes its active MTU from the
# netdev's, minus the RoCE headers: 4096).
rdma link delete rxe0
ip link set eth0 mtu 4200
rdma link add rxe0 type rxe netdev eth0 || echo "@@@LAB-ERROR rdma link add rxe0"
for i in $(seq 100); do
  grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null && break
  sleep 0.1
done
block healthy_mtu sh -c "cat /sys/class/net/eth0/mtu; ibv_devinfo -d rxe0 | grep mtu"
# shellcheck disable=SC2086
block doctor_healthy sh -c "rdmascope doctor --exporter=none --format json --window 0s $COLLECTORS 2>/tmp/c.err; echo \"@@@EXIT \$?\""
block doctor_healthy_log cat /tmp/c.err
block exporter_log cat /tmp/rdmascope.log
