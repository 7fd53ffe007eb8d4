#!/bin/busybox sh
# PID 1 of the lab guest: mounts, loads the RDMA stack, brings up rxe0 on the virtio NIC,
# then runs the scenario named on the kernel command line (rdmascope.scenario=NAME; "shell"
# gives an interactive shell on the console) and powers off.
/bin/busybox --install -s /bin
export PATH=/usr/bin:/usr/sbin:/bin:/sbin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts

lab_fail() { echo "@@@LAB-ERROR $*"; poweroff -f; }

while read -r module; do
  insmod "/lib/modules/$module.ko" || lab_fail "insmod $module"
done < /lib/modules/order

ip link set lo up
ip link set eth0 up || lab_fail "no eth0"
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
rdma link add rxe0 type rxe netdev eth0 || lab_fail "rdma link add rxe0"
# The port turns ACTIVE shortly after the link is added.
for i in $(seq 50); do
  grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null && break
  sleep 0.1
done

scenario=$(sed -n 's/.*rdmascope\.scenario=\([^ ]*\).*/\1/p' /proc/cmdline)
echo "@@@LAB-READY scenario=$scenario kernel=$(uname -r)"
if [ "$scenario" = shell ]; then
  setsid cttyhack sh
else
  sh "/scenarios/$scenario.sh"
  echo "@@@LAB-EXIT $?"
fi
poweroff -f
