// --web.listen-address values (http/listen_address): ":9879", "host:port", "[v6]:port".
#include <cstdlib>

#include "http/listen_address.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto address = rdmascope::ParseListenAddress(text);
  // IPv6 literals come back without their brackets.
  if (address && (address->host.find('[') != std::string::npos ||
                  address->host.find(']') != std::string::npos)) {
    std::abort();
  }
  return 0;
}
