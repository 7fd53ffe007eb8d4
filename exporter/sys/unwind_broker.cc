#include "sys/unwind_broker.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace rdmascope::sys {
namespace {

namespace wire = unwind_protocol;

bool IsElf(int fd) {
  char magic[4] = {};
  return pread(fd, magic, sizeof magic, 0) == 4 && std::memcmp(magic, "\177ELF", 4) == 0;
}

}  // namespace

// sys/module_files.cc FindDebuginfo's candidates: by build id under /usr/lib/debug, or a plain
// name beside a mapped file, in its .debug/ or under /usr/lib/debug's mirror of its directory.
bool IsDebugFileRequest(std::string_view path, const std::vector<MappedFile>& mapped) {
  constexpr std::string_view kBuildIds = "/usr/lib/debug/.build-id/";
  if (path.starts_with(kBuildIds)) {
    const std::string_view rest = path.substr(kBuildIds.size());
    return rest.size() > 9 && rest[2] == '/' && rest.find('/', 3) == std::string_view::npos &&
           rest.ends_with(".debug") && rest.find("..") == std::string_view::npos;
  }
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || !IsPlainDebuglinkName(path.substr(slash + 1))) {
    return false;
  }
  const std::string_view directory = path.substr(0, slash + 1);
  for (const MappedFile& file : mapped) {
    const std::string_view file_directory =
        std::string_view(file.path).substr(0, file.path.rfind('/') + 1);
    if (directory == file_directory || directory == std::string(file_directory) + ".debug/" ||
        directory == "/usr/lib/debug" + std::string(file_directory)) {
      return true;
    }
  }
  return false;
}

void UnwindBroker::SetScope(uint32_t pid) {
  scope_pid_ = pid;
  scope_maps_.clear();
  scope_maps_read_ = false;
}

// The worker's session may have read the maps in an earlier request: read them here then.
const std::vector<MappedFile>& UnwindBroker::ScopeMaps() {
  if (!scope_maps_read_) {
    scope_maps_read_ = true;
    if (auto maps = access_->Maps(scope_pid_)) scope_maps_ = ParseMappedFiles(*maps);
  }
  return scope_maps_;
}

bool UnwindBroker::Answer(int socket, const wire::Message& question) {
  wire::Reader reader(question.body);
  const auto op = static_cast<wire::AccessOp>(reader.U32());
  const uint32_t pid = reader.U32();
  // Only the process of the request in progress: a subverted worker asks about no other.
  if (scope_pid_ == 0 || pid != scope_pid_) return false;
  wire::Writer reply(wire::Type::kAccessReply);
  switch (op) {
    case wire::AccessOp::kStartTicks: {
      if (!reader.done()) return false;
      return wire::Send(socket, reply.U64(access_->StartTicks(pid).value_or(0)));
    }
    case wire::AccessOp::kStillRunning: {
      const uint64_t start = reader.U64();
      if (!reader.done()) return false;
      return wire::Send(socket, reply.U8(access_->StillRunning(pid, start) ? 1 : 0));
    }
    case wire::AccessOp::kMaps: {
      if (!reader.done()) return false;
      auto maps = access_->Maps(pid);
      if (!maps) return wire::Send(socket, reply.U32(static_cast<uint32_t>(maps.error())));
      scope_maps_ = ParseMappedFiles(*maps);
      scope_maps_read_ = true;
      auto memfd = wire::TextToMemfd(*maps);
      if (!memfd) return wire::Send(socket, reply.U32(EIO));
      return wire::Send(socket, reply.U32(0), memfd->get());
    }
    case wire::AccessOp::kOpenMapping: {
      MappedFile mapping;
      mapping.start = reader.U64();
      mapping.end = reader.U64();
      mapping.offset = reader.U64();
      mapping.device = static_cast<dev_t>(reader.U64());
      mapping.inode = reader.U64();
      mapping.path = reader.String();
      if (!reader.done()) return false;
      // A line of the maps this request read, as the parent read it.
      const std::vector<MappedFile>& mapped = ScopeMaps();
      const bool listed = std::any_of(mapped.begin(), mapped.end(), [&](const MappedFile& m) {
        return m.start == mapping.start && m.end == mapping.end && m.offset == mapping.offset &&
               m.device == mapping.device && m.inode == mapping.inode && m.path == mapping.path;
      });
      if (!listed) return wire::Send(socket, reply.String("not a mapping of the process"));
      auto opened = access_->OpenMapping(pid, mapping);
      if (!opened) return wire::Send(socket, reply.String(opened.error()));
      return wire::Send(socket, reply.String(""), opened->fd.get());
    }
    case wire::AccessOp::kOpenInRoot: {
      const std::string path = reader.String();
      if (!reader.done()) return false;
      if (!IsDebugFileRequest(path, ScopeMaps())) {
        return wire::Send(socket, reply.String("not a debug file of a mapped file"));
      }
      auto opened = access_->OpenInRoot(pid, path);
      if (!opened) return wire::Send(socket, reply.String(opened.error()));
      if (!IsElf(opened->fd.get())) return wire::Send(socket, reply.String("not an ELF file"));
      return wire::Send(socket, reply.String(""), opened->fd.get());
    }
  }
  return false;
}

}  // namespace rdmascope::sys
