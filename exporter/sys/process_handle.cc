#include "sys/process_handle.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <string>
#include <system_error>
#include <utility>

namespace rdmascope::sys {

ProcessHandle ProcessHandle::Open(uint32_t pid) {
  if (pid == 0 || pid > INT_MAX) return {};
  // Close-on-exec: pidfd_open sets it on every pidfd.
  return ProcessHandle(static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0)));
}

ProcessHandle::~ProcessHandle() {
  if (fd_ >= 0) close(fd_);
}

ProcessHandle::ProcessHandle(ProcessHandle&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

ProcessHandle& ProcessHandle::operator=(ProcessHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

bool ProcessHandle::Exited() const {
  if (fd_ < 0) return true;
  pollfd poll_fd{.fd = fd_, .events = POLLIN, .revents = 0};
  return poll(&poll_fd, 1, 0) != 0;
}

std::vector<bool> ProcessHandle::Exited(std::span<const ProcessHandle* const> handles) {
  std::vector<pollfd> polls;
  polls.reserve(handles.size());
  for (const ProcessHandle* handle : handles) {
    // A negative fd is ignored by poll(2) (revents 0): marked exited below.
    polls.push_back({.fd = handle->fd_, .events = POLLIN, .revents = 0});
  }
  std::vector<bool> exited(handles.size(), true);
  int ready = -1;
  do {
    ready = poll(polls.data(), polls.size(), 0);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return exited;  // ENOMEM, more fds than RLIMIT_NOFILE: nothing is known
  for (size_t i = 0; i < polls.size(); ++i) {
    exited[i] = polls[i].fd < 0 || polls[i].revents != 0;
  }
  return exited;
}

bool IsOwnProcfs(const std::filesystem::path& procfs) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink(procfs / "self", ec);
  return !ec && self.string() == std::to_string(getpid());
}

}  // namespace rdmascope::sys
