# verbs: CQ and SRQ sizing and asynchronous events from the verbs probes, on the guest's real
# libibverbs over rxe0; the CQ capacities are compared with `rdma res show cq`.
. /scenarios/lib.sh
start_exporter --collector.disable-defaults --collector.verbs --collector.resources \
  --collector.occupancy || exit 1
block probe sh -c "wget -q -O - http://127.0.0.1:9879/metrics | grep -E '^rdmascope_probe_(attached|links)'"

# A CQ of 16 entries fed by an RC QP of 64 send + 64 receive WRs.
cq_undersized rxe0 >/tmp/cq.out 2>&1 &
helper=$!
for i in $(seq 100); do grep -q READY /tmp/cq.out && break; sleep 0.1; done

# ibv_srq_pingpong's server, under the preload library: one SRQ shared by 16 QPs, all
# completing into one CQ; it posts its rx-depth (500) receives to the SRQ, then waits.
LD_PRELOAD=/usr/bin/librdmascope_preload.so ibv_srq_pingpong -d rxe0 -g 1 -p 18700 \
  >/tmp/srq.out 2>&1 &
srq=$!
sleep 2
echo "@@@SRQ-PID $srq"
block helper_ready cat /tmp/cq.out
block scrape_sizes scrape
block res_cq rdma -j res show cq
block res_srq rdma -j res show srq

# rxe reports its netdev going down and up as PORT_ERR then PORT_ACTIVE to every context.
ip link set eth0 down
sleep 1
ip link set eth0 up
sleep 2
block helper_events cat /tmp/cq.out
block scrape_events scrape

kill $srq $helper
wait $srq $helper 2>/dev/null
sleep 0.5
# A stats file of an exited process is served once (its final figures), then deleted: the
# second scrape after the exit is the one without the process.
block scrape_final scrape
block scrape_gone scrape
block stats_files ls /run/rdmascope
block exporter_log cat /tmp/rdmascope.log
