# workload: the cgroup shapes of a Kubernetes pod (systemd and cgroupfs drivers), a Slurm step
# (cgroup v2) and a systemd service, each with a program holding regions on rxe0 (issue 28).
# The MR and resources series of each program's pid join to the workload named by its
# rdma_process_workload_info. Default collectors: the kernel MR path, restrack, netlink.
. /scenarios/lib.sh
SIZES=65536,131072,4096
CG=/sys/fs/cgroup
mkdir -p $CG
grep -q " $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG || \
  echo "@@@LAB-ERROR cannot mount cgroup2"
# At the top of the guest's cgroup tree, where the kubelet, slurmstepd and systemd make them:
# the workload rules match a shape only there (issue 37: a delegated cgroup deeper down must
# not pass for a pod). The guest is the lab's own VM.
BASE=$CG
UID1=0c1e3f3a-2b6d-4f6a-9d3e-7a2b1c0d9e8f
UID2=5a6b7c8d-1111-2222-3333-444455556666
CID1=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
CID2=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
UID1_ESCAPED=$(echo $UID1 | tr - _)
# name relative-directory
SHAPES="k8s_systemd:kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$UID1_ESCAPED.slice/cri-containerd-$CID1.scope
k8s_cgroupfs:kubepods/besteffort/pod$UID2/$CID2
slurm:system.slice/slurmstepd.scope/job_4711/step_0/user/task_0
systemd:system.slice/rdma-storage.service"

for shape in $SHAPES; do
  name=${shape%%:*}; dir=$BASE/${shape#*:}
  mkdir -p $dir
  rm -f /tmp/$name.ready
  # The holder enters its cgroup before it execs, so every thread and region is in it.
  sh -c "echo \$\$ > $dir/cgroup.procs && exec mr_holder rxe0 $SIZES /tmp/$name.ready \
    /tmp/$name.step /tmp/$name.stepped 0 4096" >/tmp/$name.out 2>&1 &
  echo "@@@PID $name $!"
done
for shape in $SHAPES; do
  name=${shape%%:*}
  wait_file /tmp/$name.ready 30 || { cat /tmp/$name.out; echo "@@@LAB-ERROR $name not ready"; }
done
block cgroups sh -c "for p in \$(pidof mr_holder); do echo \$p \$(cat /proc/\$p/cgroup); done"

start_exporter || exit 1
exporter=$!
wait_metric 'rdma_process_workload_info{pid=' 30
block scrape scrape
kill $exporter
wait $exporter 2>/dev/null
kill $(pidof mr_holder) 2>/dev/null
