#include "sys/module_files.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <libelf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <expected>
#include <span>
#include <string_view>

#include "sys/elf_checks.h"

namespace rdmascope::sys {
namespace {

std::string BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

void Refuse(ModuleFile& file, std::string_view module, const std::string& why) {
  file.refused = why;
  if (file.process->refused.empty()) file.process->refused = BaseName(module) + ": " + why;
}

// The line of the maps that `module` was reported from: its path, a range inside the module's
// (the first one: where its ELF header is mapped).
const MappedFile* MappingOf(const ProcessFiles& process, Dwfl_Module* module,
                            std::string_view path) {
  Dwarf_Addr low = 0;
  Dwarf_Addr high = 0;
  dwfl_module_info(module, nullptr, &low, &high, nullptr, nullptr, nullptr, nullptr);
  const MappedFile* best = nullptr;
  for (const MappedFile& mapping : process.mapped) {
    if (mapping.path != path || mapping.start < low || mapping.start >= high) continue;
    if (best == nullptr || mapping.start < best->start) best = &mapping;
  }
  return best;
}

// A debug or alternate file below the process's root: a file only root can write (its bytes
// are then stable between this check and libelf's own reading of the descriptor), checked
// (sys/elf_checks.h), with the build id `want`. The descriptor, for libdwfl to own.
std::expected<UniqueFd, std::string> OpenDebugFile(ProcessFiles& process, const std::string& path,
                                                   std::span<const uint8_t> want,
                                                   ElfVerdict& verdict) {
  auto opened = process.access->OpenInRoot(process.pid, path);
  if (!opened) return std::unexpected(opened.error());
  if (!OnlyRootCanWrite(opened->status)) {
    return std::unexpected("a debug file others than root can write");
  }
  const auto size = static_cast<size_t>(opened->status.st_size);
  void* address = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, opened->fd.get(), 0);
  if (address == MAP_FAILED) return std::unexpected(std::string("mmap: ") + std::strerror(errno));
  Elf* elf = elf_memory(static_cast<char*>(address), size);
  std::string why;
  const void* id = nullptr;
  const ssize_t id_size = elf != nullptr ? dwelf_elf_gnu_build_id(elf, &id) : -1;
  if (id_size <= 0 || static_cast<size_t>(id_size) != want.size() ||
      std::memcmp(id, want.data(), want.size()) != 0) {
    why = "build id differs";
  } else {
    verdict = CheckElf(elf, opened->fd.get());
    why = verdict.refused;
  }
  if (elf != nullptr) elf_end(elf);
  munmap(address, size);
  if (!why.empty()) return std::unexpected(why);
  return std::move(opened->fd);
}

// The alternate (dwz) file of a DWARF file, by its build id in the process's root: libdw
// would otherwise look for it itself, by path, in the exporter's namespace (elf_checks.h).
bool FindAlt(ModuleFile& file, const std::vector<uint8_t>& build_id, const std::string& name,
             std::string& why) {
  const auto path = BuildIdDebugPath(build_id);
  if (!path) {
    why = ".gnu_debugaltlink and no alternate file";
    return false;
  }
  ElfVerdict verdict;
  auto fd = OpenDebugFile(*file.process, *path, build_id, verdict);
  if (!fd || !verdict.alt_build_id.empty()) {
    why = ".gnu_debugaltlink and no alternate file" + (fd ? std::string() : ": " + fd.error());
    return false;
  }
  file.alt = std::move(*fd);
  file.alt_name = name;
  return true;
}

// find_elf (libdwfl/dwfl_module_getdwarf.c __libdwfl_getelf): a descriptor and/or *elfp, owned
// by libdwfl from then on. Here *elfp over the image the ElfCache keeps, no descriptor, and no
// *file_name: libdwfl would make the file's directory the DWARF's debugdir
// (dwfl_module_getdwarf.c load_dw, mod->elfdir), against which libdw resolves relative paths.
int FindElf(Dwfl_Module* module, void** userdata, const char* name, Dwarf_Addr base,
            char** file_name, Elf** elfp) {
  auto* file = static_cast<ModuleFile*>(*userdata);
  if (file == nullptr || file->process == nullptr || name == nullptr) return -1;
  ProcessFiles& process = *file->process;
  const std::string_view path = name;
  if (path.starts_with("[vdso")) {
    // From the process's memory (linux-proc-maps.c: read_proc_memory on /proc/PID/mem).
    if (!process.access->libdwfl_may_read_proc()) return -1;
    return dwfl_linux_proc_find_elf(module, userdata, name, base, file_name, elfp);
  }
  if (!path.starts_with("/")) return -1;
  const MappedFile* mapping = MappingOf(process, module, path);
  if (mapping == nullptr) {
    Refuse(*file, path, "not in the maps read");
    return -1;
  }
  auto opened = process.access->OpenMapping(process.pid, *mapping);
  if (!opened) {
    Refuse(*file, path, opened.error());
    return -1;
  }
  ElfOpened elf = process.cache->Open(std::move(*opened));
  if (!elf.image) {
    Refuse(*file, path, elf.refused);
    return -1;
  }
  std::string why;
  if (!elf.alt_build_id.empty() && !FindAlt(*file, elf.alt_build_id, elf.alt_name, why)) {
    Refuse(*file, path, why);
    return -1;
  }
  Elf* handle = elf.image->NewElf();
  if (handle == nullptr) {
    Refuse(*file, path, std::string("libelf: ") + elf_errmsg(-1));
    return -1;
  }
  file->image = std::move(elf.image);
  *elfp = handle;
  return -1;
}

// find_debuginfo (dwfl_module_getdwarf.c find_debuginfo, and find_debug_altlink for the
// alternate file): a descriptor or -1. *debuginfo_file_name is never set: libdwfl would open()
// a name left there (open_elf). No debuginfod, no search path of the exporter's.
int FindDebuginfo(Dwfl_Module* module, void** userdata, const char* module_name, Dwarf_Addr,
                  const char*, const char* debuglink, GElf_Word debuglink_crc, char**) {
  auto* file = static_cast<ModuleFile*>(*userdata);
  if (file == nullptr || file->process == nullptr || module_name == nullptr) return -1;
  // The alternate file's request: its .gnu_debugaltlink name and no CRC.
  if (file->alt.valid() && debuglink != nullptr && debuglink_crc == 0 &&
      file->alt_name == debuglink) {
    return fcntl(file->alt.get(), F_DUPFD_CLOEXEC, 0);
  }
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int bits_size = dwfl_module_build_id(module, &bits, &vaddr);
  // Without a build id nothing tells a debug file from any other: none is used.
  if (bits_size <= 0) return -1;
  const std::span<const uint8_t> build_id(bits, static_cast<size_t>(bits_size));
  std::vector<std::string> candidates;
  if (auto path = BuildIdDebugPath(build_id)) candidates.push_back(*path);
  // A debuglink as a file name only, where GDB looks (beside the file, its .debug/, the
  // debug root mirroring its directory), all inside the process's root.
  if (debuglink != nullptr && IsPlainDebuglinkName(debuglink)) {
    const std::string_view path = module_name;
    const std::string directory(path.substr(0, path.rfind('/') + 1));
    if (directory.starts_with("/")) {
      candidates.push_back("/usr/lib/debug" + directory + debuglink);
      candidates.push_back(directory + debuglink);
      candidates.push_back(directory + ".debug/" + debuglink);
    }
  }
  for (const std::string& candidate : candidates) {
    ElfVerdict verdict;
    auto fd = OpenDebugFile(*file->process, candidate, build_id, verdict);
    if (!fd) continue;  // missing, or refused: the next candidate, else no debug info
    std::string why;
    if (!verdict.alt_build_id.empty() &&
        !FindAlt(*file, verdict.alt_build_id, verdict.alt_name, why)) {
      continue;
    }
    return fd->release();
  }
  return -1;
}

const Dwfl_Callbacks kCallbacks = {
    .find_elf = FindElf,
    .find_debuginfo = FindDebuginfo,
    .section_address = nullptr,
    .debuginfo_path = nullptr,
};

}  // namespace

const Dwfl_Callbacks& ModuleFileCallbacks() { return kCallbacks; }

std::string RefusalOf(Dwfl_Module* module) {
  void** userdata = nullptr;
  dwfl_module_info(module, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (userdata == nullptr || *userdata == nullptr) return "";
  return static_cast<const ModuleFile*>(*userdata)->refused;
}

}  // namespace rdmascope::sys
