#include "bpf/process_liveness.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <string_view>

#include "core/process_metrics.h"

namespace rdmascope {

uint64_t NsPerClockTick() {
  const long ticks = sysconf(_SC_CLK_TCK);
  return ticks > 0 ? 1000000000ULL / static_cast<uint64_t>(ticks) : 10000000ULL;
}

Liveness ProcessLiveness(const std::filesystem::path& procfs, uint32_t pid,
                         uint64_t start_boottime_ns, uint64_t ns_per_tick) {
  const std::filesystem::path path = procfs / std::to_string(pid) / "stat";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? Liveness::kGone : Liveness::kUnknown;
  std::array<char, 4096> buffer{};
  const ssize_t n = read(fd, buffer.data(), buffer.size());
  const int read_errno = errno;
  close(fd);
  // The task was reaped between open and read.
  if (n < 0) return read_errno == ESRCH ? Liveness::kGone : Liveness::kUnknown;
  const auto ticks = ParseStartTicks(std::string_view(buffer.data(), static_cast<size_t>(n)));
  if (!ticks || ns_per_tick == 0) return Liveness::kUnknown;
  // /proc prints nsec_to_clock_t(start_boottime): the same truncating division.
  return *ticks == start_boottime_ns / ns_per_tick ? Liveness::kAlive : Liveness::kGone;
}

}  // namespace rdmascope
