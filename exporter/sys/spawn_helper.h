// Starting one of the exporter's own helper processes (`rdmascope __unwind-worker`,
// `rdmascope __capability-broker`): the same binary, run again with posix_spawn so that it
// starts from a fresh address space (none of the exporter's memory, a new ASLR layout), with
// nothing of the exporter's environment (DEBUGINFOD_URLS, LD_*), its signal mask and handlers
// reset, stdin and stdout on /dev/null (stderr kept: it logs as the exporter does), one end of
// a socket as descriptor 3 and no other descriptor (every other one is O_CLOEXEC), in a
// process group of its own.
#pragma once

#include <sys/types.h>

#include <expected>
#include <string>
#include <vector>

namespace rdmascope::sys {

inline constexpr int kHelperSocket = 3;

// Spawns `program` with `arguments` (argv[0] first) and `socket` as descriptor 3; the pid, or
// why not.
std::expected<pid_t, std::string> SpawnHelper(const std::string& program,
                                              std::vector<std::string> arguments, int socket);

// The helper's end is what its parent gave: a SEQPACKET socket as descriptor 3.
bool HelperSocketIsReady();

}  // namespace rdmascope::sys
