#include "sys/elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <span>

#include "sys/x86_tail_jump.h"

namespace rdmascope::sys {
namespace {

struct ElfCloser {
  void operator()(Elf* elf) const { elf_end(elf); }
};

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Version index -> version name, from SHT_GNU_verdef.
std::map<uint16_t, std::string> VersionDefinitions(Elf* elf, Elf_Scn* verdef, size_t strtab) {
  std::map<uint16_t, std::string> names;
  Elf_Data* data = elf_getdata(verdef, nullptr);
  if (data == nullptr) return names;
  size_t offset = 0;
  for (;;) {
    GElf_Verdef def;
    if (gelf_getverdef(data, static_cast<int>(offset), &def) == nullptr) break;
    GElf_Verdaux aux;
    if (gelf_getverdaux(data, static_cast<int>(offset + def.vd_aux), &aux) != nullptr) {
      if (const char* name = elf_strptr(elf, strtab, aux.vda_name)) names[def.vd_ndx] = name;
    }
    // The next entry must lie further inside the section: a vd_next of 2^31 twice brought the
    // offset (cast to int) back to 0, forever (found by fuzz/elf_symbols_fuzzer).
    if (def.vd_next == 0 || def.vd_next >= data->d_size - offset) break;
    offset += def.vd_next;
  }
  return names;
}

// The file's bytes at virtual address `address`, at most `length` of them, within one segment.
std::span<const uint8_t> BytesAt(Elf* elf, const std::vector<GElf_Phdr>& loads, uint64_t address,
                                 uint64_t length) {
  size_t file_size = 0;
  const auto* file = reinterpret_cast<const uint8_t*>(elf_rawfile(elf, &file_size));
  if (file == nullptr) return {};
  for (const GElf_Phdr& load : loads) {
    if (address < load.p_vaddr || address >= load.p_vaddr + load.p_filesz) continue;
    const uint64_t offset = address - load.p_vaddr + load.p_offset;
    if (offset >= file_size) return {};
    const uint64_t available =
        std::min<uint64_t>(load.p_vaddr + load.p_filesz - address, file_size - offset);
    return {file + offset, std::min(length, available)};
  }
  return {};
}

// GOT slot address -> name of the symbol the dynamic linker binds it to (.rela.plt).
std::map<uint64_t, std::string> JumpSlots(Elf* elf) {
  std::map<uint64_t, std::string> slots;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type != SHT_RELA) continue;
    Elf_Scn* symbols_scn = elf_getscn(elf, header.sh_link);
    GElf_Shdr symbols_header;
    if (symbols_scn == nullptr || gelf_getshdr(symbols_scn, &symbols_header) == nullptr) continue;
    Elf_Data* relocations = elf_getdata(scn, nullptr);
    Elf_Data* symbols = elf_getdata(symbols_scn, nullptr);
    const size_t count = header.sh_entsize ? header.sh_size / header.sh_entsize : 0;
    for (size_t i = 0; relocations && symbols && i < count; ++i) {
      GElf_Rela rela;
      GElf_Sym sym;
      if (gelf_getrela(relocations, static_cast<int>(i), &rela) == nullptr ||
          GELF_R_TYPE(rela.r_info) != R_X86_64_JUMP_SLOT ||
          gelf_getsym(symbols, static_cast<int>(GELF_R_SYM(rela.r_info)), &sym) == nullptr) {
        continue;
      }
      if (const char* name = elf_strptr(elf, symbols_header.sh_link, sym.st_name)) {
        slots[rela.r_offset] = name;
      }
    }
  }
  return slots;
}

// Fills FunctionSymbol::forwards_to: a jmp straight to another function of the file, or to a
// PLT stub whose GOT slot is bound to a named symbol.
void ResolveForwarders(Elf* elf, const std::vector<GElf_Phdr>& loads,
                       const std::vector<uint64_t>& sizes, std::vector<FunctionSymbol>& functions) {
  std::map<uint64_t, std::string> by_address;
  for (const FunctionSymbol& function : functions)
    by_address.emplace(function.address, function.name);
  std::map<uint64_t, std::string> slots;  // read only if some function jumps outside itself
  bool slots_read = false;
  constexpr uint64_t kPltStubBytes = 16;
  for (size_t i = 0; i < functions.size(); ++i) {
    FunctionSymbol& function = functions[i];
    const auto target =
        TailJumpTarget(BytesAt(elf, loads, function.address, sizes[i]), function.address);
    if (!target || *target == function.address) continue;
    if (const auto it = by_address.find(*target); it != by_address.end()) {
      function.forwards_to = it->second;
      continue;
    }
    const auto slot = PltGotSlot(BytesAt(elf, loads, *target, kPltStubBytes), *target);
    if (!slot) continue;
    if (!slots_read) {
      slots = JumpSlots(elf);
      slots_read = true;
    }
    if (const auto it = slots.find(*slot); it != slots.end()) function.forwards_to = it->second;
  }
}

}  // namespace

