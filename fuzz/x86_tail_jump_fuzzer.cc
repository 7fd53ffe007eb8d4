// The x86-64 forwarder and PLT stub decoder (sys/x86_tail_jump): 8 bytes of load address
// (big-endian), then the function's code.
#include "fuzz_input.h"
#include "sys/x86_tail_jump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rdmascope::fuzz::Input input(data, size);
  const uint64_t address = input.U64();
  rdmascope::sys::TailJumpTarget(input.Rest(), address);
  rdmascope::sys::PltGotSlot(input.Rest(), address);
  return 0;
}
