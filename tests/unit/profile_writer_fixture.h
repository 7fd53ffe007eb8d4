// A hand-built ProfileData with known stacks and figures, for the tests of the profile writers
// (profile.json, pprof, folded stacks, HTML) and the sample files the e2e tests open with
// protoc and chromium. Every string that comes from the profiled process is hostile somewhere:
// quotes, markup, ';' (the folded separator), newlines and bytes that are not UTF-8.
#pragma once

#include "profile/profile_data.h"

namespace rdmascope::profile::testing {

inline constexpr uint64_t kMiB = 1024 * 1024;
inline constexpr const char* kHostileComm = "<script>alert(1)</script>\xfe'\"&";
inline constexpr const char* kHostileFunction = "<img src=x onerror=alert(2)>;evil\n\"q\"\xff";

// Stacks (innermost first):
//   leak_buffers <- main <- __libc_start_call_main: 3 regions, 12 MiB still registered (the
//     leak), 3 registrations of 12 MiB;
//   post_buffers <- worker_loop <- start_thread: nothing left, 100 registrations of 400 MiB;
//   <hostile> <- main: 1 region of 4 KiB left, 1 registration;
//   ?? (libfoo.so.1) <- main: 1 region of 8 KiB left, 1 registration.
// The MR totals hold 1 more region of 1 MiB that no stack holds (registered before a --pid
// attach): the "[no call stack]" remainder.
inline ProfileData SampleProfile() {
  ProfileData data;
  data.rdmascope_version = "0.9.0-test";
  data.command = {"./mr_leaker", "--size=4M", "<b>bold</b>"};
  data.pid = 4242;
  data.comm = kHostileComm;
  data.workload = {{"namespace", "training"}, {"pod", "llm-0 <script>"}, {"slurm_job_id", "4711"}};
  data.start_unix_seconds = 1780000000.5;
  data.duration_seconds = 10;
  data.end_reason = "exited";
  data.exit_status = 0;
  data.preload_active = true;
  data.probes_active = true;
  data.notes = {"perf: cycles not counted (no PMU in this VM) <see docs>"};

  data.stacks = {
      {.frames = {{"leak_buffers", "mr_leaker", 0x2c},
                  {"main", "mr_leaker", 0x51},
                  {"__libc_start_call_main", "libc.so.6", 0x7a}},
       .outstanding_regions = 3,
       .outstanding_bytes = 12 * kMiB,
       .registrations = 3,
       .registered_bytes = 12 * kMiB},
      {.frames = {{"post_buffers", "app", 0x10},
                  {"worker_loop", "app", 0x88},
                  {"start_thread", "libc.so.6", 0x2f}},
       .outstanding_regions = 0,
       .outstanding_bytes = 0,
       .registrations = 100,
       .registered_bytes = 400 * kMiB},
      {.frames = {{kHostileFunction, "lib\"odd'.so", 0x4}, {"main", "mr_leaker", 0x60}},
       .outstanding_regions = 1,
       .outstanding_bytes = 4096,
       .registrations = 1,
       .registered_bytes = 4096},
      {.frames = {{"??", "libfoo.so.1", 0}, {"main", "mr_leaker", 0x70}},
       .outstanding_regions = 1,
       .outstanding_bytes = 8192,
       .registrations = 1,
       .registered_bytes = 8192},
  };

  MrSummary& mr = data.mr;
  mr.registrations = 105;
  mr.deregistrations = 100;
  mr.failures = 2;
  mr.registered_bytes = 412 * kMiB + 4096 + 8192;
  mr.outstanding_regions = 3 + 1 + 1 + 1;
  mr.outstanding_bytes = 12 * kMiB + 4096 + 8192 + kMiB;
  mr.released_at_exit_regions = 6;
  mr.released_at_exit_bytes = mr.outstanding_bytes;
  mr.aligned_2mib = 103;  // the 4 MiB regions
  mr.aligned_4kib = 2;    // 4 KiB and 8 KiB
  mr.unaligned = 0;
  mr.churn_registrations = 99;
  mr.churn_bytes = 99 * 4 * kMiB;
  mr.access_flags = {{"LOCAL_WRITE", 105}, {"REMOTE_READ", 3}};
  mr.access_flags_seen = {"LOCAL_WRITE", "REMOTE_READ"};
  mr.not_hugepage_aligned_bytes = 4096 + 8192;
  mr.length_not_page_multiple = 0;
  mr.size_bytes = {.buckets = std::vector<uint64_t>(23, 0), .count = 105, .sum = 0};
  mr.size_bytes.buckets[12] = 1;    // 4 KiB: (2^11, 2^12]
  mr.size_bytes.buckets[13] = 1;    // 8 KiB
  mr.size_bytes.buckets[22] = 103;  // 4 MiB
  mr.size_bytes.sum = static_cast<double>(mr.registered_bytes);
  mr.latency_ns = {.buckets = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 90, 15},
                   .count = 105,
                   .sum = 105 * 20000.0};

