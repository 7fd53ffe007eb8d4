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
#include <functional>
#include <span>
#include <string_view>

#include "sys/debug_files.h"
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

// A debug or alternate file just opened: a file only root can write (its bytes are then stable
// between this check and libelf's own reading of the descriptor), with the build id `want`,
// checked (sys/elf_checks.h). Why not, or "".
std::string CheckDebugFile(const OpenedFile& opened, std::span<const uint8_t> want,
                           ElfVerdict& verdict) {
  if (!opened.only_root_can_write) return "a debug file others than root can write";
  const auto size = static_cast<size_t>(opened.status.st_size);
  void* address = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, opened.fd.get(), 0);
  if (address == MAP_FAILED) return std::string("mmap: ") + std::strerror(errno);
  Elf* elf = elf_memory(static_cast<char*>(address), size);
  std::string why;
  const void* id = nullptr;
  const ssize_t id_size = elf != nullptr ? dwelf_elf_gnu_build_id(elf, &id) : -1;
  if (id_size <= 0 || static_cast<size_t>(id_size) != want.size() ||
      std::memcmp(id, want.data(), want.size()) != 0) {
    why = "build id differs";
  } else {
    verdict = CheckElf(elf, opened.fd.get());
    why = verdict.refused;
  }
  if (elf != nullptr) elf_end(elf);
  munmap(address, size);
  return why;
}

// A debug or alternate file of a module, below the process's root: the first of the query's
// candidates (sys/debug_files.h) that passes CheckDebugFile and then `accept` ("" when it
// does). One question per module in the worker, plus one per candidate refused here (rare:
// most candidates do not exist, and the parent skips those). The descriptor, for libdwfl.
std::expected<UniqueFd, std::string> OpenDebugFile(
    ProcessFiles& process, const DebugFileQuery& query,
    const std::function<std::string(const ElfVerdict&)>& accept) {
  std::string why = "no debug file";
  // The index only grows: at most one question per candidate.
  for (size_t first = 0; first < kMaxDebugFileCandidates;) {
    auto found = process.debug_files != nullptr
                     ? process.debug_files->OpenDebugFile(process.pid, query, first)
                     : OpenFirstDebugFile(*process.access, process.pid, query, first);
    if (!found) return std::unexpected(found.error());
    if (found->index < first) return std::unexpected("a candidate already refused");
    first = found->index + 1;
    ElfVerdict verdict;
    why = CheckDebugFile(found->file, query.build_id, verdict);
    if (why.empty()) why = accept(verdict);
    if (why.empty()) return std::move(found->file.fd);
  }
  return std::unexpected(why);
}

// The alternate (dwz) file of a DWARF file, by its build id in the process's root: libdw
// would otherwise look for it itself, by path, in the exporter's namespace (elf_checks.h).
// `module`: the mapped file the DWARF file belongs to.
bool FindAlt(ModuleFile& file, std::string_view module, const std::vector<uint8_t>& build_id,
             const std::string& name, std::string& why) {
  // An alternate file with an alternate file of its own is not followed.
  auto fd = OpenDebugFile(*file.process, {.mapped_path = std::string(module), .build_id = build_id},
                          [](const ElfVerdict& verdict) {
                            return verdict.alt_build_id.empty() ? "" : "an alternate file's own";
                          });
  if (!fd) {
    why = ".gnu_debugaltlink and no alternate file: " + fd.error();
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
  if (!elf.alt_build_id.empty() && !FindAlt(*file, path, elf.alt_build_id, elf.alt_name, why)) {
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
  DebugFileQuery query{.mapped_path = module_name,
                       .build_id = std::vector<uint8_t>(bits, bits + bits_size),
                       .debuglink = debuglink != nullptr ? debuglink : ""};
  // Missing, or refused: no debug info (the candidates, sys/debug_files.h, are tried in order).
  auto fd = OpenDebugFile(*file->process, query, [&](const ElfVerdict& verdict) {
    std::string why;
    if (!verdict.alt_build_id.empty() &&
        !FindAlt(*file, module_name, verdict.alt_build_id, verdict.alt_name, why)) {
      return why;
    }
    return std::string();
  });
  return fd ? fd->release() : -1;
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
