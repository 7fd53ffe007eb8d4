// The parent's answers to the unwinder worker's questions (sys/unwind_protocol.h AccessOp): a
// fixed request set, each checked here, by the process that holds the privileges, never by
// the worker, which parses tenants' files and must be assumed subverted by one. The worker
// may ask only about the process of the request in progress; it may open only a file that
// process maps (a line of the maps read here, opened through map_files or inside the
// process's root, device and inode checked: sys/untrusted_files.h), or an ELF debug file of
// one: the worker names the mapped file, its build id and debuglink name, and the broker opens
// the first of that file's candidates (sys/debug_files.h: by build id under /usr/lib/debug, or
// a plain name beside the file) it finds. Never any other file of a process's root, so that no
// file it could read would reach the names it sends back (/debug/mr/stacks).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sys/process_access.h"
#include "sys/unwind_protocol.h"

namespace rdmascope::sys {

class UnwindBroker {
 public:
  explicit UnwindBroker(std::shared_ptr<ProcessAccess> access) : access_(std::move(access)) {}

  // The request in progress is about `image` (tgid 0: no question allowed). Its maps are read
  // for that image only (ProcessAccess::Maps): the worker cannot have another image's.
  void SetScope(const ImageKey& image);
  // Answers `question` (a kAccess message) on `socket`. False when it is malformed, about
  // another process, or cannot be answered: the worker is then stopped.
  bool Answer(int socket, const unwind_protocol::Message& question);

  ProcessAccess& access() { return *access_; }

 private:
  // The maps of the process in scope, as read here (for this request, or now).
  const std::vector<MappedFile>& ScopeMaps();

  const std::shared_ptr<ProcessAccess> access_;
  ImageKey scope_;
  std::vector<MappedFile> scope_maps_;
  bool scope_maps_read_ = false;
};

}  // namespace rdmascope::sys
