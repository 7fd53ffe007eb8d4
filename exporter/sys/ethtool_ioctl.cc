#include "sys/ethtool_ioctl.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "core/capture.h"
#include "core/log.h"
#include "sys/ethtool_capture.h"

namespace rdmascope::sys {
namespace {

int (*g_mprotect)(void*, size_t, int) = ::mprotect;

// The number of stats can change between our calls (a driver reconfigured with
// `ethtool -L`), and the kernel writes as many strings/values as the driver reports *now*,
// ignoring the length we pass. A buffer followed by a PROT_NONE guard page turns such an
// overrun into EFAULT from copy_to_user instead of heap corruption; we then retry. Without the
// guard page that protection is gone, so a buffer whose guard could not be made is unusable.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) {
    const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    usable_ = (bytes + page - 1) / page * page;
    void* p =
        ::mmap(nullptr, usable_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      error_ = errno;
      return;
    }
    if (g_mprotect(static_cast<char*>(p) + usable_, page, PROT_NONE) != 0) {
      error_ = errno != 0 ? errno : ENOMEM;
      ::munmap(p, usable_ + page);
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        log::Warn("cannot make the guard page of an ethtool stats buffer; stats are not read",
                  {{"err", std::strerror(error_)}});
      }
      return;
    }
    base_ = static_cast<char*>(p);
    total_ = usable_ + page;
  }
  ~GuardedBuffer() {
    if (base_ != nullptr) ::munmap(base_, total_);
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  char* data() const { return base_; }
  size_t size() const { return base_ != nullptr ? usable_ : 0; }
  int error() const { return error_; }

 private:
  char* base_ = nullptr;
  size_t usable_ = 0;
  size_t total_ = 0;
  int error_ = 0;
};

// mmap/mprotect/munmap per call cost more than the ioctls themselves, so each thread keeps
// its buffers (strings, values, strings again) and only remaps when a device needs more room
// or the last attempt failed. Only memory is cached here: the names of the last read are the
// caller's (GetStats' `last_names`), and every read fetches the names again to compare.
GuardedBuffer& Scratch(int slot, size_t bytes) {
  thread_local std::unique_ptr<GuardedBuffer> buffers[3];
  std::unique_ptr<GuardedBuffer>& buffer = buffers[slot];
  if (!buffer || buffer->size() < bytes) buffer = std::make_unique<GuardedBuffer>(bytes);
  return *buffer;
}

constexpr int kMaxAttempts = 3;
// Slack beyond the announced count so that a modest growth still fits and can be detected.
constexpr uint32_t kSlackEntries = 64;
// No driver has anywhere near this many stats; a larger count is treated as corrupt.
constexpr uint32_t kMaxStats = 1 << 20;

std::string FixedString(const char* data, size_t max) {
  return std::string(data, strnlen(data, max));
}

}  // namespace

namespace ethtool_testing {
void SetMprotect(int (*mprotect)(void* addr, size_t len, int prot)) {
  g_mprotect = mprotect != nullptr ? mprotect : ::mprotect;
}
}  // namespace ethtool_testing

Ethtool Ethtool::WithIoctl(EthtoolIoctl ioctl, InterfaceIoctl interface_ioctl) {
  Ethtool ethtool(-1);
  const capture::Session* session = capture::Active();
  ethtool.recording_ = session != nullptr && !session->replaying();
  ethtool.fake_ = std::move(ioctl);
  ethtool.fake_interface_ = std::move(interface_ioctl);
  return ethtool;
}

std::expected<Ethtool, int> Ethtool::Open() {
  const capture::Session* session = capture::Active();
  if (session != nullptr && session->replaying()) [[unlikely]] {
    return WithIoctl(ReplayEthtoolIoctl(*session), ReplayInterfaceIoctl(*session));
  }
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(errno);
  Ethtool ethtool(fd);
  ethtool.recording_ = session != nullptr;
  return ethtool;
}

void Ethtool::Record(std::string_view ifname, std::string_view file, std::string_view tool,
                     const std::expected<std::string, int>& text) const {
  capture::Session* session = capture::Active();
  const auto path = EthtoolCapturePath(ifname, file);
  if (session == nullptr || session->writer() == nullptr || !path) return;
  if (text) {
    session->writer()->File(*path, *text);
    return;
  }
  session->writer()->Errno(*path, text.error());
  // The tool's own words for the source, so a user sees which command the host refused.
  session->writer()->Missed(std::string(tool) + " " + std::string(ifname),
                            capture::ErrnoName(text.error()));
}

