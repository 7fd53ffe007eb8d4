# port: what the exporter says of rxe0's port, GID table, netdev and MTUs, next to what the
# guest's sysfs, ibv_devinfo and iproute2 say. The guest shows the MTU pitfall for real:
# eth0 at MTU 1500, so RoCE runs with active MTU 1024 below the port's max 4096.
. /scenarios/lib.sh
start_exporter || exit 1
P=/sys/class/infiniband/rxe0/ports/1

# IPv6 autoconfiguration adds GIDs a few seconds after boot: wait until the table holds still.
gid_count() { cat $P/gids/* 2>/dev/null | grep -vc '^0000:0000:0000:0000:0000:0000:0000:0000$'; }
last=-1; stable=0
for i in $(seq 20); do
  now=$(gid_count)
  if [ "$now" = "$last" ]; then stable=$((stable + 1)); else stable=0; fi
  [ $stable -ge 3 ] && break
  last=$now; sleep 1
done

block scrape scrape
block port dump_dir $P
block netdev_mtu cat /sys/class/net/eth0/mtu
block gids sh -c "for g in $P/gids/*; do i=\$(basename \$g); \
  echo \"\$i \$(cat \$g) | \$(cat $P/gid_attrs/types/\$i 2>/dev/null) | \
\$(cat $P/gid_attrs/ndevs/\$i 2>/dev/null)\"; done"
block devinfo ibv_devinfo -v -d rxe0
block rdma_link rdma link show
