// Port attributes that sysfs does not show (active and max MTU), from libibverbs'
// ibv_query_port: the same call ibv_devinfo makes.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "collectors/rdma_sysfs.h"

namespace rdmascope {

class PortMtuQuerier {
 public:
  virtual ~PortMtuQuerier() = default;
  // For the named devices: (device, port) -> MTU. Devices libibverbs does not know (no
  // provider, no permission on /dev/infiniband) are absent from the result.
  virtual std::map<std::pair<std::string, uint32_t>, PortMtu> Query(
      const std::vector<RdmaDevice>& devices) const = 0;
};

class VerbsPortMtuQuerier : public PortMtuQuerier {
 public:
  std::map<std::pair<std::string, uint32_t>, PortMtu> Query(
      const std::vector<RdmaDevice>& devices) const override;
};

// IBV_MTU_256..IBV_MTU_4096 (1..5) -> bytes; 0 for anything else.
uint32_t IbvMtuToBytes(int mtu);

}  // namespace rdmascope
