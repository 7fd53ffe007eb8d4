// What an ELF file must not hold before libelf/libdw/libdwfl are given it (elfutils 0.188), since
// they act on what it says:
// - compressed sections (SHF_COMPRESSED, and GNU .zdebug*) are inflated into memory whole when
//   libdw opens the DWARF (libdw/dwarf_begin_elf.c check_section -> elf_compress) or libdwfl a
//   compressed symbol table, to the size the file's header claims: a 1-KiB file can ask for
//   terabytes. The claims are bounded here.
// - a .gnu_debugaltlink (dwz) makes libdw itself open /usr/lib/debug/.build-id/... and then the
//   link's path (absolute, or beside the file) in the exporter's namespace when libdwfl has not
//   supplied the alternate file (libdw/dwarf_getalt.c find_debug_altlink, open(O_RDONLY)).
// - a split-DWARF skeleton unit (DW_AT_dwo_name, DW_AT_GNU_dwo_name) makes libdw open the .dwo
//   path the unit names, with its DW_AT_comp_dir (libdw/libdw_find_split_unit.c, open(O_RDONLY)).
// Neither path goes through a libdwfl callback, so a file holding them is refused, unless the
// caller found the alternate file itself (ElfVerdict::alt_build_id).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct Elf;

namespace rdmascope::sys {

struct ElfLimits {
  uint64_t max_section_inflated = 256ULL << 20;  // one compressed section, decompressed
  uint64_t max_total_inflated = 512ULL << 20;    // all of one file's
};

struct ElfVerdict {
  std::string refused;                // why the file must not be parsed; "" when it may
  bool compressed = false;            // libelf would write into its image (decompressing)
  std::vector<uint8_t> alt_build_id;  // of its .gnu_debugaltlink, empty without one
  std::string alt_name;               // the link's name (never opened as a path)
  bool split_dwarf = false;           // it has skeleton units naming .dwo files
};

// Reads the section headers, the compression headers and .debug_abbrev of `elf` (nothing is
// decompressed in `elf`). `fd`: the file, for a private descriptor when .debug_abbrev itself
// is compressed (-1: a copy of `elf`'s bytes instead).
ElfVerdict CheckElf(Elf* elf, int fd, const ElfLimits& limits = {});

// Whether a .debug_abbrev section declares DW_AT_dwo_name or DW_AT_GNU_dwo_name. Malformed
// data counts as declaring it (the file is then refused: libdw would read it the same way).
bool AbbrevsNameDwo(const uint8_t* data, size_t size);

}  // namespace rdmascope::sys
