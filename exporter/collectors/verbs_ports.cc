#include "collectors/verbs_ports.h"

#include <infiniband/verbs.h>

#include <memory>
#include <set>

#include "core/log.h"

namespace rdmascope {

uint32_t IbvMtuToBytes(int mtu) {
  if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096) return 0;
  return 128U << mtu;
}

std::map<std::pair<std::string, uint32_t>, PortMtu> VerbsPortMtuQuerier::Query(
    const std::vector<RdmaDevice>& devices) const {
  std::map<std::pair<std::string, uint32_t>, PortMtu> result;
  if (devices.empty()) return result;  // do not load providers on hosts without RDMA
  std::set<std::string> wanted;
  for (const auto& device : devices) wanted.insert(device.name);

  int count = 0;
  std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)> list(ibv_get_device_list(&count),
                                                                     &ibv_free_device_list);
  if (!list) return result;
  for (int i = 0; i < count; ++i) {
    const std::string name = ibv_get_device_name(list.get()[i]);
    if (!wanted.contains(name)) continue;
    std::unique_ptr<ibv_context, decltype(&ibv_close_device)> context(
        ibv_open_device(list.get()[i]), &ibv_close_device);
    if (!context) {
      log::Debug("ibv_open_device failed", {{"device", name}});
      continue;
    }
    ibv_device_attr device_attr{};
    if (ibv_query_device(context.get(), &device_attr) != 0) continue;
    for (uint32_t port = 1; port <= device_attr.phys_port_cnt; ++port) {
      ibv_port_attr attr{};
      if (ibv_query_port(context.get(), static_cast<uint8_t>(port), &attr) != 0) continue;
      const uint32_t active = IbvMtuToBytes(attr.active_mtu);
      const uint32_t max = IbvMtuToBytes(attr.max_mtu);
      if (active == 0 || max == 0) continue;
      result[{name, port}] = PortMtu{.active_bytes = active, .max_bytes = max};
    }
  }
  return result;
}

}  // namespace rdmascope
