# counters: exported hw_counters equal the sysfs files read right after the scrape, before and
# after a known amount of real RC traffic (ibv_rc_pingpong over rxe0).
. /scenarios/lib.sh
start_exporter || exit 1
HW=/sys/class/infiniband/rxe0/ports/1/hw_counters

block scrape_before scrape
block sysfs_before dump_dir $HW

# Server and client on the same rxe device; TCP on loopback only exchanges QP numbers.
ibv_rc_pingpong -d rxe0 -g 1 -n 1000 -s 512 >/tmp/server.out 2>&1 &
server=$!
block client client $server ibv_rc_pingpong -d rxe0 -g 1 -n 1000 -s 512 127.0.0.1
wait $server
block server cat /tmp/server.out

block scrape_after scrape
block stats_eth0 dump_dir /sys/class/net/eth0/statistics
block sysfs_after dump_dir $HW
block exporter_log cat /tmp/rdmascope.log
