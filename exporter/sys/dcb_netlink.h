// IEEE 802.1Qaz PFC configuration over DCB netlink (rtnetlink RTM_GETDCB, DCB_CMD_IEEE_GET),
// the interface `dcb pfc show` and lldpad use. Built on libmnl.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string_view>
#include <vector>

struct mnl_socket;

namespace rdmascope::sys {

struct PfcConfig {
  uint8_t capability = 0;        // number of traffic classes that can do PFC
  uint8_t enabled_mask = 0;      // bit N: PFC on priority N
  uint64_t requests[8] = {};     // pause frames sent per priority (driver-provided)
  uint64_t indications[8] = {};  // pause frames received per priority
};

// Builds the RTM_GETDCB request for one interface into buf; returns its length (0 if the
// buffer is too small or the name is invalid).
size_t BuildIeeeGetRequest(std::string_view ifname, uint32_t seq, std::vector<char>& buf);

// Parses one reply; errors are errno values (EOPNOTSUPP: driver without DCB; ENODATA: DCB
// but no PFC attribute; EBADMSG: malformed).
std::expected<PfcConfig, int> ParseIeeeGetReply(const void* data, size_t len);

class DcbNetlink {
 public:
  static std::expected<DcbNetlink, int> Open();
  DcbNetlink(DcbNetlink&& other) noexcept;
  DcbNetlink(const DcbNetlink&) = delete;
  DcbNetlink& operator=(const DcbNetlink&) = delete;
  DcbNetlink& operator=(DcbNetlink&&) = delete;
  ~DcbNetlink();

  std::expected<PfcConfig, int> QueryPfc(std::string_view ifname);

 private:
  explicit DcbNetlink(mnl_socket* socket) : socket_(socket) {}
  mnl_socket* socket_;
  uint32_t seq_ = 1;
};

}  // namespace rdmascope::sys
