#include "sys/elf_checks.h"

#include <dwarf.h>
#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <string_view>
#include <vector>

namespace rdmascope::sys {
namespace {

constexpr uint64_t kDwAtGnuDwoName = 0x2130;   // dwarf.h DW_AT_GNU_dwo_name
constexpr uint64_t kFormImplicitConst = 0x21;  // dwarf.h DW_FORM_implicit_const

// LEB128 as libdw reads it (libdw/memory-access.h): at most 10 bytes for 64 bits.
bool ReadLeb(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p >= end) return false;
    const uint8_t byte = *p++;
    if (shift < 64) value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

std::string MiB(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// The size a GNU .zdebug section inflates to: "ZLIB" and a 64-bit big-endian size
// (libelf/elf_compress_gnu.c).
bool ZdebugSize(Elf_Scn* section, uint64_t& size) {
  Elf_Data* raw = elf_rawdata(section, nullptr);
  if (raw == nullptr || raw->d_buf == nullptr || raw->d_size < 12) return false;
  const auto* bytes = static_cast<const uint8_t*>(raw->d_buf);
  if (std::memcmp(bytes, "ZLIB", 4) != 0) return false;
  size = 0;
  for (int i = 4; i < 12; ++i) size = (size << 8) | bytes[i];
  return true;
}

// .debug_abbrev decompressed in a descriptor of its own, never in `elf` (elf_compress writes the
// section header in place): a private copy-on-write mapping of the file `fd`, or a copy of
// `elf`'s bytes without one. Within the bounds already checked.
bool CompressedAbbrevsNameDwo(Elf* elf, int fd, size_t index) {
  std::vector<char> bytes;
  Elf* copy = nullptr;
  if (fd >= 0) {
    copy = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, nullptr);
  } else {
    size_t size = 0;
    const char* raw = elf_rawfile(elf, &size);
    if (raw == nullptr) return true;
    bytes.assign(raw, raw + size);
    copy = elf_memory(bytes.data(), bytes.size());
  }
  if (copy == nullptr) return true;
  bool names = true;
  Elf_Scn* section = elf_getscn(copy, index);
  GElf_Shdr header{};
  if (section != nullptr && gelf_getshdr(section, &header) != nullptr) {
    const bool ok = (header.sh_flags & SHF_COMPRESSED) != 0 ? elf_compress(section, 0, 0) == 1
                                                            : elf_compress_gnu(section, 0, 0) == 1;
    Elf_Data* data = ok ? elf_rawdata(section, nullptr) : nullptr;
    if (data != nullptr && data->d_buf != nullptr) {
      names = AbbrevsNameDwo(static_cast<const uint8_t*>(data->d_buf), data->d_size);
    }
  }
  elf_end(copy);
  return names;
}

}  // namespace

bool AbbrevsNameDwo(const uint8_t* data, size_t size) {
  const uint8_t* p = data;
  const uint8_t* const end = data + size;
  while (p < end) {
    uint64_t code = 0;
    if (!ReadLeb(p, end, code)) return true;
    if (code == 0) continue;  // the end of one unit's table
    uint64_t tag = 0;
    if (!ReadLeb(p, end, tag) || p >= end) return true;
    ++p;  // DW_CHILDREN_yes/no
    for (;;) {
      uint64_t name = 0;
      uint64_t form = 0;
      if (!ReadLeb(p, end, name) || !ReadLeb(p, end, form)) return true;
      if (name == 0 && form == 0) break;
      if (name == DW_AT_dwo_name || name == kDwAtGnuDwoName) return true;
      if (form == kFormImplicitConst) {
        uint64_t constant = 0;
        if (!ReadLeb(p, end, constant)) return true;
      }
    }
  }
  return false;
}

ElfVerdict CheckElf(Elf* elf, int fd, const ElfLimits& limits) {
  ElfVerdict verdict;
  if (elf == nullptr || elf_kind(elf) != ELF_K_ELF) {
    verdict.refused = "not an ELF file";
    return verdict;
  }
  GElf_Ehdr ehdr{};
  size_t names = 0;
  if (gelf_getehdr(elf, &ehdr) == nullptr || elf_getshdrstrndx(elf, &names) != 0) {
    verdict.refused = std::string("unreadable ELF header: ") + elf_errmsg(-1);
    return verdict;
  }
  uint64_t total = 0;
  bool dwarf = false;  // sections whose forms may point into the alternate (dwz) file
  for (Elf_Scn* section = nullptr; (section = elf_nextscn(elf, section)) != nullptr;) {
    GElf_Shdr header{};
    if (gelf_getshdr(section, &header) == nullptr) {
      verdict.refused = std::string("unreadable section header: ") + elf_errmsg(-1);
      return verdict;
    }
    const char* raw_name = elf_strptr(elf, names, header.sh_name);
    const std::string_view name = raw_name != nullptr ? raw_name : "";
    if (header.sh_type == SHT_NOBITS) continue;
    for (const std::string_view user :
         {".debug_info", ".debug_types", ".debug_line", ".debug_macro", ".zdebug_info",
          ".zdebug_types", ".zdebug_line", ".zdebug_macro"}) {
      if (name == user) dwarf = true;
    }
    uint64_t inflated = 0;
    bool compressed = false;
    if ((header.sh_flags & SHF_COMPRESSED) != 0) {
      GElf_Chdr chdr{};
      if (gelf_getchdr(section, &chdr) == nullptr) {
        verdict.refused = std::string(name) + ": unreadable compression header";
        return verdict;
      }
      inflated = chdr.ch_size;
      compressed = true;
    } else if (name.starts_with(".zdebug")) {
      if (!ZdebugSize(section, inflated)) {
        verdict.refused = std::string(name) + ": unreadable compression header";
        return verdict;
      }
      compressed = true;
    }
    if (compressed) {
      verdict.compressed = true;
      if (inflated > limits.max_section_inflated) {
        verdict.refused =
            std::string(name) + " inflates to more than " + MiB(limits.max_section_inflated);
        return verdict;
      }
      total += inflated;
      if (total > limits.max_total_inflated) {
        verdict.refused =
            "compressed sections inflate to more than " + MiB(limits.max_total_inflated);
        return verdict;
      }
    }
    if (name == ".gnu_debugaltlink") {
      Elf_Data* data = elf_rawdata(section, nullptr);
      const auto* bytes = data != nullptr ? static_cast<const uint8_t*>(data->d_buf) : nullptr;
      const size_t size = bytes != nullptr ? data->d_size : 0;
      const void* nul = size > 0 ? std::memchr(bytes, 0, size) : nullptr;
      if (nul == nullptr) {
        verdict.refused = ".gnu_debugaltlink unreadable";
        return verdict;
      }
      const auto* id = static_cast<const uint8_t*>(nul) + 1;
      verdict.alt_name.assign(reinterpret_cast<const char*>(bytes),
                              static_cast<size_t>(id - 1 - bytes));
      verdict.alt_build_id.assign(id, bytes + size);
      if (verdict.alt_build_id.empty()) {
        verdict.refused = ".gnu_debugaltlink without a build id";
        return verdict;
      }
    }
    if (name == ".debug_abbrev" || name == ".zdebug_abbrev") {
      if (compressed) {
        verdict.split_dwarf = CompressedAbbrevsNameDwo(elf, fd, elf_ndxscn(section));
      } else {
        Elf_Data* data = elf_rawdata(section, nullptr);
        verdict.split_dwarf =
            data == nullptr || data->d_buf == nullptr ||
            AbbrevsNameDwo(static_cast<const uint8_t*>(data->d_buf), data->d_size);
      }
    }
  }
  if (verdict.split_dwarf) {
    verdict.refused = "split DWARF (.dwo paths libdw would open by name)";
  }
  // A stripped library keeps its .gnu_debugaltlink (Debian's dh_strip after dwz: rdma-core's
  // librxe-rdmav34.so) with no DWARF of its own: nothing in it refers to the alternate file,
  // libdw never looks for one (it is only read for a DW_FORM_GNU_*_alt of a unit), so the
  // link asks for nothing. Its debug file, found by build id, carries the link that matters.
  if (!dwarf) {
    verdict.alt_build_id.clear();
    verdict.alt_name.clear();
  }
  return verdict;
}

}  // namespace rdmascope::sys
