#include "sys/cgroup_workload.h"

#include <algorithm>
#include <array>
#include <optional>
#include <regex>
#include <vector>

namespace rdmascope::sys {
namespace {

enum class Field { kPodUid, kContainerId, kSlurmJob, kSlurmStep, kSystemdUnit };

// One form of one path component. The value is the pattern's first group; the component
// counts only where the path above it says it may (so that a directory named job_7 or a
// 64-hex name elsewhere is not taken for a Slurm job or a container).
struct ComponentRule {
  Field field;
  const char* pattern;       // ECMAScript, matched against the whole component
  const char* value_prefix;  // prepended to the value: the runtime, kube-state-metrics' form
  const char* ancestor;      // "": anywhere; else some component above must match it whole
  bool parent_only;          // the ancestor must be the component right above
};

// Sources: the kubelet's cgroup names (pkg/kubelet/cm/cgroup_manager_linux.go: the systemd
// driver escapes "-" of the pod UID as "_"; qos classes burstable, besteffort, and guaranteed
// pods directly under kubepods); containerd's and CRI-O's scope prefixes (cri-containerd-,
// crio-; cri-dockerd's docker-); Slurm's cgroup/v2 plugin (src/plugins/cgroup/v2/cgroup_v2.c:
// "<slice>/[<node>_]slurmstepd.scope", "/job_%u", "/step_%s") and cgroup/v1
// (src/plugins/cgroup/v1/xcgroup.c: "/slurm[_<node>]/uid_%u/job_%u/step_%s"), step names
// from log_build_step_id_str (a number, batch, extern, interactive, TBD; "+N" for a
// heterogeneous component).
constexpr const char* kUnderKubepods = "kubepods(?:[-.].*)?";
constexpr const char* kPodComponent =
    "(?:kubepods(?:-besteffort|-burstable)?-)?pod[0-9a-fA-F_-]+(?:\\.slice)?";
constexpr const char* kUnderSlurm = "(?:.+_)?slurmstepd\\.scope|slurm(?:_.+)?";
constexpr std::array kComponentRules{
    // Kubernetes pods: systemd driver, then cgroupfs driver.
    ComponentRule{Field::kPodUid, "kubepods(?:-besteffort|-burstable)?-pod([0-9a-fA-F_]+)\\.slice",
                  "", "", false},
    ComponentRule{Field::kPodUid, "pod([0-9a-fA-F-]+)", "", kUnderKubepods, false},
    // Containers: systemd driver scopes, then cgroupfs directories under their pod.
    ComponentRule{Field::kContainerId, "cri-containerd-([0-9a-f]{64})\\.scope", "containerd://", "",
                  false},
    ComponentRule{Field::kContainerId, "crio-([0-9a-f]{64})(?:\\.scope)?", "cri-o://", "", false},
    ComponentRule{Field::kContainerId, "docker-([0-9a-f]{64})\\.scope", "docker://", "", false},
    ComponentRule{Field::kContainerId, "([0-9a-f]{64})", "", kPodComponent, true},
    ComponentRule{Field::kContainerId, "([0-9a-f]{64})", "docker://", "docker", true},
    // Slurm jobs and steps.
    ComponentRule{Field::kSlurmJob, "job_([0-9]+)", "", kUnderSlurm, false},
    ComponentRule{Field::kSlurmStep, "step_([0-9]+(?:\\+[0-9]+)?|batch|extern|interactive|TBD)", "",
                  "job_[0-9]+", true},
    // systemd: any unit a process can run in (slices hold none).
    ComponentRule{Field::kSystemdUnit, "(.+\\.(?:service|scope))", "", "", false},
};

struct CompiledRule {
  const ComponentRule& rule;
  std::regex pattern;
  std::optional<std::regex> ancestor;
};

const std::vector<CompiledRule>& CompiledRules() {
  static const std::vector<CompiledRule> compiled = [] {
    std::vector<CompiledRule> rules;
    for (const ComponentRule& rule : kComponentRules) {
      rules.push_back({rule, std::regex(rule.pattern, std::regex::optimize),
                       *rule.ancestor == '\0'
                           ? std::nullopt
                           : std::optional<std::regex>(std::regex(rule.ancestor))});
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

// The path's components, outermost first, without the empty, "." and ".." ones that a path
// seen from another cgroup namespace ("/../../kubepods.slice/...") holds.
std::vector<std::string> Components(std::string_view path) {
  constexpr std::string_view kDeleted = " (deleted)";  // kernel/cgroup/cgroup.c proc_cgroup_show
  if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
  std::vector<std::string> components;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view component = path.substr(0, slash);
    if (!component.empty() && component != "." && component != "..") {
      components.emplace_back(component);
    }
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return components;
}

bool AncestorMatches(const CompiledRule& rule, const std::vector<std::string>& components,
                     size_t index) {
  if (!rule.ancestor) return true;
  if (rule.rule.parent_only) {
    return index > 0 && std::regex_match(components[index - 1], *rule.ancestor);
  }
  return std::any_of(
      components.begin(), components.begin() + static_cast<ptrdiff_t>(index),
      [&](const std::string& above) { return std::regex_match(above, *rule.ancestor); });
}

}  // namespace

Workload WorkloadOfCgroupPath(std::string_view path) {
  const std::vector<std::string> components = Components(path);
  Workload workload;
  // Outermost to innermost, each match replacing the one above it: the innermost container,
  // unit or step is the process's own (a container may nest cgroups of its own).
  for (size_t i = 0; i < components.size(); ++i) {
    bool container = false;
    for (const CompiledRule& rule : CompiledRules()) {
      std::smatch match;
      if (!std::regex_match(components[i], match, rule.pattern)) continue;
      if (!AncestorMatches(rule, components, i)) continue;
      // A container's scope is the runtime's unit, not one a person names the workload by.
      if (rule.rule.field == Field::kSystemdUnit && container) continue;
      container = container || rule.rule.field == Field::kContainerId;
      std::string value = rule.rule.value_prefix + match[1].str();
      if (rule.rule.field == Field::kPodUid) std::replace(value.begin(), value.end(), '_', '-');
      *FieldOf(workload, rule.rule.field) = std::move(value);
    }
  }
  // A step is Slurm's only inside a Slurm job (a job_N/step_M pair elsewhere is not).
  if (workload.slurm_job_id.empty()) workload.slurm_step_id.clear();
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
