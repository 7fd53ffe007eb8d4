// Versioned dynamic symbols of a shared library or executable, read with libelf.
//
// Debian's libbpf 1.1 attaches uprobes by name only to unversioned symbols and fails on
// libibverbs, which exports several versions of one name (ibv_dereg_mr@IBVERBS_1.0 and
// ibv_dereg_mr@@IBVERBS_1.1). We resolve every version ourselves and attach by file offset.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <vector>

namespace rdmascope::sys {

struct FunctionSymbol {
  std::string name;
  std::string version;          // empty for unversioned symbols
  bool default_version = true;  // "@@" (what new links bind to) rather than "@"
  uint64_t address = 0;         // st_value
  uint64_t file_offset = 0;     // what a uprobe attaches to
  // The function this one only forwards to (x86-64 register moves + jmp, directly or through
  // the PLT), e.g. ibv_reg_mr@@IBVERBS_1.1 -> ibv_reg_mr_iova2; empty otherwise.
  std::string forwards_to;
};

// Defined functions of .dynsym, or of .symtab for a statically linked program (no versions
// there), with their forwarding targets; error text on unreadable or non-ELF files.
std::expected<std::vector<FunctionSymbol>, std::string> ReadFunctionSymbols(
    const std::string& path);

}  // namespace rdmascope::sys
