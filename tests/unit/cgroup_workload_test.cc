// The cgroup rules (sys/cgroup_workload.*) over paths as the kubelet, containerd, CRI-O,
// cri-dockerd, Slurm and systemd make them, on cgroup v2 and v1, seen from the host's and
// from another cgroup namespace, and paths that only look like them.
#include "sys/cgroup_workload.h"

#include <gtest/gtest.h>

#include <string>

namespace rdmascope::sys {
namespace {

const std::string kId(64, 'a');  // a container ID: 64 lower-case hex digits
const std::string kId2 = std::string(63, 'b') + "c";
constexpr const char* kUid = "0c1e3f3a-2b6d-4f6a-9d3e-7a2b1c0d9e8f";
constexpr const char* kUidEscaped = "0c1e3f3a_2b6d_4f6a_9d3e_7a2b1c0d9e8f";

struct Case {
  std::string name;
  std::string path;
  Workload want;
};

class CgroupPath : public ::testing::TestWithParam<Case> {};

TEST_P(CgroupPath, NamesItsWorkload) {
  EXPECT_EQ(WorkloadOfCgroupPath(GetParam().path), GetParam().want) << GetParam().path;
}

std::string PrintName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

const std::string kPodSlice = std::string(
                                  "/kubepods.slice/kubepods-burstable.slice/"
                                  "kubepods-burstable-pod") +
                              kUidEscaped + ".slice";

INSTANTIATE_TEST_SUITE_P(
    RealWorld, CgroupPath,
    ::testing::Values(
        // Kubernetes, systemd driver (cgroup v2, and the v1 controllers' paths alike).
        Case{"KubepodsSystemdContainerd",
             kPodSlice + "/cri-containerd-" + kId + ".scope",
             {.pod_uid = kUid, .container_id = "containerd://" + kId}},
        Case{"KubepodsSystemdCrio",
             kPodSlice + "/crio-" + kId + ".scope",
             {.pod_uid = kUid, .container_id = "cri-o://" + kId}},
        Case{"KubepodsSystemdDocker",
             kPodSlice + "/docker-" + kId + ".scope",
             {.pod_uid = kUid, .container_id = "docker://" + kId}},
        Case{"KubepodsSystemdGuaranteed",
             std::string("/kubepods.slice/kubepods-pod") + kUidEscaped + ".slice/cri-containerd-" +
                 kId + ".scope",
             {.pod_uid = kUid, .container_id = "containerd://" + kId}},
        Case{"KubepodsSystemdBestEffort",
             std::string("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod") +
                 kUidEscaped + ".slice/crio-" + kId + ".scope",
             {.pod_uid = kUid, .container_id = "cri-o://" + kId}},
        // The pod's sandbox cgroup itself (the pause process lives in a container of its own;
        // a process in the pod slice has the pod and no container).
        Case{"KubepodsPodSliceOnly", kPodSlice, {.pod_uid = kUid}},
        // CRI-O's conmon runs beside the container in a scope of its own: not the container.
        Case{"CrioConmonIsNotTheContainer",
             kPodSlice + "/crio-conmon-" + kId + ".scope",
             {.pod_uid = kUid, .systemd_unit = "crio-conmon-" + kId + ".scope"}},
        // A container that made cgroups of its own (systemd inside, or a nested runtime):
        // the innermost container is the process's.
        Case{
            "NestedInsideContainer",
            kPodSlice + "/cri-containerd-" + kId + ".scope/init.scope",
            {.pod_uid = kUid, .container_id = "containerd://" + kId, .systemd_unit = "init.scope"}},
        // Kubernetes, cgroupfs driver.
        Case{"KubepodsCgroupfsBurstable",
             std::string("/kubepods/burstable/pod") + kUid + "/" + kId,
             {.pod_uid = kUid, .container_id = kId}},
        Case{"KubepodsCgroupfsGuaranteed",
             std::string("/kubepods/pod") + kUid + "/" + kId,
             {.pod_uid = kUid, .container_id = kId}},
        Case{"KubepodsCgroupfsCrio",
             std::string("/kubepods/besteffort/pod") + kUid + "/crio-" + kId,
             {.pod_uid = kUid, .container_id = "cri-o://" + kId}},
        // Static pods: the kubelet makes their UID from a hash of the manifest (32 hex digits).
        Case{"StaticPodUid",
             "/kubepods/burstable/pod6b2f3c8e9d0a1b2c3d4e5f6a7b8c9d0e/" + kId,
             {.pod_uid = "6b2f3c8e9d0a1b2c3d4e5f6a7b8c9d0e", .container_id = kId}},
        // Seen from the exporter's own cgroup namespace (a pod without host cgroupns).
        Case{"FromAnotherCgroupNamespace",
             "/../../.." + kPodSlice + "/cri-containerd-" + kId + ".scope",
             {.pod_uid = kUid, .container_id = "containerd://" + kId}},
        // A removed cgroup v2 directory (a process still in it as it exits).
        Case{"DeletedCgroup",
             kPodSlice + "/cri-containerd-" + kId + ".scope (deleted)",
             {.pod_uid = kUid, .container_id = "containerd://" + kId}},
        // Docker without Kubernetes.
        Case{"DockerCgroupfs", "/docker/" + kId, {.container_id = "docker://" + kId}},
        Case{"DockerSystemd",
             "/system.slice/docker-" + kId + ".scope",
             {.container_id = "docker://" + kId}},
        // Slurm, cgroup v2 (cgroup/v2 plugin) and v1.
        Case{"SlurmV2Task",
             "/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0",
             {.slurm_job_id = "4711", .slurm_step_id = "0", .systemd_unit = "slurmstepd.scope"}},
        Case{
            "SlurmV2Batch",
            "/system.slice/slurmstepd.scope/job_4711/step_batch/user/task_0",
            {.slurm_job_id = "4711", .slurm_step_id = "batch", .systemd_unit = "slurmstepd.scope"}},
        Case{"SlurmV2Extern",
             "/system.slice/slurmstepd.scope/job_12/step_extern/user/task_special",
             {.slurm_job_id = "12", .slurm_step_id = "extern", .systemd_unit = "slurmstepd.scope"}},
        Case{
            "SlurmV2MultipleSlurmd",
            "/system.slice/node7_slurmstepd.scope/job_99/step_3/user/task_1",
            {.slurm_job_id = "99", .slurm_step_id = "3", .systemd_unit = "node7_slurmstepd.scope"}},
        Case{"SlurmV2HetComponent",
             "/system.slice/slurmstepd.scope/job_5/step_0+1/user/task_0",
             {.slurm_job_id = "5", .slurm_step_id = "0+1", .systemd_unit = "slurmstepd.scope"}},
        Case{"SlurmV2JobLevel",
             "/system.slice/slurmstepd.scope/job_5",
             {.slurm_job_id = "5", .systemd_unit = "slurmstepd.scope"}},
        Case{"SlurmV1",
             "/slurm/uid_1000/job_4711/step_2/task_0",
             {.slurm_job_id = "4711", .slurm_step_id = "2"}},
        Case{"SlurmV1Interactive",
             "/slurm_node7/uid_1000/job_8/step_interactive",
             {.slurm_job_id = "8", .slurm_step_id = "interactive"}},
        // systemd units.
        Case{"SystemService",
             "/system.slice/storage-target.service",
             {.systemd_unit = "storage-target.service"}},
        Case{"TemplateService",
             "/system.slice/system-ucx\\x2dbench.slice/ucx-bench@3.service",
             {.systemd_unit = "ucx-bench@3.service"}},
        Case{"UserSession",
             "/user.slice/user-1000.slice/session-3.scope",
             {.systemd_unit = "session-3.scope"}},
        Case{"UserManagerApp",
             "/user.slice/user-1000.slice/user@1000.service/app.slice/trainer.service",
             {.systemd_unit = "trainer.service"}},
        // Names that only look like the forms: no workload from them.
        Case{"JobOutsideSlurm",
             "/system.slice/cron.service/job_7/step_1",
             {.systemd_unit = "cron.service"}},
        Case{"StepWithoutJob", "/slurm/uid_1000/step_1", {}},
        Case{"PodOutsideKubepods", "/system.slice/pod0123456789abcdef", {}},
        Case{"HexOutsidePodOrDocker", "/machine.slice/" + kId, {}},
        Case{"ShortContainerId",
             kPodSlice + "/cri-containerd-abc.scope",
             {.pod_uid = kUid, .systemd_unit = "cri-containerd-abc.scope"}},
        Case{"UpperCaseContainerId", "/docker/" + std::string(64, 'A'), {}}, Case{"Root", "/", {}},
        Case{"Empty", "", {}}, Case{"OnlySlashesAndDots", "//./../", {}},
        Case{"NonUtf8Unit", "/system.slice/caf\xe9.service", {.systemd_unit = "caf\xe9.service"}}),
    PrintName);

// Issue 37: the forms count only where the kubelet, the runtime and slurmstepd make them, from
// the top of the cgroup tree. Anyone with a delegated cgroup (every user has user@UID.service)
// can make subgroups with these names deeper down; before, a match at any depth named the pod.
INSTANTIATE_TEST_SUITE_P(
    Delegated, CgroupPath,
    ::testing::Values(
        Case{"UserCgroupClaimsAPod",
             std::string("/user.slice/user-1000.slice/user@1000.service/app.slice/"
                         "kubepods-burstable-pod") +
                 kUidEscaped + ".slice/cri-containerd-" + kId + ".scope",
             {.systemd_unit = "cri-containerd-" + kId + ".scope"}},
        Case{"UserCgroupClaimsAGuaranteedPod",
             std::string("/user.slice/user-1000.slice/user@1000.service/kubepods.slice/"
                         "kubepods-pod") +
                 kUidEscaped + ".slice",
             {.systemd_unit = "user@1000.service"}},
        Case{"UserCgroupfsKubepods",
             std::string("/user.slice/user-1000.slice/user@1000.service/kubepods/burstable/pod") +
                 kUid + "/" + kId,
             {.systemd_unit = "user@1000.service"}},
        Case{"ServiceClaimsDocker",
             "/system.slice/evil.service/docker/" + kId,
             {.systemd_unit = "evil.service"}},
        // A pod whose container makes cgroups of its own keeps its pod and container: a pod
        // slice and container scope nested inside it are not another pod's.
        Case{"PodInsideAnotherPodsContainer",
             kPodSlice + "/cri-containerd-" + kId + ".scope/kubepods-pod" +
                 "11111111_2222_3333_4444_555555555555.slice/cri-containerd-" + kId2 + ".scope",
             {.pod_uid = kUid,
              .container_id = "containerd://" + kId,
              .systemd_unit = "cri-containerd-" + kId2 + ".scope"}},
        Case{"QosSliceNotUnderKubepods",
             std::string("/kubepods-burstable.slice/kubepods-burstable-pod") + kUidEscaped +
                 ".slice",
             {}},
        Case{"UserCgroupClaimsASlurmJob",
             "/user.slice/user-1000.slice/user@1000.service/slurmstepd.scope/job_7/step_0",
             {.systemd_unit = "slurmstepd.scope"}},
        Case{"StepdScopeOutsideSystemSlice",
             "/system.slice/cron.service/slurmstepd.scope/job_7/step_0",
             {.systemd_unit = "slurmstepd.scope"}},
        Case{"SlurmV1NotAtTheRoot", "/user.slice/slurm/uid_1000/job_7/step_0", {}},
        // From another cgroup namespace, the path starts below the common ancestor (here
        // kubepods-burstable.slice): a level of the hierarchy, which a user cannot name there.
        Case{"FromAPodNamespaceSiblingPod",
             std::string("/../../kubepods-burstable-pod") + kUidEscaped + ".slice/cri-containerd-" +
                 kId + ".scope",
             {.pod_uid = kUid, .container_id = "containerd://" + kId}},
        Case{"FromAnotherNamespaceUserCgroup",
             std::string("/../../../user.slice/user-1000.slice/user@1000.service/kubepods-pod") +
                 kUidEscaped + ".slice/cri-containerd-" + kId + ".scope",
             {.systemd_unit = "cri-containerd-" + kId + ".scope"}}),
    PrintName);

TEST(ProcCgroup, TheUnifiedHierarchyComesFirst) {
  const std::string content =
      "12:memory:/kubepods/burstable/pod11111111-2222-3333-4444-"
      "555555555555/" +
      kId2 + "\n0::" + kPodSlice + "/cri-containerd-" + kId + ".scope\n";
  EXPECT_EQ(WorkloadOfProcCgroup(content),
            (Workload{.pod_uid = kUid, .container_id = "containerd://" + kId}));
}

// A hybrid host whose kubelet uses the cgroupfs driver: the pod is in the v1 controllers'
// paths only; systemd's named hierarchy and the unified one name the unit around it.
TEST(ProcCgroup, HybridCgroupfsKubeletTakesThePodFromTheV1Controllers) {
  const std::string pod = std::string("/kubepods/burstable/pod") + kUid + "/" + kId;
  const std::string content = "12:pids:" + pod + "\n11:memory:" + pod +
                              "\n1:name=systemd:/system.slice/containerd.service\n0::/\n";
  EXPECT_EQ(WorkloadOfProcCgroup(content),
            (Workload{.pod_uid = kUid, .container_id = kId, .systemd_unit = "containerd.service"}));
}

TEST(ProcCgroup, SlurmV1KeepsTheJobFromAnyController) {
  const std::string content =
      "7:freezer:/slurm/uid_1000/job_31/step_0\n"
      "5:memory:/slurm/uid_1000/job_31/step_0/task_0\n"
      "1:name=systemd:/system.slice/slurmd.service\n";
  EXPECT_EQ(
      WorkloadOfProcCgroup(content),
      (Workload{.slurm_job_id = "31", .slurm_step_id = "0", .systemd_unit = "slurmd.service"}));
}

TEST(ProcCgroup, MalformedLinesAreSkipped) {
  const std::string content = "garbage\n::\n3\n0::/system.slice/a:b.service\n\n";
  EXPECT_EQ(WorkloadOfProcCgroup(content), (Workload{.systemd_unit = "a:b.service"}));
  EXPECT_EQ(WorkloadOfProcCgroup(""), Workload{});
}

}  // namespace
}  // namespace rdmascope::sys
