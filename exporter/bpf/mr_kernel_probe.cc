#include "bpf/mr_kernel_probe.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "bpf/mr_probe.h"
#include "bpf/uprobe_attach.h"
#include "core/log.h"
#include "mr_kernel.h"

// bpftool's generated skeleton is C; keep its casts out of our warning set.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wconversion"
#include "mr.skel.h"
#include "mr_kernel.skel.h"
#pragma GCC diagnostic pop

namespace rdmascope {
namespace {

using Programs = decltype(mr_kernel_bpf::progs);
using Program = bpf_program* Programs::*;

struct Hook {
  const char* function;
  Program program;
  bool required;  // without it the path cannot see every user MR
};

// The kernel functions (Linux 6.1 drivers/infiniband/core; see probes/mr_kernel.bpf.c).
// Optional ones are skipped on kernels that lack them: the dmabuf method (5.12+), the ioctl
// REG_MR method (6.10+), rereg and ib_umem_get (the user address and access flags; without
// it the region's address is its iova, which ibv_reg_mr sets to the address).
//
// Attached in this order, so that a program running while we attach (a registration cache
// churning) is counted exactly, whatever instant each trampoline goes live:
//  1. the release, exit before entry: once any region is recorded its release is seen
//     whole (an entry without its exit would take the region out and never count it out).
//     Releases of regions not recorded yet find no owner and do nothing.
//  2. the helpers a registration reads (ib_umem_get, rdma_restrack_add): they only fill
//     a call record, which nothing creates yet.
//  3. the registration exits, then 4. their entries: a call counts only if its entry ran,
//     and then everything after it is attached. A call already inside when its entry goes
//     live is not counted (its MR is in the restrack dump taken after attaching).
// Registering the releases last (the order of the handlers in the file) once left ~100
// regions recorded whose deregistration ran in the gap: counted outstanding for ever.
// clang-format off
constexpr Hook kHooks[] = {
    {"ib_dereg_mr_user",                              &Programs::dereg_mr_exit,       true},
    {"ib_dereg_mr_user",                              &Programs::dereg_mr_entry,      true},
    {"ib_umem_get",                                   &Programs::umem_get,            false},
    {"rdma_restrack_add",                             &Programs::restrack_add,        true},
    {"ib_uverbs_reg_mr",                              &Programs::reg_mr_exit,         true},
    {"ib_uverbs_handler_UVERBS_METHOD_REG_DMABUF_MR", &Programs::reg_dmabuf_mr_exit,  false},
    {"ib_uverbs_handler_UVERBS_METHOD_REG_MR",        &Programs::reg_mr_ioctl_exit,   false},
    {"ib_uverbs_rereg_mr",                            &Programs::rereg_mr_exit,       false},
    {"ib_uverbs_reg_mr",                              &Programs::reg_mr_entry,        true},
    {"ib_uverbs_handler_UVERBS_METHOD_REG_DMABUF_MR", &Programs::reg_dmabuf_mr_entry, false},
    {"ib_uverbs_handler_UVERBS_METHOD_REG_MR",        &Programs::reg_mr_ioctl_entry,  false},
    {"ib_uverbs_rereg_mr",                            &Programs::rereg_mr_entry,      false},
};
// clang-format on

// The modules whose BTF must be there (CONFIG_DEBUG_INFO_BTF_MODULES, modules loaded).
constexpr const char* kModules[] = {"ib_core", "ib_uverbs"};

// The functions with BTF in vmlinux and the RDMA modules, or why they cannot be read.
std::expected<std::set<std::string>, std::string> KernelFunctions(
    const std::filesystem::path& btf_dir) {
  std::set<std::string> wanted;
  for (const Hook& hook : kHooks) wanted.insert(hook.function);
  btf* base = btf__parse((btf_dir / "vmlinux").c_str(), nullptr);
  if (base == nullptr) return std::unexpected("no kernel BTF at " + (btf_dir / "vmlinux").string());
  std::set<std::string> found;
  std::string error;
  for (const char* module : kModules) {
    const std::filesystem::path path = btf_dir / module;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      error = "no BTF for " + std::string(module) + " (" + path.string() +
              " missing: module not loaded, or a kernel without "
              "CONFIG_DEBUG_INFO_BTF_MODULES)";
      break;
    }
    btf* split = btf__parse_split(path.c_str(), base);
    if (split == nullptr) {
      error = "cannot read the BTF of " + std::string(module) + ": " + ErrnoText(errno);
      break;
    }
    for (const std::string& name : wanted) {
      if (btf__find_by_name_kind(split, name.c_str(), BTF_KIND_FUNC) >= 0) found.insert(name);
    }
    btf__free(split);
  }
  btf__free(base);
  if (!error.empty()) return std::unexpected(error);
  return found;
}

}  // namespace

