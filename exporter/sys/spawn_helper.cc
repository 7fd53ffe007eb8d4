#include "sys/spawn_helper.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace rdmascope::sys {

std::expected<pid_t, std::string> SpawnHelper(const std::string& program,
                                              std::vector<std::string> arguments, int socket) {
  int theirs = socket;
  int duplicate = -1;
  if (socket == kHelperSocket) {  // dup2 onto itself would keep O_CLOEXEC
    duplicate = fcntl(socket, F_DUPFD_CLOEXEC, kHelperSocket + 1);
    if (duplicate < 0) return std::unexpected(std::string("fcntl: ") + std::strerror(errno));
    theirs = duplicate;
  }
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, theirs, kHelperSocket);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);  // the exporter's threads block some
  posix_spawnattr_setsigdefault(&attributes, &all);
  // A process group of its own: a stop kills whatever it may have left (a fake helper's
  // children in tests; the real ones cannot fork).
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, program.c_str(), &actions, &attributes, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (duplicate >= 0) close(duplicate);
  if (error != 0) return std::unexpected("cannot start " + program + ": " + std::strerror(error));
  return pid;
}

bool HelperSocketIsReady() {
  int type = 0;
  socklen_t size = sizeof type;
  return getsockopt(kHelperSocket, SOL_SOCKET, SO_TYPE, &type, &size) == 0 &&
         type == SOCK_SEQPACKET;
}

}  // namespace rdmascope::sys
