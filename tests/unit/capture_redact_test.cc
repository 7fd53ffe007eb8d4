// `capture --redact` of the exporter's debug answers (cli/capture_redact.h): no pod,
// namespace, container, unit name, id, path or non-default endpoint of the answer survives;
// comm, pids, counts and library names do; fields the exporter is not known to answer are left
// out; and the doctor and capture commands share one set of --exporter.* client flags.
#include "cli/capture_redact.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/capture_exporter.h"
#include "cli/doctor.h"

namespace rdmascope {
namespace {

using nlohmann::json;

const redact::Redactor& Key() {
  static const redact::Redactor redactor = redact::Redactor::WithKey(std::string(32, 'k')).value();
  return redactor;
}

const std::string kId(64, 'c');
const std::string kUid = "0f0e0d0c-1111-2222-3333-444455556666";

// The originals each answer below holds, none of which may survive.
const std::vector<std::string> kOriginals{"llm-secret",
                                          "tenant-ns",
                                          "trainer-ctr",
                                          kId,
                                          kUid,
                                          "alice-job",
                                          "4242",
                                          "/home/alice/bin/train",
                                          "/home/alice",
                                          "/srv/cri.sock",
                                          "secret-host.example.com"};

constexpr std::string_view kWorkloads = R"({
  "processes": [
    {"pid": 100, "workload": {"namespace": "tenant-ns", "pod": "llm-secret",
                              "container": "trainer-ctr", "pod_uid": "0f0e0d0c-1111-2222-3333-444455556666",
                              "container_id": "containerd://cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"}},
    {"pid": 200, "workload": {"slurm_job_id": "4242", "slurm_step_id": "0",
                              "systemd_unit": "alice-job.service"}}
  ],
  "kubelet": {"endpoint": "unix:///var/lib/kubelet/pod-resources/kubelet.sock", "attempts": 3,
              "container_resources": 1},
  "container_runtime": {"endpoint": "unix:///srv/cri.sock", "attempts": 2, "containers": 5,
                        "last_error": "connect /srv/cri.sock: refused by secret-host.example.com",
                        "future_field": "llm-secret"}
})";

constexpr std::string_view kStacks = R"({
  "processes": [
    {"pid": 100, "exec_id": 1, "comm": "train", "outstanding_regions": 2,
     "outstanding_bytes": 8192,
     "workload": {"pod": "llm-secret", "namespace": "tenant-ns"},
     "stacks": [
       {"outstanding_regions": 2, "outstanding_bytes": 8192, "oldest_age_seconds": 1.5,
        "unwind": "dwarf", "unwind_stop": "no CFI in /home/alice/bin/train",
        "frames": [{"function": "ibv_reg_mr+0x10", "module": "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"},
                   {"function": "/home/alice/bin/train+0x1a2", "module": "/home/alice/bin/train",
                    "inlined": true, "argv": "--secret-host.example.com"}]}
     ]}
  ],
  "regions_walked": 2,
  "truncated": false
})";

json Redacted(std::string_view route, std::string_view body) {
  const auto redacted = RedactExporterAnswer(Key(), route, body);
  EXPECT_TRUE(redacted) << redacted.error();
  for (const std::string& original : kOriginals) {
    EXPECT_EQ(redacted->find(original), std::string::npos) << original << " in " << *redacted;
  }
  return json::parse(*redacted);
}