std::optional<MrTracking> ParseMrTracking(std::string_view text) {
  if (text == "auto") return MrTracking::kAuto;
  if (text == "kernel") return MrTracking::kKernel;
  if (text == "uprobes") return MrTracking::kUprobes;
  return std::nullopt;
}

namespace {
// The functions present, or why the kernel path cannot be used (one BTF parse: under
// emulation parsing vmlinux's BTF takes a while).
std::expected<std::set<std::string>, std::string> UsableFunctions(
    const std::filesystem::path& btf_dir) {
  auto functions = KernelFunctions(btf_dir);
  if (!functions) return functions;
  std::string missing;
  for (const Hook& hook : kHooks) {
    if (!hook.required || functions->contains(hook.function)) continue;
    if (missing.find(hook.function) != std::string::npos) continue;
    missing += (missing.empty() ? "" : ", ") + std::string(hook.function);
  }
  if (!missing.empty()) return std::unexpected("kernel functions without BTF: " + missing);
  return functions;
}
}  // namespace

std::optional<std::string> MrKernelPathUnavailable(const std::filesystem::path& btf_dir) {
  const auto functions = UsableFunctions(btf_dir);
  if (!functions) return functions.error();
  return std::nullopt;
}

std::expected<std::unique_ptr<MrKernelProbe>, std::string> MrKernelProbe::Attach(
    const MrKernelMaps& maps, uint32_t max_regions, const std::filesystem::path& btf_dir) {
  const auto functions = UsableFunctions(btf_dir);
  if (!functions) return std::unexpected(functions.error());

  std::unique_ptr<MrKernelProbe> probe(new MrKernelProbe());
  probe->skel_ = mr_kernel_bpf__open();
  if (probe->skel_ == nullptr) {
    return std::unexpected("cannot open the kernel-path BPF object: " + ErrnoText(errno));
  }
  mr_kernel_bpf* skel = probe->skel_;
  // The shared maps: what these programs write, MrProbe reads.
  const std::pair<bpf_map*, int> shared[] = {{skel->maps.regions, maps.regions},
                                             {skel->maps.procs, maps.procs},
                                             {skel->maps.stacks, maps.stacks},
                                             {skel->maps.globals, maps.globals},
                                             {skel->maps.stack_samples, maps.stack_samples},
                                             {skel->maps.code_ranges, maps.code_ranges},
                                             {skel->maps.sites_seen, maps.sites_seen}};
  for (const auto& [map, fd] : shared) {
    if (const int err = bpf_map__reuse_fd(map, fd); err != 0) {
      return std::unexpected("cannot share the map " + std::string(bpf_map__name(map)) + ": " +
                             ErrnoText(-err));
    }
  }
  bpf_map__set_max_entries(skel->maps.owners, max_regions);
  skel->rodata->stack_copy_bytes = maps.stack_bytes;
  for (const Hook& hook : kHooks) {
    if (!functions->contains(hook.function)) {
      bpf_program__set_autoload(skel->progs.*hook.program, false);
    }
  }
  if (const int err = mr_kernel_bpf__load(skel); err != 0) {
    return std::unexpected(
        "cannot load the kernel-path BPF programs (fentry/fexit on modules "
        "needs root and BTF trampolines): " +
        ErrnoText(-err));
  }
  // Before the first trampoline goes live (see catch_in_flight in the BPF object).
  skel->bss->catch_in_flight = 1;
  probe->catching_ = true;
  probe->attached_at_ = std::chrono::steady_clock::now();
  for (const Hook& hook : kHooks) {
    bpf_program* program = skel->progs.*hook.program;
    if (!bpf_program__autoload(program)) continue;
    bpf_link* link = bpf_program__attach(program);
    if (link == nullptr) {
      return std::unexpected("cannot attach " + std::string(bpf_program__section_name(program)) +
                             ": " + ErrnoText(errno));
    }
    probe->links_.push_back(link);
    if (std::ranges::find(probe->functions_, hook.function) == probe->functions_.end()) {
      probe->functions_.push_back(hook.function);
    }
  }
  return probe;
}

