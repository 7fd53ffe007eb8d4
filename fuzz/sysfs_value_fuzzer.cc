// sysfs and procfs attribute values: integers (core/sysfs), "N: NAME" states and "100 Gb/sec
// (4X EDR)" rates of RDMA ports (collectors/rdma_sysfs), PCIe link speeds "16.0 GT/s PCIe"
// (collectors/host_tuning), the fixed-size names of shared files and log quoting.
#include <cmath>
#include <cstdlib>

#include "collectors/host_tuning.h"
#include "collectors/rdma_sysfs.h"
#include "core/log.h"
#include "core/sysfs.h"
#include "fuzz_input.h"

using namespace rdmascope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sysfs::ParseUnsigned(text);
  sysfs::ParseSigned(text);
  sysfs::Trim(text);
  sysfs::FixedString(text.data(), text.size());
  log::QuoteValue(text);
  log::ParseLevel(text);
  ParseNumberedState(text);
  PortCounterWidth(text);
  IsHwCounterGauge(text, text);
  // A value is either absent or a real rate: never NaN, infinite or negative (a made-up
  // figure would be exported as if the kernel had said it).
  if (const auto rate = ParseRateBytesPerSecond(text)) {
    if (!std::isfinite(*rate) || *rate < 0) std::abort();
  }
  if (const auto speed = ParsePcieSpeed(text)) {
    if (!std::isfinite(*speed) || *speed <= 0) std::abort();
  }
  if (const auto value = sysfs::ParseDouble(text)) {
    if (std::isnan(*value)) std::abort();
  }
  return 0;
}
