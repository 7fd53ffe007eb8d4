// Kernel RDMA resource tracking (restrack) over RDMA netlink (NETLINK_RDMA, client NLDEV):
// the interface iproute2's `rdma res show` uses. Built on libmnl.
//
// One RES_GET dump lists the devices with their host-wide summary; then one dump per device
// and resource kind (the kernel requires the device index for those) lists each object with
// its owner: a pid for objects created from user space (in the caller's pid namespace; objects
// of other namespaces are hidden), a kernel name (ib_core, rdma_cm...) for kernel consumers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct mnl_socket;

namespace rdmascope::sys {

enum class RdmaResourceKind { kPd, kCq, kQp, kMr, kSrq, kCtx, kCmId };
inline constexpr RdmaResourceKind kAllRdmaResourceKinds[] = {
    RdmaResourceKind::kPd,  RdmaResourceKind::kCq,  RdmaResourceKind::kQp,  RdmaResourceKind::kMr,
    RdmaResourceKind::kSrq, RdmaResourceKind::kCtx, RdmaResourceKind::kCmId};

// The kernel's summary names: "pd", "cq", "qp", "mr", "srq", "ctx", "cm_id".
std::string_view ResourceKindName(RdmaResourceKind kind);

struct RdmaResourceEntry {
  RdmaResourceKind kind = RdmaResourceKind::kPd;
  // User-space owner: as dumped, the id of the *thread* that created the object, absent
  // (with no kernel_name either) once that thread has exited; ResolveOwners()
  // (sys/rdma_owners.h) makes it the process, from a parent when the thread is gone.
  std::optional<uint32_t> pid;
  bool pid_from_parent = false;        // set by ResolveOwners()
  std::optional<uint32_t> pdn;         // the PD of an MR, QP or SRQ (user objects)
  std::optional<uint32_t> ctxn;        // the context of a PD or CQ (user objects)
  std::string kernel_name;             // kernel owner (ib_core, rdma_cm...), when there is no pid
  std::optional<uint32_t> id;          // pdn, cqn, lqpn, mrn, srqn, ctxn or cm_idn
  std::optional<uint32_t> cq_entries;  // CQ: actual capacity (cqe)
  std::optional<uint64_t> mr_length;   // MR: bytes
  // MR: the local key; dumped only to a caller with CAP_NET_ADMIN (nldev.c fill_res_mr_entry).
  std::optional<uint32_t> mr_lkey;
  std::optional<uint8_t> qp_type;   // QP, CM id: enum ib_qp_type
  std::optional<uint8_t> qp_state;  // QP: enum ib_qp_state
  std::vector<uint8_t> raw;         // CQ: the driver's raw hardware state, when asked and available
};

struct RdmaDeviceResources {
  uint32_t index = 0;
  std::string name;
  std::map<std::string, uint64_t> summary;  // kernel name -> current count
  std::vector<RdmaResourceEntry> entries;
  std::vector<std::string> errors;  // kinds the kernel would not list, with the reason
  // The kinds of `errors`: their objects are unknown on this device, not absent (the MR
  // collector must not take a region it follows for gone when its kind could not be listed).
  std::vector<RdmaResourceKind> unlisted;
};

// A port as RDMA_NLDEV_CMD_PORT_GET reports it (nldev.c fill_port_info). The kernel adds the
// netdev (RDMA_NLDEV_ATTR_NDEV_INDEX/NDEV_NAME) only when it is in the caller's network
// namespace: empty here for InfiniBand ports and for a netdev moved into another namespace.
// Unlike the GID table's ndevs (which list every namespace's interfaces, pods' eth0 included),
// this names an interface this process can see.
struct RdmaPortNetdev {
  uint32_t device_index = 0;
  std::string device;
  uint32_t port = 0;
  std::string netdev;
};

// QP type and state names as `rdma res show qp` prints them (RC, UD, XRC_TGT...; RTS, ERR...).
std::string QpTypeName(uint8_t type);
std::string QpStateName(uint8_t state);

// Requests, built into buf; return their length.
size_t BuildResourceSummaryDump(uint32_t seq, std::vector<char>& buf);
size_t BuildResourceDump(RdmaResourceKind kind, uint32_t device_index, uint32_t seq,
                         std::vector<char>& buf);

// The device list (RDMA_NLDEV_CMD_GET dump) and one device's ports (RDMA_NLDEV_CMD_PORT_GET
// dump, which the kernel refuses without a device index).
size_t BuildDeviceDump(uint32_t seq, std::vector<char>& buf);
size_t BuildPortDump(uint32_t device_index, uint32_t seq, std::vector<char>& buf);

// A raw CQ query (RDMA_NLDEV_CMD_RES_CQ_GET_RAW for one CQ: needs CAP_NET_ADMIN; drivers
// without raw dumps answer EINVAL or EOPNOTSUPP) and its reply's RDMA_NLDEV_ATTR_RES_RAW.
size_t BuildRawCqQuery(uint32_t device_index, uint32_t cqn, uint32_t seq, std::vector<char>& buf);
int ParseRawCqReply(const void* data, size_t len, uint32_t seq, std::vector<uint8_t>& raw);

// Parsers for one received buffer (several messages) of a dump. They return 1 while the dump
// goes on, 0 at its end (NLMSG_DONE), or an errno (negative) for a kernel error or a malformed
// message. Devices and entries are appended.
int ParseResourceSummaryReply(const void* data, size_t len, uint32_t seq,
                              std::vector<RdmaDeviceResources>& devices);
int ParseResourceReply(const void* data, size_t len, uint32_t seq, RdmaResourceKind kind,
                       std::vector<RdmaResourceEntry>& entries);
// Devices (index and name only; summary stays empty) and ports.
int ParseDeviceReply(const void* data, size_t len, uint32_t seq,
                     std::vector<RdmaDeviceResources>& devices);
int ParsePortReply(const void* data, size_t len, uint32_t seq, std::vector<RdmaPortNetdev>& ports);

class RdmaNetlink {
 public:
  // EPROTONOSUPPORT: the kernel has no RDMA netlink (built without InfiniBand).
  static std::expected<RdmaNetlink, int> Open();
  RdmaNetlink(RdmaNetlink&& other) noexcept;
  RdmaNetlink(const RdmaNetlink&) = delete;
  RdmaNetlink& operator=(const RdmaNetlink&) = delete;
  RdmaNetlink& operator=(RdmaNetlink&&) = delete;
  ~RdmaNetlink();

  // Every device with its summary and (for the kinds this kernel tracks) its objects; the raw
  // state of at most max_raw_cqs user CQs, on devices whose driver provides it. `kinds`
  // narrows the per-device dumps (the MR collector lists MRs only).
  std::expected<std::vector<RdmaDeviceResources>, int> DumpAll(
      size_t max_raw_cqs = 0, std::span<const RdmaResourceKind> kinds = kAllRdmaResourceKinds);

  // Every port of every device, with its netdev when it is in this network namespace.
  std::expected<std::vector<RdmaPortNetdev>, int> DumpPorts();

 private:
  explicit RdmaNetlink(mnl_socket* socket) : socket_(socket) {}
  // Sends a request and feeds each reply buffer to parse until it returns <= 0.
  template <typename Parse>
  int RunDump(const std::vector<char>& request, size_t len, Parse&& parse);
  mnl_socket* socket_;
  uint32_t seq_ = 1;
};

}  // namespace rdmascope::sys
