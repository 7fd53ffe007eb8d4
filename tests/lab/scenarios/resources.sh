# resources: RDMA objects per device and process from RDMA netlink, compared with what
# `rdma res show` prints at the same moment, over rxe0.
. /scenarios/lib.sh
start_exporter --collector.disable-defaults --collector.resources || exit 1

# While it waits for its client the pingpong server holds a context, PD, CQ, QP (RC, INIT) and
# MR; ib_write_bw holds its context only (it allocates the rest once connected). Distinct TCP
# ports: both default to 18515.
ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 512 >/tmp/pp.out 2>&1 &
pingpong=$!
ib_write_bw -d rxe0 -x 1 -n 200 -s 65536 -p 18600 >/tmp/bw.out 2>&1 &
write_bw=$!
sleep 2
echo "@@@PIDS $pingpong $write_bw"
block scrape_before scrape
for kind in summary qp cq mr pd ctx srq cm_id; do
  if [ "$kind" = summary ]; then block "res_$kind" rdma -j res show
  else block "res_$kind" rdma -j res show "$kind"; fi
done
block scrape_after scrape

client $pingpong ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 512 127.0.0.1 >/dev/null
client $write_bw ib_write_bw -d rxe0 -x 1 -n 200 -s 65536 -p 18600 127.0.0.1 >/dev/null
wait $pingpong $write_bw
block scrape_gone scrape
block exporter_log cat /tmp/rdmascope.log
