// IEEE 802.1Qaz PFC configuration and the APP table's DSCP map over DCB netlink (rtnetlink
// RTM_GETDCB, DCB_CMD_IEEE_GET), the interface `dcb pfc show`, `dcb app show` and lldpad use.
// Built on libmnl.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct mnl_socket;

namespace rdmascope::sys {

// The DSCP entries of the APP table (DCB_ATTR_IEEE_APP_TABLE: struct dcb_app with selector
// IEEE_8021QAZ_APP_SEL_DSCP, include/uapi/linux/dcbnl.h; the kernel's dcbnl_ieee_fill copies
// its dcb_app_list entries of the interface). A NIC classifies received and RoCE traffic by
// DSCP only when the table maps DSCPs: mlx5 adds all 64 entries when its trust state is DSCP and
// none when it is PCP, and switches trust with the first entry added or the last deleted
// (drivers/net/ethernet/mellanox/mlx5/core/en_dcbnl.c: mlx5e_dcbnl_dscp_app,
// mlx5e_dcbnl_ieee_setapp, mlx5e_dcbnl_ieee_delapp); ice and bnxt_en take DSCP entries the same
// way.
struct DscpMap {
  static constexpr int kDscps = 64;
  uint8_t priorities[kDscps] = {};  // bit P: the table maps this DSCP to priority P (IEEE allows
                                    // several entries per DSCP)
  int entries = 0;                  // DSCP entries; 0: no DSCP classification (PCP trust)
};

struct PfcConfig {
  uint8_t capability = 0;        // number of traffic classes that can do PFC
  uint8_t enabled_mask = 0;      // bit N: PFC on priority N
  uint64_t requests[8] = {};     // pause frames sent per priority (driver-provided)
  uint64_t indications[8] = {};  // pause frames received per priority
  // From the same reply. Absent when the reply has no APP table or a malformed one (then
  // dscp_error says what was wrong): a map half read would be a made-up trust state.
  std::optional<DscpMap> dscp;
  std::string dscp_error;
};

// Builds the RTM_GETDCB request for one interface into buf; returns its length (0 if the
// buffer is too small or the name is invalid).
size_t BuildIeeeGetRequest(std::string_view ifname, uint32_t seq, std::vector<char>& buf);

// Parses one reply; errors are errno values (EOPNOTSUPP: driver without DCB; ENODATA: DCB
// but no PFC attribute; EBADMSG: malformed). A malformed APP table leaves the PFC result
// intact, without `dscp`.
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
