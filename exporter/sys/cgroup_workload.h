// Which workload a process runs for, read from its cgroup (/proc/PID/cgroup): the Kubernetes
// pod and container, the Slurm job and step, the systemd unit. A pid alone does not reach the
// owner of a leak on a shared cluster; these do, and they are what the kubelet, the container
// runtime, slurmd and systemd name the process by.
//
// The shapes are kept as data (kComponentRules in the .cc, one row per form), as cAdvisor keeps
// its container name parsing per runtime and cgroup driver:
//   Kubernetes, systemd driver: /kubepods.slice/kubepods-burstable.slice/
//     kubepods-burstable-pod<UID with _>.slice/cri-containerd-<ID>.scope (crio-, docker-)
//   Kubernetes, cgroupfs driver: /kubepods/burstable/pod<UID>/<ID> (crio-<ID> for CRI-O)
//   Slurm, cgroup v2: /system.slice/slurmstepd.scope/job_<J>/step_<S>/user/task_<T>
//   Slurm, cgroup v1: /slurm/uid_<U>/job_<J>/step_<S>/task_<T> (slurm_<NODE> with several slurmd)
//   systemd: the innermost *.service or *.scope that is not a container's scope.
// Each form counts only at its place from the top of the cgroup tree (a pod slice under
// kubepods.slice, a job under slurmstepd.scope under system.slice...), never at any depth:
// users have delegated cgroups (user@UID.service) where they can name subgroups anything,
// "kubepods-pod<another pod's UID>.slice" included (issue 37).
#pragma once

#include <string>
#include <string_view>

namespace rdmascope::sys {

struct Workload {
  // The pod's UID with dashes, as the API server has it (systemd slice names carry it with
  // underscores: systemd reserves "-" for the slice hierarchy).
  std::string pod_uid;
  // kube-state-metrics' form, "<runtime>://<64 hex digits>" (containerd, cri-o, docker), or
  // the bare ID where the cgroup does not say which runtime made it (the cgroupfs driver).
  std::string container_id;
  std::string slurm_job_id;
  std::string slurm_step_id;  // a number, or batch, extern, interactive
  std::string systemd_unit;   // "nginx.service", "session-3.scope", "slurmstepd.scope"

  bool operator==(const Workload&) const = default;
};

// The workload of one cgroup path, e.g. "/kubepods.slice/.../cri-containerd-<ID>.scope". Paths
// seen from another cgroup namespace ("/../../kubepods.slice/...") and the " (deleted)" mark of
// a removed cgroup v2 directory are understood.
Workload WorkloadOfCgroupPath(std::string_view path);

// The workload of a process from its /proc/PID/cgroup ("ID:CONTROLLERS:PATH" per line): each
// field from the first line that has it, the unified hierarchy ("0::") first, then systemd's
// named v1 hierarchy ("name=systemd"), then the v1 controllers in the file's order (a hybrid
// host with the kubelet's cgroupfs driver has the pod only in the v1 controllers' paths).
Workload WorkloadOfProcCgroup(std::string_view content);

}  // namespace rdmascope::sys
