#include "collectors/probe_capture.h"

#include <climits>

#include "collectors/probe_json.h"
#include "core/capture.h"
#include "core/sysfs.h"

namespace rdmascope {

bool RecordingCapture() {
  const capture::Session* session = capture::Active();
  return session != nullptr && !session->replaying() && session->writer() != nullptr;
}

bool ReplayingCapture() {
  const capture::Session* session = capture::Active();
  return session != nullptr && session->replaying();
}

void RecordProbeFile(std::string_view rel, std::string_view text) {
  capture::Session* session = capture::Active();
  if (session == nullptr || session->replaying() || session->writer() == nullptr) return;
  session->writer()->File(rel, text);
}

void RecordNotRecorded(std::string source, std::string reason) {
  capture::Session* session = capture::Active();
  if (session == nullptr || session->replaying() || session->writer() == nullptr) return;
  session->writer()->Missed(std::move(source), std::move(reason));
}

std::expected<std::string, std::string> ReplayProbeFile(std::string_view rel) {
  const capture::Session* session = capture::Active();
  if (session == nullptr || !session->replaying()) {
    return std::unexpected(std::string(rel) + ": no capture is replayed");
  }
  auto text = session->reader()->ReadFile(session->sample(), rel, probe_json::kMaxBytes);
  if (text) return std::move(*text);
  const std::string where = std::string(rel) + " of sample " + std::to_string(session->sample());
  if (text.error() == ENOENT) return std::unexpected(where + ": not in the capture");
  if (text.error() == EFBIG) return std::unexpected(where + ": larger than 8 MiB");
  return std::unexpected(where + ": " + capture::ErrnoName(text.error()));
}

std::string FormatUverbsHolders(const sys::UverbsHolderMap& holders) {
  std::string text;
  for (const auto& [pid, devices] : holders) {
    text += std::to_string(pid);
    for (const std::string& device : devices) text += " " + device;
    text += "\n";
  }
  return text;
}

std::optional<sys::UverbsHolderMap> ParseUverbsHolders(std::string_view text) {
  sys::UverbsHolderMap holders;
  size_t pairs = 0;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const size_t space = std::min(line.find(' '), line.size());
    const auto pid = sysfs::ParseUnsigned(line.substr(0, space));
    if (!pid || *pid == 0 || *pid > INT_MAX) return std::nullopt;
    auto [entry, added] = holders.try_emplace(static_cast<uint32_t>(*pid));
    if (!added) return std::nullopt;
    line.remove_prefix(std::min(space + 1, line.size()));
    while (!line.empty()) {
      const size_t next = std::min(line.find(' '), line.size());
      const std::string_view device = line.substr(0, next);
      line.remove_prefix(std::min(next + 1, line.size()));
      // The names the scan keeps (/dev/infiniband/uverbsN): anything else is not one.
      if (!device.starts_with("uverbs") || !sysfs::ParseUnsigned(device.substr(6))) {
        return std::nullopt;
      }
      entry->second.insert(std::string(device));
      if (++pairs > sys::kMaxUverbsHolders) return std::nullopt;
    }
  }
  return holders;
}

std::expected<sys::UverbsHolderMap, std::string> CapturedProcfs::UverbsHolders() {
  capture::Session* session = capture::Active();
  if (session == nullptr) return live_->UverbsHolders();
  if (!session->replaying()) {
    std::expected<sys::UverbsHolderMap, std::string> holders;
    {
      // Every process's fd listing is not the capture's business: the answer is kept instead.
      const capture::UnrecordedScope unrecorded;
      holders = live_->UverbsHolders();
    }
    if (holders) {
      RecordProbeFile(kUverbsHoldersFile, FormatUverbsHolders(*holders));
    } else if (session->writer() != nullptr) {
      session->writer()->Errno(kUverbsHoldersFile, EIO);  // replays as a failed scan
    }
    return holders;
  }
  const auto text = session->reader()->ReadFile(session->sample(), kUverbsHoldersFile, 1 << 20);
  if (!text) {
    return std::unexpected(std::string(kUverbsHoldersFile) + ": " +
                           capture::ErrnoName(text.error()));
  }
  auto holders = ParseUverbsHolders(*text);
  if (!holders) {
    return std::unexpected(std::string(kUverbsHoldersFile) +
                           ": not lines of a pid and uverbsN names");
  }
  return std::move(*holders);
}

}  // namespace rdmascope
