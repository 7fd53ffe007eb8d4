// Decoding the raw CQ state mlx5 returns over RDMA netlink (RDMA_NLDEV_CMD_RES_CQ_GET_RAW,
// `rdma res show cq cqn N -r`): the device's hardware CQ context, whose producer and consumer
// counters give the CQ's true occupancy.
//
// Where the layout comes from (Linux, include/linux/mlx5/mlx5_ifc.h; the kernel's
// drivers/infiniband/hw/mlx5/restrack.c dumps it with the firmware resource-dump facility,
// drivers/net/ethernet/mellanox/mlx5/core/diag/rsc_dump.c):
// - The dump is a sequence of segments, each starting with resource_dump_segment_header:
//   big-endian length_dw[16] (the segment's length in 32-bit words, header included) and
//   segment_type[16].
// - resource_dump_command_segment (5 words) echoes the request: segment_called[16] is the
//   firmware's type number for the segment asked for (PRM_QUERY_CQ; firmware-specific, learnt
//   by the kernel from the dump menu), index1 the CQ number. The data segment is the one of
//   that type.
// - Its payload is the output of the QUERY_CQ command, query_cq_out: 16 bytes (status,
//   syndrome, reserved) then cq_context (cqc). In cqc (big-endian bit offsets):
//   log_cq_size at bit 0x63 (5 bits), consumer_counter at 0x148 (24 bits), producer_counter at
//   0x168 (24 bits), st (arm state) at 0x14 (4 bits).
// The counters wrap at 2^24; occupancy = (producer - consumer) mod 2^24. A decode is accepted
// only if log_cq_size matches the CQ's capacity from the regular dump (cqe = 2^log_cq_size - 1),
// so a layout this decoder does not know yields no value rather than a wrong one.
#pragma once

#include <cstdint>
#include <expected>
#include <span>
#include <string>

namespace rdmascope::sys {

struct Mlx5CqState {
  uint32_t log_size = 0;  // capacity = 2^log_size entries
  uint32_t producer_counter = 0;
  uint32_t consumer_counter = 0;
  uint32_t arm_state = 0;  // cqc.st
  uint32_t cqn = 0;        // the hardware CQ number (index1 of the command segment)
  uint64_t occupancy() const { return (producer_counter - consumer_counter) & 0xffffffu; }
};

// Decodes one raw dump; `capacity` is the CQ's cqe from the regular dump, checked against the
// decoded size.
std::expected<Mlx5CqState, std::string> DecodeMlx5CqDump(std::span<const uint8_t> dump,
                                                         uint32_t capacity);

}  // namespace rdmascope::sys
