// A DCB netlink RTM_GETDCB / DCB_CMD_IEEE_GET reply (sys/dcb_netlink): PFC configuration.
#include <algorithm>
#include <vector>

#include "sys/dcb_netlink.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint32_t> aligned((size + 3) / 4);  // as recv() fills an aligned buffer
  std::copy(data, data + size, reinterpret_cast<uint8_t*>(aligned.data()));
  rdmascope::sys::ParseIeeeGetReply(aligned.data(), size);
  return 0;
}