Ethtool::Ethtool(Ethtool&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      recording_(other.recording_),
      fake_(std::move(other.fake_)),
      fake_interface_(std::move(other.fake_interface_)) {}

Ethtool::~Ethtool() {
  if (fd_ >= 0) ::close(fd_);
}

std::expected<int, int> Ethtool::InterfaceValue(std::string_view ifname,
                                                unsigned long request) const {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return std::unexpected(EINVAL);
  if (fake_interface_) {
    int value = 0;
    if (const int err = fake_interface_(ifname, request, value); err != 0) {
      return std::unexpected(err);
    }
    return value;
  }
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
  if (::ioctl(fd_, request, &ifr) < 0) return std::unexpected(errno);
  return request == SIOCGIFMTU ? ifr.ifr_mtu : ifr.ifr_ifindex;
}

std::expected<int, int> Ethtool::GetMtu(std::string_view ifname) const {
  auto mtu = InterfaceValue(ifname, SIOCGIFMTU);
  if (recording_) [[unlikely]] {
    Record(ifname, kEthtoolMtuFile, "SIOCGIFMTU",
           mtu ? std::expected<std::string, int>(std::to_string(*mtu) + "\n")
               : std::unexpected(mtu.error()));
  }
  return mtu;
}

std::expected<int, int> Ethtool::GetIfindex(std::string_view ifname) const {
  auto index = InterfaceValue(ifname, SIOCGIFINDEX);
  if (recording_) [[unlikely]] {
    Record(ifname, kEthtoolIfindexFile, "SIOCGIFINDEX",
           index ? std::expected<std::string, int>(std::to_string(*index) + "\n")
                 : std::unexpected(index.error()));
  }
  return index;
}

int Ethtool::Ioctl(std::string_view ifname, void* command) const {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return EINVAL;
  if (fake_) return fake_(ifname, command);
  ifreq request{};
  std::memcpy(request.ifr_name, ifname.data(), ifname.size());
  request.ifr_data = static_cast<char*>(command);
  if (::ioctl(fd_, SIOCETHTOOL, &request) < 0) return errno;
  return 0;
}

std::expected<DriverInfo, int> Ethtool::GetDriverInfo(std::string_view ifname) const {
  ethtool_drvinfo info{};
  info.cmd = ETHTOOL_GDRVINFO;
  const int err = Ioctl(ifname, &info);
  std::expected<DriverInfo, int> result = std::unexpected(err);
  if (err == 0) {
    result = DriverInfo{
        .driver = FixedString(info.driver, sizeof info.driver),
        .version = FixedString(info.version, sizeof info.version),
        .firmware_version = FixedString(info.fw_version, sizeof info.fw_version),
        .bus_info = FixedString(info.bus_info, sizeof info.bus_info),
    };
  }
  if (recording_) [[unlikely]] {
    Record(
        ifname, kEthtoolDriverFile, "ethtool -i",
        result ? std::expected<std::string, int>(FormatDriverInfo(*result)) : std::unexpected(err));
    if (result) {
      capture::Active()->writer()->Driver(ifname, result->driver, result->version,
                                          result->firmware_version);
    }
  }
  return result;
}

std::expected<uint32_t, int> Ethtool::StatsCount(std::string_view ifname) const {
  // ethtool_sset_info ends in a flexible array that receives one u32 per requested set.
  alignas(ethtool_sset_info) char buffer[sizeof(ethtool_sset_info) + sizeof(uint32_t)] = {};
  auto* info = reinterpret_cast<ethtool_sset_info*>(buffer);
  info->cmd = ETHTOOL_GSSET_INFO;
  info->sset_mask = 1ULL << ETH_SS_STATS;
  if (const int err = Ioctl(ifname, info); err != 0) return std::unexpected(err);
  if ((info->sset_mask & (1ULL << ETH_SS_STATS)) == 0) return std::unexpected(EOPNOTSUPP);
  uint32_t count;
  std::memcpy(&count, buffer + sizeof(ethtool_sset_info), sizeof count);
  if (count > kMaxStats) return std::unexpected(EOVERFLOW);
  return count;
}

std::expected<EthtoolStats, int> Ethtool::GetStats(std::string_view ifname,
                                                   std::string* last_names) const {
  auto stats = ReadStats(ifname, last_names);
  if (recording_) [[unlikely]] {
    Record(ifname, kEthtoolStatsFile, "ethtool -S",
           stats ? std::expected<std::string, int>(FormatEthtoolStats(*stats))
                 : std::unexpected(stats.error()));
  }
  return stats;
}

std::expected<EthtoolStats, int> Ethtool::ReadStats(std::string_view ifname,
                                                    std::string* last_names) const {
  int last_error = EAGAIN;
  // The count is asked for before every read, never taken from the last scrape: with a stale
  // count a driver whose count fell to 0 would reach ethtool_get_strings(), which WARNs on a
  // count of 0 (a kernel splat, or a panic with panic_on_warn, caused by a scrape).
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const auto count = StatsCount(ifname);
    if (!count) return std::unexpected(count.error());
    if (*count == 0) return EthtoolStats{};
    const uint32_t capacity = *count + kSlackEntries;
    const size_t names_bytes = size_t{*count} * ETH_GSTRING_LEN;

    const size_t strings_bytes = sizeof(ethtool_gstrings) + size_t{capacity} * ETH_GSTRING_LEN;
    GuardedBuffer& strings = Scratch(0, strings_bytes);
    GuardedBuffer& values = Scratch(1, sizeof(ethtool_stats) + size_t{capacity} * sizeof(uint64_t));
    GuardedBuffer& check = Scratch(2, strings_bytes);
    for (const GuardedBuffer* buffer : {&strings, &values, &check}) {
      if (buffer->data() == nullptr) return std::unexpected(buffer->error());
    }
    auto* gstrings = reinterpret_cast<ethtool_gstrings*>(strings.data());
    auto* gstats = reinterpret_cast<ethtool_stats*>(values.data());
    auto* again = reinterpret_cast<ethtool_gstrings*>(check.data());

    const auto read_strings = [&](ethtool_gstrings* buffer) {
      buffer->cmd = ETHTOOL_GSTRINGS;
      buffer->string_set = ETH_SS_STATS;
      buffer->len = *count;
      return Ioctl(ifname, buffer);
    };
    const auto read_values = [&] {
      gstats->cmd = ETHTOOL_GSTATS;
      gstats->n_stats = *count;
      return Ioctl(ifname, gstats);
    };
    // Both reads of one configuration: the count asked for, the names of `names`.
    const auto pairs_with = [&](const char* names) {
      return gstats->n_stats == *count && again->len == *count &&
             std::memcmp(again->data, names, names_bytes) == 0;
    };
    const auto pair_up = [&] {
      EthtoolStats stats;
      stats.reserve(*count);
      for (uint32_t i = 0; i < *count; ++i) {
        const char* name = reinterpret_cast<const char*>(again->data) + size_t{i} * ETH_GSTRING_LEN;
        stats.emplace_back(FixedString(name, ETH_GSTRING_LEN), gstats->data[i]);
      }
      if (last_names != nullptr)
        last_names->assign(reinterpret_cast<const char*>(again->data), names_bytes);
      return stats;
    };
    const auto retry = [&](int err, const char* why) {
      log::Debug(why, {{"device", std::string(ifname)}, {"count", std::to_string(*count)}});
      last_error = err;
    };

    // Values, then names, compared with the names of the last read: the kernel's three calls
    // (count, values, names) as `ethtool -S` makes them. Names that differ (a reconfiguration
    // since the last read, or during this one) fall through to the full read below.
    if (last_names != nullptr && last_names->size() == names_bytes) {
      int err = read_values();
      if (err == 0) err = read_strings(again);
      if (err != 0 && err != EFAULT) return std::unexpected(err);
      if (err == 0 && pairs_with(last_names->data())) return pair_up();
    }

    // Names, values, names again: a reconfiguration that keeps the count but changes the
    // names (rx 1/tx 8 -> rx 3/tx 1 queues on veth: 24 stats both) shows as different names.
    if (const int err = read_strings(gstrings); err != 0) {
      if (err != EFAULT) return std::unexpected(err);
      retry(err, "ethtool strings overran the buffer; retrying");  // grew beyond the buffer
      continue;
    }
    if (gstrings->len != *count) {
      // Not the count asked for (a change since ETHTOOL_GSSET_INFO): the values cannot pair
      // up with these names, so ask for the count again.
      retry(EAGAIN, "ethtool stat count changed before the read; retrying");
      continue;
    }
    if (const int err = read_values(); err != 0) {
      if (err != EFAULT) return std::unexpected(err);
      retry(err, "ethtool stats overran the buffer; retrying");
      continue;
    }
    if (const int err = read_strings(again); err != 0) {
      if (err != EFAULT) return std::unexpected(err);
      retry(err, "ethtool strings overran the buffer; retrying");
      continue;
    }
    // Names and values must come from the same configuration: if a count moved, or the
    // names did, the pairing is unknowable, so read again.
    if (!pairs_with(reinterpret_cast<const char*>(gstrings->data))) {
      retry(EAGAIN, "ethtool stat count or names changed during the read; retrying");
      continue;
    }
    return pair_up();
  }
  if (last_names != nullptr) last_names->clear();
  return std::unexpected(last_error);
}

