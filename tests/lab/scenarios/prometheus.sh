# prometheus: a real Prometheus on the host scrapes the guest's exporter through QEMU's hostfwd,
# with the project's rules loaded. The guest serves until the host says it is done.
. /scenarios/lib.sh
start_exporter || exit 1
wait_for_host prometheus 100
block exporter_log cat /tmp/rdmascope.log
