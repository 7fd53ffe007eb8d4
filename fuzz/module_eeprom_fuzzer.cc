// A pluggable module's management pages (sys/module_eeprom): the input is the module's memory,
// served to the decoder read by read in the order it asks (each read takes the next bytes; a
// read past the end is a page the module does not have). The decoder's own invariants are
// checked: no lane count beyond 32 (4 banks of 8), thresholds said valid only when ordered.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "fuzz_input.h"
#include "sys/module_eeprom.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rdmascope::fuzz::Input input(data, size);
  std::span<const uint8_t> rest = input.Rest();
  const auto reader = [&rest](const rdmascope::sys::ModulePageKey&, uint8_t, uint8_t length,
                              uint8_t* out) {
    if (rest.size() < length) return false;
    std::memcpy(out, rest.data(), length);
    rest = rest.subspan(length);
    return true;
  };
  const rdmascope::sys::ModuleReading reading = rdmascope::sys::DecodeModule(reader);
  if (reading.lanes.size() > 32) std::abort();
  for (const auto* thresholds :
       {&reading.temperature_thresholds, &reading.supply_thresholds, &reading.tx_bias_thresholds,
        &reading.tx_power_thresholds, &reading.rx_power_thresholds}) {
    if (!*thresholds || !(*thresholds)->valid) continue;
    const auto& t = **thresholds;
    if (!(t.low_alarm <= t.low_warning && t.low_warning < t.high_warning &&
          t.high_warning <= t.high_alarm)) {
      std::abort();
    }
  }
  for (const auto& lane : reading.lanes) {
    for (const auto& value : {lane.rx_power_watts, lane.tx_power_watts, lane.tx_bias_amperes}) {
      if (value && !std::isfinite(*value)) std::abort();
    }
  }
  return 0;
}
