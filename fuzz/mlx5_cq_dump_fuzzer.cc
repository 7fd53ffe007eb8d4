// mlx5's raw CQ dump (RDMA_NLDEV_ATTR_RES_RAW, sys/mlx5_cq_dump): 4 bytes of the CQ's
// capacity (cqe, big-endian) from the regular dump, then the firmware's resource dump.
#include <cstdlib>

#include "fuzz_input.h"
#include "sys/mlx5_cq_dump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rdmascope::fuzz::Input input(data, size);
  const uint32_t capacity = input.U32();
  const auto state = rdmascope::sys::DecodeMlx5CqDump(input.Rest(), capacity);
  // A decode is accepted only when its size matches the capacity (mlx5_cq_dump.h).
  if (state && state->log_size < 32 && (uint64_t{1} << state->log_size) - 1 != capacity) {
    std::abort();
  }
  if (state && state->occupancy() > 0xffffff) std::abort();
  return 0;
}
