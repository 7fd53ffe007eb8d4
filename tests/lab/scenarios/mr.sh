# mr: MR-leak tracking with eBPF uprobes on the guest's real libibverbs, over rxe0.
. /scenarios/lib.sh
# The probes attach while 4 threads loop ibv_reg_mr/ibv_dereg_mr: every thread must still be
# counted afterwards (a call caught between the attachment of its entry and return probes
# used to blind its thread for good).
rm -f /tmp/churn.stop /tmp/churn.ready
mr_churn rxe0 4 10 65536 /tmp/churn.stop /tmp/churn.ready &
churn=$!
sleep 1
# The uprobe path (the fallback): its first stack frame is the caller of ibv_reg_mr, which
# the kernel path (mr_kernel.sh) cannot give without frame pointers in libibverbs.
start_exporter --collector.mr.tracking=uprobes || exit 1
scrape >/dev/null
sleep 1
touch /tmp/churn.stop
wait_file /tmp/churn.ready 30
echo "@@@CHURN-PID $churn"
block scrape_churn scrape
kill $churn
wait $churn 2>/dev/null
block probe sh -c "wget -q -O - http://127.0.0.1:9879/metrics | grep -E '^rdmascope_probe_(attached|links)'"

# ibv_rc_pingpong registers its buffer before it waits for the client: scrape while it waits.
ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 512 >/tmp/server.out 2>&1 &
server=$!
wait_metric "^rdma_mr_outstanding_regions{pid=\"$server\""
block scrape_pingpong scrape
echo "@@@PINGPONG-PID $server"
client $server ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 512 127.0.0.1 >/tmp/client.out
wait $server

# perftest registers its buffers once connected and deregisters them before exiting: its
# registrations show in the per-command histograms, which outlive the processes.
ib_write_bw -d rxe0 -x 1 -n 200 -s 65536 >/tmp/bw_server.out 2>&1 &
bw_server=$!
block write_bw_client client $bw_server ib_write_bw -d rxe0 -x 1 -n 200 -s 65536 127.0.0.1
wait $bw_server
block write_bw_server cat /tmp/bw_server.out

# A program that leaks 12 regions of 64 KiB.
rm -f /tmp/leaker.ready
mr_leaker rxe0 12 65536 /tmp/leaker.ready &
leaker=$!
wait_file /tmp/leaker.ready
echo "@@@LEAKER-PID $leaker"
block scrape_leak scrape
block stacks wget -q -O - "http://127.0.0.1:9879/debug/mr/stacks?pid=$leaker"
kill $leaker
wait $leaker 2>/dev/null
sleep 0.5
block scrape_after_exit scrape
block exporter_log cat /tmp/rdmascope.log