TEST(CaptureRedact, WorkloadsKeepTheirShapeAndNoName) {
  const json out = Redacted("/debug/workloads", kWorkloads);
  const json& first = out["processes"][0]["workload"];
  EXPECT_EQ(out["processes"][0]["pid"], 100);
  EXPECT_EQ(first["pod"], Key().Name("pod", "llm-secret"));
  EXPECT_EQ(first["namespace"], Key().Name("namespace", "tenant-ns"));
  EXPECT_EQ(first["container"], Key().Name("container", "trainer-ctr"));
  // Ids as the cgroup files hash them, so the answer joins the replayed series.
  EXPECT_EQ(first["container_id"], "containerd://" + redact::CgroupIds(Key(), kId));
  EXPECT_EQ(first["pod_uid"], redact::CgroupIds(Key(), kUid));
  const json& second = out["processes"][1]["workload"];
  EXPECT_EQ(second["systemd_unit"].get<std::string>(),
            Key().Name("unit", "alice-job") + ".service");
  EXPECT_EQ(second["slurm_job_id"].get<std::string>().size(), 4U);
  EXPECT_EQ(second["slurm_job_id"].get<std::string>().find_first_not_of("0123456789"),
            std::string::npos);
  EXPECT_EQ(out["kubelet"]["endpoint"], "unix:///var/lib/kubelet/pod-resources/kubelet.sock")
      << "the default socket says nothing of the host";
  EXPECT_EQ(out["kubelet"]["attempts"], 3);
  EXPECT_EQ(out["container_runtime"]["containers"], 5);
  EXPECT_FALSE(out["container_runtime"].contains("future_field"));
  EXPECT_EQ(out["container_runtime"]["last_error"].get<std::string>().rfind("connect ", 0), 0U);
}

TEST(CaptureRedact, StacksKeepCommCountsAndLibrariesOnly) {
  const json out = Redacted("/debug/mr/stacks", kStacks);
  const json& process = out["processes"][0];
  EXPECT_EQ(process["comm"], "train") << "comm stays, as elsewhere in a capture";
  EXPECT_EQ(process["pid"], 100);
  EXPECT_EQ(process["outstanding_bytes"], 8192);
  EXPECT_EQ(process["workload"]["pod"], Key().Name("pod", "llm-secret"));
  const json& stack = process["stacks"][0];
  EXPECT_EQ(stack["unwind"], "dwarf");
  EXPECT_EQ(stack["oldest_age_seconds"], 1.5);
  EXPECT_EQ(stack["frames"][0]["function"], "ibv_reg_mr+0x10");
  const std::string library = stack["frames"][0]["module"];
  EXPECT_TRUE(library.ends_with("/libibverbs.so.1")) << library;
  EXPECT_TRUE(library.starts_with("path-")) << library;
  EXPECT_EQ(stack["frames"][1]["inlined"], true);
  EXPECT_FALSE(stack["frames"][1].contains("argv")) << "an unknown field is left out";
  EXPECT_EQ(out["regions_walked"], 2);
}

TEST(CaptureRedact, NotJsonOrAnotherRouteIsNotKept) {
  EXPECT_FALSE(RedactExporterAnswer(Key(), "/debug/workloads", "{\"cut\": "));
  EXPECT_FALSE(RedactExporterAnswer(Key(), "/debug/workloads", "[1]"));
  EXPECT_FALSE(RedactExporterAnswer(Key(), "/debug/other", "{}"));
}

// Each --exporter.* option of `app` by name, with its help.
std::map<std::string, std::string> ExporterClientFlags(const CLI::App& app) {
  std::map<std::string, std::string> flags;
  for (const CLI::Option* option : app.get_options()) {
    const std::string name = option->get_name();
    if (name.starts_with("--exporter.") && name != "--exporter.timeout") {
      flags[name] = option->get_description();
    }
  }
  return flags;
}

TEST(CaptureExporterFlags, TheSameClientFlagsAsDoctorsWithTheSameHelp) {
  CLI::App doctor;
  doctor::DoctorOptions doctor_options;
  AddDoctorFlags(doctor, doctor_options);
  CLI::App capture;
  CaptureExporterOptions capture_options;
  AddCaptureExporterFlags(capture, capture_options);
  const auto flags = ExporterClientFlags(capture);
  EXPECT_EQ(flags.size(), 7U);
  EXPECT_TRUE(flags.contains("--exporter.password-file"));
  EXPECT_EQ(flags, ExporterClientFlags(doctor));
  capture.parse("--exporter.insecure-skip-verify --exporter.username alice", false);
  EXPECT_TRUE(capture_options.access.insecure_skip_verify);
  EXPECT_EQ(capture_options.access.username, "alice");
}

}  // namespace
}  // namespace rdmascope
