// Attaching uprobes to libibverbs by ELF symbol, shared by the MR and verbs probes.
//
// Debian's libbpf 1.1 cannot attach by name to a symbol with several versions
// (ibv_dereg_mr@IBVERBS_1.0 and @@IBVERBS_1.1), so each entry point is resolved in the ELF
// (sys/elf_symbols) and attached by file offset. Pure forwarders into another entry point of
// the same table (ibv_reg_mr@@IBVERBS_1.1 -> ibv_reg_mr_iova2) are skipped: the inner probe
// sees the call, and every probe hit is a trap.
#pragma once

#include <cstddef>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct bpf_program;
struct bpf_link;

namespace rdmascope {

struct UprobeEntryPoint {
  std::string_view symbol;
  bpf_program* on_entry;
  bpf_program* on_return;  // nullptr: nothing to learn on return
};

struct UprobeAttachment {
  size_t entry_points = 0;        // symbol versions attached
  size_t forwarders_skipped = 0;  // pure forwarders left to their inner entry point
};

// Attaches the table to `target` (a library or a statically linked program), appending the
// links. With default_versions_only, only "@@" (and unversioned) symbols are probed: for
// entry points whose old-ABI wrappers call the current version, as libibverbs' IBVERBS_1.0
// compatibility layer does. Fails if no symbol of the table is found. Every return probe is
// attached before any entry probe, each set in the table's order.
std::expected<UprobeAttachment, std::string> AttachUprobes(const std::string& target,
                                                           std::span<const UprobeEntryPoint> table,
                                                           bool default_versions_only,
                                                           std::vector<bpf_link*>& links);

// The files to probe: the given libraries, else the libibverbs this binary links; then the
// statically linked programs.
std::vector<std::string> UprobeTargets(const std::vector<std::string>& libraries,
                                       const std::vector<std::string>& binaries);

// The default library: the libibverbs this binary was linked with, as the loader found it.
std::string LinkedLibibverbsPath();

// libbpf's messages (verifier logs, attach errors) go to our log at debug level.
void RouteLibbpfLogs();

std::string ErrnoText(int err);

}  // namespace rdmascope