namespace {
// Calls `visit(value)` for every entry of a hash map keyed by pid_tgid; false on a read error.
template <typename Value, typename Visitor>
bool ForEachCall(int fd, Visitor visit) {
  uint64_t key = 0;
  uint64_t next = 0;
  const void* previous = nullptr;
  while (bpf_map_get_next_key(fd, previous, &next) == 0) {
    key = next;
    previous = &key;
    Value value{};
    if (bpf_map_lookup_elem(fd, &key, &value) == 0) visit(value);  // else: the call ended
  }
  if (errno == ENOENT) return true;
  log::Warn("mr stacks cleanup skipped: cannot read a call map", {{"err", ErrnoText(errno)}});
  return false;
}

void AddStackId(std::unordered_set<uint32_t>& ids, int32_t id) {
  if (id >= 0) ids.insert(static_cast<uint32_t>(id));
}
}  // namespace

bool MrKernelProbe::AddInFlightStackIds(std::unordered_set<uint32_t>& ids) const {
  return ForEachCall<kmr_call>(bpf_map__fd(skel_->maps.kcalls),
                               [&](const kmr_call& call) {
                                 AddStackId(ids, call.stack_id);
                                 if (call.moved) AddStackId(ids, call.old.stack_id);
                               }) &&
         ForEachCall<kmr_dereg>(bpf_map__fd(skel_->maps.kderegs), [&](const kmr_dereg& dereg) {
           AddStackId(ids, dereg.region.stack_id);
         });
}

void MrKernelProbe::EndStartUpWhenDue(std::chrono::steady_clock::time_point now) {
  if (!catching_ || now - attached_at_ < kCatchInFlight) return;
  skel_->bss->catch_in_flight = 0;
  catching_ = false;
}

MrKernelProbe::~MrKernelProbe() {
  for (bpf_link* link : links_) bpf_link__destroy(link);
  if (skel_ != nullptr) mr_kernel_bpf__destroy(skel_);
}

// A member of MrProbe, here with the rest of the kernel path: it hands over mr.bpf.c's maps.
std::expected<void, std::string> MrProbe::AttachKernelPath(const MrProbeOptions& options) {
  if (options.tracking == MrTracking::kUprobes) return {};
  const MrKernelMaps maps{.regions = bpf_map__fd(skel_->maps.regions),
                          .procs = bpf_map__fd(skel_->maps.procs),
                          .stacks = bpf_map__fd(skel_->maps.stacks),
                          .globals = bpf_map__fd(skel_->maps.globals),
                          .stack_samples = bpf_map__fd(skel_->maps.stack_samples),
                          .code_ranges = bpf_map__fd(skel_->maps.code_ranges),
                          .sites_seen = bpf_map__fd(skel_->maps.sites_seen),
                          .stack_bytes = skel_->rodata->stack_copy_bytes};
  auto kernel = MrKernelProbe::Attach(maps, options.max_regions);
  if (!kernel) {
    if (options.tracking == MrTracking::kKernel) {
      return std::unexpected("--collector.mr.tracking=kernel: " + kernel.error());
    }
    log::Info("mr tracking falls back to uprobes on libibverbs: the kernel path is unavailable",
              {{"reason", kernel.error()}});
    return {};
  }
  std::string functions;
  for (const std::string& name : (*kernel)->functions()) {
    functions += (functions.empty() ? "" : ",") + name;
  }
  log::Info("mr tracking in the kernel (fentry/fexit): every program, no uprobes attached",
            {{"functions", functions}, {"links", std::to_string((*kernel)->link_count())}});
  kernel_ = std::move(*kernel);
  return {};
}

}  // namespace rdmascope
