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
# Shell built-ins only: rxe0 has 1024 GID entries, and forking four programs for each took
# most of the scenario's 150 s under TCG on a loaded host (session 9's CI run timed out here).
# An unused entry's type and netdev do not read (EINVAL): left empty.
block gids sh -c "for g in $P/gids/*; do i=\${g##*/}; t=; n=; read -r gid < \$g; \
  read -r t 2>/dev/null < $P/gid_attrs/types/\$i; read -r n 2>/dev/null < $P/gid_attrs/ndevs/\$i; \
  echo \"\$i \$gid | \$t | \$n\"; done"
block devinfo ibv_devinfo -v -d rxe0
block rdma_link rdma link show
