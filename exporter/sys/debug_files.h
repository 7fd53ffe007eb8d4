// The debug files a module may have, computed in one place for the two processes that use
// them: the unwinder's find_debuginfo (sys/module_files.cc), which tries them, and the sandboxed
// worker's parent (sys/unwind_broker.h), which opens a debug file only as one of these, for a
// file that is a line of the maps it read itself. Both sides calling this one function is what
// keeps the broker's rule and the unwinder's search from drifting apart.
//
// The candidates are looked up below the process's root (RESOLVE_IN_ROOT), in GDB's order:
// - by build id, usr/lib/debug/.build-id/ab/cdef....debug (sys/untrusted_files.h);
// - by a plain .gnu_debuglink name (no '/', sys/untrusted_files.h IsPlainDebuglinkName) under
//   /usr/lib/debug's mirror of the file's directory, beside the file, and in its .debug/.
// Nothing else: no path a process's bytes could steer outside those directories.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sys/process_access.h"
#include "sys/untrusted_files.h"

namespace rdmascope::sys {

// At most one by build id and three by debuglink name.
inline constexpr size_t kMaxDebugFileCandidates = 4;

// The candidates of the module mapped from `mapped_path`, in the order they are tried. None
// without a build id libdwfl would look up (3 to 64 bytes): nothing would tell a debug file
// from any other. A debuglink name that is not plain, or "" (alternate files: by build id
// only), adds none.
std::vector<std::string> DebugFileCandidates(std::string_view mapped_path,
                                             std::span<const uint8_t> build_id,
                                             std::string_view debuglink);

// Whether `path` is one of DebugFileCandidates() for some file of `mapped`, whatever its build
// id and debuglink name: the capability broker's check (sys/capability_broker.h), which is
// asked for one path at a time by a process it does not trust. Computed with the functions
// above, so the two cannot disagree.
bool IsDebugFileCandidate(std::string_view path, const std::vector<MappedFile>& mapped);

// One question for all of a module's candidates (a round trip per candidate made a new
// process's first unwind in the worker ~2 ms slower).
struct DebugFileQuery {
  std::string mapped_path;        // the module's file, as the maps name it
  std::vector<uint8_t> build_id;  // its build id, or an alternate file's
  std::string debuglink;          // its .gnu_debuglink name; "" for none
};

struct FoundDebugFile {
  size_t index = 0;  // of the candidate opened: a retry starts after it
  OpenedFile file;
};

// The first of the query's candidates, from index `first`, that opens in the process's root and
// starts as an ELF file; or why none did. The caller still checks the file (its build id, that
// only root can write it, sys/elf_checks.h) and asks again after `index` when it refuses it.
std::expected<FoundDebugFile, std::string> OpenFirstDebugFile(ProcessAccess& access, uint32_t pid,
                                                              const DebugFileQuery& query,
                                                              size_t first);

// Where a session's debug files come from: OpenFirstDebugFile on its ProcessAccess in
// process; in the worker, one question to the parent, which answers with the same function.
class DebugFileSource {
 public:
  virtual ~DebugFileSource() = default;
  virtual std::expected<FoundDebugFile, std::string> OpenDebugFile(uint32_t pid,
                                                                   const DebugFileQuery& query,
                                                                   size_t first) = 0;
};

}  // namespace rdmascope::sys