  data.queues = {
      {.kind = "cq",
       .device = "rxe0",
       .handle = "3",
       .type = "",
       .capacity = 256,
       .feeding_wrs = 384,
       .peak_occupancy = 250,
       .poll_batch_fullness = 0.25},
      {.kind = "qp",
       .device = "rxe0",
       .handle = "17",
       .type = "RC",
       .capacity = 128,
       .max_recv_wr = 64,
       .max_send_sge = 2,
       .max_recv_sge = 1,
       .needed_send_wrs = 245,
       .recommended_send_wrs = 256},
  };
  data.qps_by_type = {{"RC", 2}, {"UD", 1}};
  data.messages.send_bytes = {
      .buckets = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1000}, .count = 1000, .sum = 2048000};
  data.messages.recv_bytes = {.buckets = {}, .count = 0, .sum = 0};
  data.messages.completion_latency_ns = {
      .buckets = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 9, 1}, .count = 50, .sum = 500000};

  data.perf.events = {{"task-clock", 9.5e9}, {"context-switches", 1200}};
  data.perf.ipc = std::nullopt;  // no PMU: not measured
  data.perf.llc_miss_ratio = 0.125;
  data.perf.thread_numa_nodes = {0, 0, 1};
  data.perf.nic_numa_node = 0;
  data.numa.nic_device = "rxe0";
  data.numa.nic_node = 0;
  data.numa.threads = {
      {.tid = 4242, .comm = "trainer", .samples_by_node = {{0, 10}}},
      {.tid = 4243, .comm = "poller", .samples_by_node = {{0, 4}, {1, 6}}, .majority_node = 1}};
  data.numa.samples = 20;
  data.numa.off_nic_samples = 6;
  data.numa.off_nic_share = 0.3;
  data.numa.memory_bytes_by_node = std::map<int, uint64_t>{{0, 3u << 20}, {1, 1u << 20}};
  data.numa.memory_off_nic_share = 0.25;

  data.counters = {
      {.device = "rxe0",
       .port = "1",
       .counter = "port_xmit_data_bytes",
       .delta = 4.2e9,
       .per_second = 4.2e8},
      {.device = "eth0", .port = "", .counter = "tx_bytes", .delta = 4.3e9, .per_second = 4.3e8}};

  Timeline mr_bytes{.id = "mr_outstanding_bytes",
                    .title = "Outstanding MR bytes",
                    .unit = "bytes",
                    .limit = std::nullopt,
                    .points = {}};
  Timeline cq{
      .id = "cq_occupancy", .title = "CQ 3 on rxe0", .unit = "entries", .limit = 256, .points = {}};
  Timeline nic{.id = "nic_throughput",
               .title = "eth0 transmit",
               .unit = "bytes_per_second",
               .limit = std::nullopt,
               .points = {}};
  for (int i = 0; i <= 10; ++i) {
    const double t = i;
    mr_bytes.points.push_back({t, static_cast<double>((i < 3 ? i : 3) * 4 * kMiB)});
    cq.points.push_back({t, i == 0 ? 0.0 : 100.0 + 15.0 * i});
    nic.points.push_back({t, i == 0 ? 0.0 : 4.3e8});
  }
  data.timelines = {mr_bytes, cq, nic};

  data.advice = {{.id = "queues.cq_undersized",
                  .area = "queues",
                  .severity = doctor::Severity::kWarn,
                  .scope = {{"device", "rxe0"}, {"cq", "3"}},
                  .observed = "CQ 3 holds 256 entries, fed by 384 work requests; peak 250",
                  .expected = "capacity >= 1.5 x feeding depth (576)",
                  .advice = "create the CQ with at least 576 entries",
                  .fix = "",
                  .runbook = "docs/runbook.md#cq-undersized"}};
  return data;
}

}  // namespace rdmascope::profile::testing
