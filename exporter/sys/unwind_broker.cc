#include "sys/unwind_broker.h"

#include <algorithm>
#include <cerrno>
#include <span>
#include <string>

#include "sys/debug_files.h"

namespace rdmascope::sys {
namespace {

namespace wire = unwind_protocol;

}  // namespace

void UnwindBroker::SetScope(const ImageKey& image) {
  scope_ = image;
  scope_maps_.clear();
  scope_maps_read_ = false;
}

// The worker's session may have read the maps in an earlier request: read them here then.
const std::vector<MappedFile>& UnwindBroker::ScopeMaps() {
  if (!scope_maps_read_) {
    scope_maps_read_ = true;
    if (auto maps = access_->Maps(scope_)) scope_maps_ = ParseMappedFiles(*maps);
  }
  return scope_maps_;
}

bool UnwindBroker::Answer(int socket, const wire::Message& question) {
  wire::Reader reader(question.body);
  const auto op = static_cast<wire::AccessOp>(reader.U32());
  const uint32_t pid = reader.U32();
  // Only the process of the request in progress: a subverted worker asks about no other.
  if (scope_.tgid == 0 || pid != scope_.tgid) return false;
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
      // The image follows its tgid (read above with every question).
      const ImageKey image{.tgid = pid, .exec_id = reader.U32(), .start_ns = reader.U64()};
      if (!reader.done() || image != scope_) return false;
      auto maps = access_->Maps(scope_);
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
      return wire::Send(socket, reply.String("").U8(opened->only_root_can_write ? 1 : 0),
                        opened->fd.get());
    }
    case wire::AccessOp::kOpenDebugFile: {
      DebugFileQuery query;
      query.mapped_path = reader.String();
      const std::span<const uint8_t> build_id = reader.Bytes(wire::kMaxBuildId);
      query.build_id.assign(build_id.begin(), build_id.end());
      query.debuglink = reader.String(wire::kMaxDebuglink);
      const uint32_t first = reader.U32();
      if (!reader.done()) return false;
      // The debug files of a file of the maps this request read (any of its lines: the module
      // is named by its path), and only the candidates computed here from that path.
      const std::vector<MappedFile>& mapped = ScopeMaps();
      const bool listed = std::any_of(mapped.begin(), mapped.end(), [&](const MappedFile& m) {
        return m.path == query.mapped_path;
      });
      if (!listed)
        return wire::Send(socket, reply.String("not a mapped file of the process").U32(0));
      auto found = OpenFirstDebugFile(*access_, pid, query, first);
      if (!found) return wire::Send(socket, reply.String(found.error()).U32(0));
      return wire::Send(socket,
                        reply.String("")
                            .U32(static_cast<uint32_t>(found->index))
                            .U8(found->file.only_root_can_write ? 1 : 0),
                        found->file.fd.get());
    }
  }
  return false;
}

}  // namespace rdmascope::sys
