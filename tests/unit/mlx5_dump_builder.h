// Builds mlx5 raw CQ dumps as the firmware lays them out (exporter/sys/mlx5_cq_dump.h), for
// the decoder's and the resources collector's tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmascope::testing {

struct CqDump {
  uint32_t log_size = 8, producer = 1000, consumer = 900, cqn = 0x4a, state = 0x6;
  bool with_command = true;
  size_t payload_words = (16 + 0x200 / 8 + 0x600 / 8) / 4;  // query_cq_out without pas
};

std::vector<uint8_t> Build(const CqDump& dump);

}  // namespace rdmascope::testing