std::expected<PrivateFlags, int> Ethtool::GetPrivateFlags(std::string_view ifname) const {
  auto flags = ReadPrivateFlags(ifname);
  if (recording_) [[unlikely]] {
    Record(ifname, kEthtoolPrivFlagsFile, "ethtool --show-priv-flags",
           flags ? std::expected<std::string, int>(FormatPrivateFlags(ifname, *flags))
                 : std::unexpected(flags.error()));
  }
  return flags;
}

std::expected<PrivateFlags, int> Ethtool::ReadPrivateFlags(std::string_view ifname) const {
  // The flags are one u32 bitmap (ETHTOOL_GPFLAGS), so a driver has at most 32 of them; the
  // set is fixed per driver (mlx5: mlx5e_priv_flags[]), unlike the stats.
  constexpr uint32_t kMaxFlags = 32;
  alignas(ethtool_sset_info) char info_buffer[sizeof(ethtool_sset_info) + sizeof(uint32_t)] = {};
  auto* info = reinterpret_cast<ethtool_sset_info*>(info_buffer);
  info->cmd = ETHTOOL_GSSET_INFO;
  info->sset_mask = 1ULL << ETH_SS_PRIV_FLAGS;
  if (const int err = Ioctl(ifname, info); err != 0) return std::unexpected(err);
  if ((info->sset_mask & (1ULL << ETH_SS_PRIV_FLAGS)) == 0) return std::unexpected(EOPNOTSUPP);
  uint32_t count;
  std::memcpy(&count, info_buffer + sizeof(ethtool_sset_info), sizeof count);
  if (count > kMaxFlags) return std::unexpected(EOVERFLOW);
  if (count == 0) return PrivateFlags{};
  // The kernel copies as many names as the driver has *now* (ethtool_get_strings()): room for
  // the 32 a bitmap allows, so even a driver that changed between the calls cannot overrun.
  std::vector<char> buffer(sizeof(ethtool_gstrings) + size_t{kMaxFlags} * ETH_GSTRING_LEN);
  auto* strings = reinterpret_cast<ethtool_gstrings*>(buffer.data());
  strings->cmd = ETHTOOL_GSTRINGS;
  strings->string_set = ETH_SS_PRIV_FLAGS;
  strings->len = count;
  if (const int err = Ioctl(ifname, strings); err != 0) return std::unexpected(err);
  if (strings->len != count) return std::unexpected(EAGAIN);  // not the set just counted
  ethtool_value value{};
  value.cmd = ETHTOOL_GPFLAGS;
  if (const int err = Ioctl(ifname, &value); err != 0) return std::unexpected(err);
  PrivateFlags flags;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = reinterpret_cast<const char*>(strings->data) + size_t{i} * ETH_GSTRING_LEN;
    flags.emplace_back(FixedString(name, ETH_GSTRING_LEN), ((value.data >> i) & 1U) != 0);
  }
  return flags;
}

std::expected<CoalesceSettings, int> Ethtool::GetCoalesce(std::string_view ifname) const {
  ethtool_coalesce coalesce{};
  coalesce.cmd = ETHTOOL_GCOALESCE;
  const int err = Ioctl(ifname, &coalesce);
  std::expected<CoalesceSettings, int> result = std::unexpected(err);
  if (err == 0) {
    result = CoalesceSettings{
        .rx_usecs = coalesce.rx_coalesce_usecs,
        .tx_usecs = coalesce.tx_coalesce_usecs,
        .adaptive_rx = coalesce.use_adaptive_rx_coalesce != 0,
        .adaptive_tx = coalesce.use_adaptive_tx_coalesce != 0,
    };
  }
  if (recording_) [[unlikely]] {
    Record(ifname, kEthtoolCoalesceFile, "ethtool -c",
           result ? std::expected<std::string, int>(FormatCoalesce(ifname, *result))
                  : std::unexpected(err));
  }
  return result;
}

}  // namespace rdmascope::sys
