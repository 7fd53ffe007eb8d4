#include "sys/cgroup_workload.h"

#include <algorithm>
#include <array>
#include <optional>
#include <regex>
#include <vector>

namespace rdmascope::sys {
namespace {

enum class Field { kPodUid, kContainerId, kSlurmJob, kSlurmStep, kSystemdUnit };

// One form of one path component, at its place in a hierarchy that a privileged manager made:
// a component counts only where its parent component matched the rule the hierarchy has right
// above it, up to a rule that must be at the top of the cgroup tree (parent kRoot). A name
// matched at any depth would let anyone with a delegated cgroup (systemd gives every user one,
// user@UID.service) name a subgroup "kubepods-pod<another pod's UID>.slice" and pass for that
// pod; only root (the kubelet, the runtime, slurmstepd) can make the top-level ones.
enum Node {
  kRoot = -1,
  kNoNode = -2,
  // Kubernetes, systemd driver.
  kKubepodsSlice = 0,
  kQosSlice,
  kPodSliceGuaranteed,
  kPodSliceQos,
  kContainerScope,
  // Kubernetes, cgroupfs driver.
  kKubepodsDir,
  kQosDir,
  kPodDir,
  kContainerDir,
  // Docker without Kubernetes.
  kDockerDir,
  kDockerContainerDir,
  kSystemSlice,
  kDockerScope,
  // Slurm cgroup/v2 and cgroup/v1.
  kStepdScope,
  kSlurmJobV2,
  kSlurmStepV2,
  kSlurmDir,
  kSlurmUid,
  kSlurmJobV1,
  kSlurmStepV1,
};

struct ComponentRule {
  Node node;                    // kNoNode: a rule that holds at any depth (systemd units)
  std::array<Node, 2> parents;  // the rules the parent component may have matched
  const char* pattern;          // ECMAScript, matched against the whole component
  std::optional<Field> field;
  const char* value_prefix;  // prepended to the value: the runtime, kube-state-metrics' form
};

// Sources: the kubelet's cgroup names (pkg/kubelet/cm/cgroup_manager_linux.go,
// qos_container_manager_linux.go: "kubepods" at the cgroup root (--cgroup-root "/"), the qos
// classes burstable and besteffort under it, guaranteed pods directly under kubepods; the
// systemd driver escapes "-" of the pod UID as "_" and spells each level as a slice whose
// name repeats its parents'); containerd's and CRI-O's scope prefixes (cri-containerd-, crio-;
// cri-dockerd's docker-); Slurm's cgroup/v2 plugin (src/plugins/cgroup/v2/cgroup_v2.c:
// "system.slice/[<node>_]slurmstepd.scope", "/job_%u", "/step_%s") and cgroup/v1
// (src/plugins/cgroup/v1/xcgroup.c: "/slurm[_<node>]/uid_%u/job_%u/step_%s"), step names from
// log_build_step_id_str (a number, batch, extern, interactive, TBD; "+N" for a heterogeneous
// component).
constexpr const char* kStep = "step_([0-9]+(?:\\+[0-9]+)?|batch|extern|interactive|TBD)";
constexpr std::array kComponentRules{
    // Kubernetes, systemd driver.
    ComponentRule{kKubepodsSlice, {kRoot, kRoot}, "kubepods\\.slice", {}, ""},
    ComponentRule{kQosSlice,
                  {kKubepodsSlice, kKubepodsSlice},
                  "kubepods-(?:besteffort|burstable)\\.slice",
                  {},
                  ""},
    ComponentRule{kPodSliceGuaranteed,
                  {kKubepodsSlice, kKubepodsSlice},
                  "kubepods-pod([0-9a-fA-F_]+)\\.slice",
                  Field::kPodUid,
                  ""},
    ComponentRule{kPodSliceQos,
                  {kQosSlice, kQosSlice},
                  "kubepods-(?:besteffort|burstable)-pod([0-9a-fA-F_]+)\\.slice",
                  Field::kPodUid,
                  ""},
    ComponentRule{kContainerScope,
                  {kPodSliceGuaranteed, kPodSliceQos},
                  "cri-containerd-([0-9a-f]{64})\\.scope",
                  Field::kContainerId,
                  "containerd://"},
    ComponentRule{kContainerScope,
                  {kPodSliceGuaranteed, kPodSliceQos},
                  "crio-([0-9a-f]{64})(?:\\.scope)?",
                  Field::kContainerId,
                  "cri-o://"},
    ComponentRule{kContainerScope,
                  {kPodSliceGuaranteed, kPodSliceQos},
                  "docker-([0-9a-f]{64})\\.scope",
                  Field::kContainerId,
                  "docker://"},
    // Kubernetes, cgroupfs driver.
    ComponentRule{kKubepodsDir, {kRoot, kRoot}, "kubepods", {}, ""},
    ComponentRule{kQosDir, {kKubepodsDir, kKubepodsDir}, "besteffort|burstable", {}, ""},
    ComponentRule{kPodDir, {kKubepodsDir, kQosDir}, "pod([0-9a-fA-F-]+)", Field::kPodUid, ""},
    ComponentRule{kContainerDir, {kPodDir, kPodDir}, "([0-9a-f]{64})", Field::kContainerId, ""},
    ComponentRule{
        kContainerDir, {kPodDir, kPodDir}, "crio-([0-9a-f]{64})", Field::kContainerId, "cri-o://"},
    // Docker without Kubernetes: cgroupfs driver, systemd driver.
    ComponentRule{kDockerDir, {kRoot, kRoot}, "docker", {}, ""},
    ComponentRule{kDockerContainerDir,
                  {kDockerDir, kDockerDir},
                  "([0-9a-f]{64})",
                  Field::kContainerId,
                  "docker://"},
    ComponentRule{kSystemSlice, {kRoot, kRoot}, "system\\.slice", {}, ""},
    ComponentRule{kDockerScope,
                  {kSystemSlice, kSystemSlice},
                  "docker-([0-9a-f]{64})\\.scope",
                  Field::kContainerId,
                  "docker://"},
    // Slurm jobs and steps: cgroup/v2, then cgroup/v1.
    ComponentRule{kStepdScope, {kSystemSlice, kSystemSlice}, "(?:.+_)?slurmstepd\\.scope", {}, ""},
    ComponentRule{kSlurmJobV2, {kStepdScope, kStepdScope}, "job_([0-9]+)", Field::kSlurmJob, ""},
    ComponentRule{kSlurmStepV2, {kSlurmJobV2, kSlurmJobV2}, kStep, Field::kSlurmStep, ""},
    ComponentRule{kSlurmDir, {kRoot, kRoot}, "slurm(?:_.+)?", {}, ""},
    ComponentRule{kSlurmUid, {kSlurmDir, kSlurmDir}, "uid_[0-9]+", {}, ""},
    ComponentRule{kSlurmJobV1, {kSlurmUid, kSlurmUid}, "job_([0-9]+)", Field::kSlurmJob, ""},
    ComponentRule{kSlurmStepV1, {kSlurmJobV1, kSlurmJobV1}, kStep, Field::kSlurmStep, ""},
    // systemd: any unit a process can run in (slices hold none), at any depth: a unit names
    // where a process runs, not whose it is (a user's own units are theirs to name).
    ComponentRule{kNoNode, {kNoNode, kNoNode}, "(.+\\.(?:service|scope))", Field::kSystemdUnit, ""},
};

struct CompiledRule {
  const ComponentRule& rule;
  std::regex pattern;
};

const std::vector<CompiledRule>& CompiledRules() {
  static const std::vector<CompiledRule> compiled = [] {
    std::vector<CompiledRule> rules;
    for (const ComponentRule& rule : kComponentRules) {
      rules.push_back({rule, std::regex(rule.pattern, std::regex::optimize)});
    }
    return rules;
  }();
  return compiled;
}

std::string* FieldOf(Workload& workload, Field field) {
  switch (field) {
    case Field::kPodUid:
      return &workload.pod_uid;
    case Field::kContainerId:
      return &workload.container_id;
    case Field::kSlurmJob:
      return &workload.slurm_job_id;
    case Field::kSlurmStep:
      return &workload.slurm_step_id;
    case Field::kSystemdUnit:
      return &workload.systemd_unit;
  }
  return nullptr;
}

// The path's components, outermost first, without the empty and "." ones. `relative`: the path
// climbs out of the reader's cgroup namespace first ("/../../kubepods.slice/...": the kernel
// prints a cgroup outside the reader's namespace relative to its root, kernel/cgroup/cgroup.c
// cgroup_path_ns -> kernfs_path_from_node, up to the closest common ancestor and down again).
std::vector<std::string> Components(std::string_view path, bool& relative) {
  constexpr std::string_view kDeleted = " (deleted)";  // kernel/cgroup/cgroup.c proc_cgroup_show
  if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
  std::vector<std::string> components;
  relative = false;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view component = path.substr(0, slash);
    if (component == "..") {
      // Only leading ones climb; one after a name would undo it, which the kernel never prints.
      if (components.empty()) relative = true;
    } else if (!component.empty() && component != ".") {
      components.emplace_back(component);
    }
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return components;
}

bool ParentAllows(const ComponentRule& rule, Node parent) {
  return rule.parents[0] == parent || rule.parents[1] == parent;
}

}  // namespace

Workload WorkloadOfCgroupPath(std::string_view path) {
  bool relative = false;
  const std::vector<std::string> components = Components(path, relative);
  Workload workload;
  // The hierarchy rule each component matched (kNoNode: none), outermost first. The first
  // component of a path seen from another cgroup namespace is a child of the common ancestor
  // of the reader's root and the cgroup: an ancestor of the exporter's own cgroup, so a cgroup
  // root (the kubelet's, the runtime's) made, never a user's. It may then be any level of a
  // hierarchy (a pod slice when the common ancestor is kubepods-burstable.slice); an absolute
  // path must start at a top-level rule.
  Node parent = relative ? kNoNode : kRoot;
  for (size_t i = 0; i < components.size(); ++i) {
    Node matched = kNoNode;
    bool container = false;
    for (const CompiledRule& rule : CompiledRules()) {
      const bool anchored = rule.rule.node != kNoNode;
      if (anchored && matched != kNoNode) continue;  // one hierarchy level per component
      if (anchored && !(ParentAllows(rule.rule, parent) || (relative && i == 0))) continue;
      std::smatch match;
      if (!std::regex_match(components[i], match, rule.pattern)) continue;
      if (anchored) matched = rule.rule.node;
      if (!rule.rule.field) continue;
      // A container's scope is the runtime's unit, not one a person names the workload by.
      if (*rule.rule.field == Field::kSystemdUnit && container) continue;
      container = container || *rule.rule.field == Field::kContainerId;
      std::string value = rule.rule.value_prefix + (match.size() > 1 ? match[1].str() : "");
      if (*rule.rule.field == Field::kPodUid) std::replace(value.begin(), value.end(), '_', '-');
      *FieldOf(workload, *rule.rule.field) = std::move(value);
    }
    parent = matched;
  }
  return workload;
}

Workload WorkloadOfProcCgroup(std::string_view content) {
  struct Line {
    int rank;  // 0: unified, 1: name=systemd, 2: other v1 hierarchies
    size_t order;
    std::string_view path;
  };
  std::vector<Line> lines;
  while (!content.empty()) {
    const size_t end = content.find('\n');
    const std::string_view line = content.substr(0, end);
    content.remove_prefix(end == std::string_view::npos ? content.size() : end + 1);
    // "ID:CONTROLLERS:PATH"; the path may itself hold ':' (a directory name can).
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const int rank = id == "0" && controllers.empty() ? 0 : controllers == "name=systemd" ? 1 : 2;
    lines.push_back({rank, lines.size(), line.substr(second + 1)});
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const Line& a, const Line& b) { return a.rank < b.rank; });
  Workload merged;
  for (const Line& line : lines) {
    Workload found = WorkloadOfCgroupPath(line.path);
    for (const Field field : {Field::kPodUid, Field::kContainerId, Field::kSlurmJob,
                              Field::kSlurmStep, Field::kSystemdUnit}) {
      std::string& into = *FieldOf(merged, field);
      if (into.empty()) into = std::move(*FieldOf(found, field));
    }
  }
  return merged;
}

}  // namespace rdmascope::sys