std::expected<std::vector<FunctionSymbol>, std::string> ReadFunctionSymbols(
    const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return std::unexpected("libelf initialisation failed");
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) return std::unexpected(path + ": " + std::strerror(errno));
  // Mapped, not read: the whole file is needed for the forwarders (elf_rawfile), and reading
  // it into libelf's buffers leaks them when sections were loaded first.
  std::unique_ptr<Elf, ElfCloser> elf(elf_begin(fd.fd, ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return std::unexpected(path + ": not an ELF file");

  Elf_Scn* dynsym = nullptr;
  Elf_Scn* symtab = nullptr;
  GElf_Shdr symtab_header{};
  Elf_Scn* versym = nullptr;
  Elf_Scn* verdef = nullptr;
  GElf_Shdr dynsym_header{};
  size_t verdef_strtab = 0;
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn; scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr) continue;
    if (header.sh_type == SHT_DYNSYM) {
      dynsym = scn;
      dynsym_header = header;
    } else if (header.sh_type == SHT_SYMTAB) {
      symtab = scn;
      symtab_header = header;
    } else if (header.sh_type == SHT_GNU_versym) {
      versym = scn;
    } else if (header.sh_type == SHT_GNU_verdef) {
      verdef = scn;
      verdef_strtab = header.sh_link;
    }
  }
  if (dynsym == nullptr) {
    // A statically linked program: its own symbol table, unversioned.
    if (symtab == nullptr) return std::unexpected(path + ": no symbol table");
    dynsym = symtab;
    dynsym_header = symtab_header;
    versym = nullptr;
    verdef = nullptr;
  }
  const auto versions = verdef ? VersionDefinitions(elf.get(), verdef, verdef_strtab)
                               : std::map<uint16_t, std::string>{};

  // Executable segments map addresses to file offsets.
  size_t phnum = 0;
  elf_getphdrnum(elf.get(), &phnum);
  std::vector<GElf_Phdr> loads;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf.get(), static_cast<int>(i), &phdr) && phdr.p_type == PT_LOAD) {
      loads.push_back(phdr);
    }
  }

  Elf_Data* symbols = elf_getdata(dynsym, nullptr);
  Elf_Data* version_data = versym ? elf_getdata(versym, nullptr) : nullptr;
  const size_t count =
      dynsym_header.sh_entsize ? dynsym_header.sh_size / dynsym_header.sh_entsize : 0;
  std::vector<FunctionSymbol> out;
  std::vector<uint64_t> sizes;  // st_size of out[i]
  GElf_Ehdr ehdr;
  for (size_t i = 0; symbols && i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(symbols, static_cast<int>(i), &sym) == nullptr) continue;
    if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) {
      continue;
    }
    const char* name = elf_strptr(elf.get(), dynsym_header.sh_link, sym.st_name);
    if (name == nullptr) continue;
    FunctionSymbol symbol{.name = name, .address = sym.st_value};
    if (version_data != nullptr) {
      GElf_Versym raw;
      if (gelf_getversym(version_data, static_cast<int>(i), &raw) != nullptr) {
        symbol.default_version = (raw & 0x8000) == 0;
        if (const auto it = versions.find(raw & 0x7fff);
            it != versions.end() && (raw & 0x7fff) > 1) {
          symbol.version = it->second;
        }
      }
    }
    bool mapped = false;
    for (const GElf_Phdr& load : loads) {
      if (sym.st_value >= load.p_vaddr && sym.st_value < load.p_vaddr + load.p_memsz) {
        symbol.file_offset = sym.st_value - load.p_vaddr + load.p_offset;
        mapped = true;
        break;
      }
    }
    if (mapped) {
      sizes.push_back(sym.st_size);
      out.push_back(std::move(symbol));
    }
  }
  if (gelf_getehdr(elf.get(), &ehdr) != nullptr && ehdr.e_machine == EM_X86_64) {
    ResolveForwarders(elf.get(), loads, sizes, out);
  }
  return out;
}

}  // namespace rdmascope::sys
