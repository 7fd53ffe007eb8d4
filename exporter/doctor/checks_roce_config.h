// RoCE configuration beyond PFC, and the kernel modules RDMA needs: rdma_cm's default ToS
// (configfs), the mlx5 ECN enables of the RoCE priority, missing modules (inputs of the host
// collector, collectors/host_tuning_roce.cc; checks_roce_config.cc), and the DSCP trust of the
// NIC (the ethtool collector's DCB APP table series; checks_roce_dscp.cc).
#pragma once

#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

std::vector<Finding> CheckDefaultTos(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckEcn(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckDscpTrust(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckKernelModules(const Snapshot&, const Snapshot*, const DoctorOptions&);

}  // namespace rdmascope::doctor
