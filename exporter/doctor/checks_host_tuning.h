// Doctor checks over the host collector's series (collectors/host_tuning.cc) and the device
// identity and GID tables of the rdma collector: PCIe link training, firmware uniformity, GID
// index choice, and the host settings (THP, huge pages, numa_balancing, CPU governor, memlock).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// nic: checks_nic.cc
std::vector<Finding> CheckPcieLink(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckFirmwareUniform(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckIrqAffinity(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckXps(const Snapshot&, const Snapshot*, const DoctorOptions&);
// roce: checks_gid.cc
std::vector<Finding> CheckGidIndex(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckCqeCompression(const Snapshot&, const Snapshot*, const DoctorOptions&);
// queues: checks_host_tuning.cc (RC vs UC per process, from rdma_process_qps)
std::vector<Finding> CheckQpTypes(const Snapshot&, const Snapshot*, const DoctorOptions&);
// host: checks_host_tuning.cc
std::vector<Finding> CheckThp(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckHugepages(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckNumaBalancing(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckCpuGovernor(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckMemlock(const Snapshot&, const Snapshot*, const DoctorOptions&);

// Usable bytes per second of a PCIe link: GT/s x lanes x line-code efficiency / 8 (8b/10b up
// to 5 GT/s, 128b/130b for 8-32 GT/s, 242/256 FLIT for 64 GT/s; PCIe base spec 6.0, 4.2).
double PcieBytesPerSecond(double transfers_per_second, double lanes);

// "0000:0000:0000:0000:0000:ffff:c0a8:0a0b" -> "192.168.10.11"; nullopt when the GID is not an
// IPv4-mapped address (the kernel's RoCE GID for an IPv4 address, rdma_ip2gid()).
std::optional<std::string> Ipv4OfGid(std::string_view gid);

// A firmware version as numbers ("22.36.1010" -> {22, 36, 1010}) for ordering; non-numeric
// parts compare as text after the numbers.
std::vector<long> FirmwareKey(std::string_view version);

}  // namespace rdmascope::doctor
