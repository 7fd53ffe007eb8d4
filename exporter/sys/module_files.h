// libdwfl's file callbacks for the DWARF unwinder's sessions (sys/dwarf_unwinder.h), so that no
// path a process controls reaches an open() in the exporter's namespace (elfutils 0.188):
// - libdwfl's own find_elf for processes, dwfl_linux_proc_find_elf (libdwfl/linux-proc-maps.c),
//   stat()s then open(O_RDONLY)s the path of the maps line as the exporter sees it: another
//   mount namespace's path, and a FIFO or device swapped in between blocks or acts.
// - its find_debuginfo, dwfl_standard_find_debuginfo (libdwfl/find-debuginfo.c), opens
//   (try_open: open(O_RDONLY), blocking) the .gnu_debuglink name the file carries, relative to
//   the file's directory, its .debug/ and /usr/lib/debug: "../fifo" or "../../dev/watchdog"
//   are opened as they read; dwfl_build_id_find_debuginfo (dwfl_build_id_find_elf.c,
//   __libdwfl_open_by_build_id) opens /usr/lib/debug/.build-id/ of the exporter's root, not the
//   process's; and with DEBUGINFOD_URLS set it fetches from the network
//   (__libdwfl_debuginfod_find_debuginfo).
// These replace both: the main file through sys/untrusted_files.h (map_files or RESOLVE_IN_ROOT,
// device and inode checked), debug info only from the process's own root, by build id, or by a
// plain debuglink name whose build id matches (the candidates: sys/debug_files.h); every file
// checked by sys/elf_checks.h first.
// The vDSO (named "[vdso: PID]" by dwfl_linux_proc_report) is still read by
// dwfl_linux_proc_find_elf, from the process's memory (/proc/PID/mem), not from a path, where
// the access allows it (ProcessAccess::libdwfl_may_read_proc: not in the sandboxed worker,
// which has no /proc and reports modules from the maps text, without the vDSO).
#pragma once

#include <elfutils/libdwfl.h>

#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "sys/debug_files.h"
#include "sys/elf_cache.h"
#include "sys/process_access.h"
#include "sys/untrusted_files.h"

namespace rdmascope::sys {

// A process's files as its session's callbacks find them.
struct ProcessFiles {
  ProcessAccess* access = nullptr;  // opens the files (in the worker: asks its parent)
  // Opens a module's first debug-file candidate in one call (the worker: one question to its
  // parent); nullptr: OpenFirstDebugFile on `access`.
  DebugFileSource* debug_files = nullptr;
  uint32_t pid = 0;
  ElfCache* cache = nullptr;
  std::vector<MappedFile> mapped;  // the maps read at the last report
  // The first file refused in this session (sys/elf_checks.h, untrusted_files.h): the session
  // is not kept once the request ends (DwarfUnwinder drops it), so no state built over a
  // hostile file outlives it.
  std::string refused;
};

// A module's userdata (libdwfl hands the callbacks &module->userdata: MODCB_ARGS in
// libdwfl/libdwflP.h): its process, the images and descriptors it holds, released once
// libdwfl has dropped the module.
struct ModuleFile {
  ProcessFiles* process = nullptr;
  std::shared_ptr<const ElfImage> image;  // the main file
  std::string refused;                    // why the module has no file ("" when it has one)
  std::vector<uint8_t> alt_build_id;      // of the DWARF file's .gnu_debugaltlink
  UniqueFd alt;                           // the alternate (dwz) file found for it
  std::string alt_name;
};

// The callbacks: find_elf and find_debuginfo as above, no section_address (ET_REL modules are
// not reported for processes), no debuginfo_path (never searched).
const Dwfl_Callbacks& ModuleFileCallbacks();

// The module's userdata's refusal, "" when none (or not one of ours).
std::string RefusalOf(Dwfl_Module* module);

}  // namespace rdmascope::sys
