# alerting: Prometheus and Alertmanager on the host, with the project's rules (durations
# shortened for the test), scrape this guest; a program that leaks memory registrations makes
# RdmaMrLeak fire and reach Alertmanager, and the guest's real network configuration (eth0 at
# MTU 1500 carrying RoCE GIDs, active RDMA MTU 1024 below the port's 4096) fires the MTU alerts.
. /scenarios/lib.sh
start_exporter --collector.mr.leak-age=2s || exit 1
rm -f /tmp/leaker.ready
# 240 regions of 64 KiB, one every 500 ms: two minutes of steady growth.
mr_leaker rxe0 240 65536 /tmp/leaker.ready 500 &
leaker=$!
wait_file /tmp/leaker.ready
echo "@@@LEAKER-PID $leaker"
wait_for_host alerting 130
kill $leaker
block exporter_log cat /tmp/rdmascope.log
