// The unwinder worker's request loop: a DwarfUnwinder (sys/dwarf_unwinder.h) whose process
// access asks the parent over the socket (sys/unwind_protocol.h), so that the worker itself
// opens nothing: it parses what it is handed. Run by `rdmascope __unwind-worker` inside its
// sandbox (sys/unwind_sandbox.h); the parent's side is sys/unwind_client.h.
#pragma once

#include <memory>
#include <string>

#include "sys/dwarf_unwinder.h"
#include "sys/unwind_protocol.h"

namespace rdmascope::sys {

class UnwindWorker {
 public:
  explicit UnwindWorker(int socket);
  // Answers the parent's requests until it closes the socket (or sends what the protocol does
  // not allow): the exit status of the worker.
  int Serve();
  // One request already received: false when the
  // message is malformed or the parent cannot be answered.
  bool Handle(unwind_protocol::Message& request);

 private:
  class ParentAccess;
  int socket_;
  std::shared_ptr<ParentAccess> parent_;
  DwarfUnwinder unwinder_;
};

}  // namespace rdmascope::sys
