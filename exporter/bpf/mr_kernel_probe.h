// User-space side of probes/mr_kernel.bpf.c: MR tracking from fentry/fexit on the kernel's
// uverbs and ib_core. It loads into the maps of probes/mr.bpf.c (MrProbe hands their fds
// over), so MrProbe's snapshot, exit handling and stacks serve both paths unchanged.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

struct mr_kernel_bpf;
struct bpf_link;

namespace rdmascope {

// Which path feeds the MR metrics (--collector.mr.tracking).
enum class MrTracking {
  kAuto,     // the kernel path when the kernel allows it, else uprobes
  kKernel,   // the kernel path or nothing
  kUprobes,  // uprobes on libibverbs only
};

std::optional<MrTracking> ParseMrTracking(std::string_view text);

// The maps of probes/mr.bpf.c the kernel programs write into.
struct MrKernelMaps {
  int regions = -1;
  int procs = -1;
  int stacks = -1;
  int globals = -1;
  // The user stacks for DWARF unwinding (probes/mr.h, "user stacks").
  int stack_samples = -1;
  int code_ranges = -1;
  int sites_seen = -1;
  uint32_t stack_bytes = 0;  // copied per registration (the BPF object's stack_copy_bytes)
};

// nullopt when ib_core and ib_uverbs have BTF (btf_dir/{vmlinux,ib_core,ib_uverbs}) holding
// the required functions; otherwise why not, in words for the log line.
std::optional<std::string> MrKernelPathUnavailable(
    const std::filesystem::path& btf_dir = "/sys/kernel/btf");

class MrKernelProbe {
 public:
  static std::expected<std::unique_ptr<MrKernelProbe>, std::string> Attach(
      const MrKernelMaps& maps, uint32_t max_regions,
      const std::filesystem::path& btf_dir = "/sys/kernel/btf");
  ~MrKernelProbe();
  MrKernelProbe(const MrKernelProbe&) = delete;
  MrKernelProbe& operator=(const MrKernelProbe&) = delete;

  size_t link_count() const { return links_.size(); }
  // The attached kernel functions, for the log line.
  const std::vector<std::string>& functions() const { return functions_; }
  // Adds the stack ids held by calls in progress (a registration's between its entry and its
  // region's commit, a rereg's moving region, a deregistration's taken-out region) for the
  // stacks cleanup (stack_gc.h). False if a map could not be read.
  bool AddInFlightStackIds(std::unordered_set<uint32_t>& ids) const;
  // Ends the start-up's catching of registrations that were inside their handler when the
  // entry programs went live (probes/mr_kernel.bpf.c catch_in_flight), once `now` is
  // kCatchInFlight past the attach. Cheap; called at every snapshot.
  void EndStartUpWhenDue(std::chrono::steady_clock::time_point now);
  static constexpr std::chrono::seconds kCatchInFlight{60};

 private:
  MrKernelProbe() = default;
  std::chrono::steady_clock::time_point attached_at_;
  bool catching_ = false;
  mr_kernel_bpf* skel_ = nullptr;
  std::vector<bpf_link*> links_;
  std::vector<std::string> functions_;
};

}  // namespace rdmascope
