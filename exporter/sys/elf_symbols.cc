#include "sys/elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>

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
    if (def.vd_next == 0) break;
    offset += def.vd_next;
  }
  return names;
}

}  // namespace

std::expected<std::vector<FunctionSymbol>, std::string> ReadFunctionSymbols(
    const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return std::unexpected("libelf initialisation failed");
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) return std::unexpected(path + ": " + std::strerror(errno));
  std::unique_ptr<Elf, ElfCloser> elf(elf_begin(fd.fd, ELF_C_READ, nullptr));
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
    if (mapped) out.push_back(std::move(symbol));
  }
  return out;
}

}  // namespace rdmascope::sys
