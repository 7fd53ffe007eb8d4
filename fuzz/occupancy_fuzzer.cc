// The preload library's stats file (preload/stats_file.h) as the occupancy collector reads it
// from --occupancy.dir (collectors/occupancy ParseOccupancyFile), then mapped to metrics: the
// file is written by the application's process, so every byte of it is outside input.
//
// The file has a fixed size (443,264 bytes) and is mostly zeros; libFuzzer mutating inputs that
// large ran this target at about 100 inputs a second. So an input of any other size describes
// the file sparsely, and the parser still gets the whole file: the header's bytes, then any
// number of slots, each a kind byte (0: cqs[], 1: srqs[], 2: shards[], 3: shard_shared), a
// big-endian 16-bit index (modulo the array's length) and the slot's bytes (zeros after a
// short one). An input of exactly the file's size is the file.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "collectors/occupancy.h"
#include "core/metric_set.h"
#include "stats_file.h"

namespace {

occ_file& SparseFile(const uint8_t* data, size_t size,
                     std::vector<std::pair<size_t, size_t>>& touched) {
  static occ_file file;
  auto* bytes = reinterpret_cast<uint8_t*>(&file);
  const auto put = [&](size_t offset, size_t length) {
    const size_t n = std::min(length, size);
    std::memcpy(bytes + offset, data, n);
    data += n;
    size -= n;
    touched.emplace_back(offset, n);
  };
  put(0, sizeof(occ_header));
  while (size >= 3) {
    const uint8_t kind = data[0] % 4;
    const size_t index = static_cast<size_t>(data[1]) << 8 | data[2];
    data += 3;
    size -= 3;
    switch (kind) {
      case 0:
        put(offsetof(occ_file, cqs) + index % OCC_MAX_CQS * sizeof(occ_cq), sizeof(occ_cq));
        break;
      case 1:
        put(offsetof(occ_file, srqs) + index % OCC_MAX_SRQS * sizeof(occ_srq), sizeof(occ_srq));
        break;
      case 2:
        put(offsetof(occ_file, shards) + index % OCC_THREAD_SHARDS * sizeof(occ_shard),
            sizeof(occ_shard));
        break;
      default:
        put(offsetof(occ_file, shard_shared), sizeof(occ_shard));
        break;
    }
  }
  return file;
}

void Parse(std::span<const uint8_t> bytes) {
  const auto process = rdmascope::ParseOccupancyFile(bytes);
  if (!process) return;
  rdmascope::MetricSet metrics;
  rdmascope::MapOccupancy({*process}, metrics);
  metrics.Take();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == sizeof(occ_file)) {
    Parse({data, size});
    return 0;
  }
  std::vector<std::pair<size_t, size_t>> touched;
  occ_file& file = SparseFile(data, size, touched);
  Parse({reinterpret_cast<const uint8_t*>(&file), sizeof file});
  // Zeros again for the next input (cheaper than clearing 433 KiB every time).
  for (const auto& [offset, length] : touched) {
    std::memset(reinterpret_cast<uint8_t*>(&file) + offset, 0, length);
  }
  return 0;
}
