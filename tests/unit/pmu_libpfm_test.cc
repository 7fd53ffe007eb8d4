// libpfm4 is loaded only while names are resolved (issue 17: its tables are 2.5 MiB of a
// serving exporter's RSS): after ResolvePerfEvent, or the last LibpfmScope, it is unmapped.
#include "sys/pmu_libpfm.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "sys/perf_events.h"

namespace rdmascope::sys {
namespace {

bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(name) != std::string::npos) return true;
  }
  return false;
}

TEST(Libpfm, NotMappedAfterResolvingNames) {
  // Whether this host's PMU knows the names does not matter: libpfm4 is loaded to find out.
  (void)ResolvePerfEvent("/nonexistent", "cycles");
  (void)ResolvePerfEvent("/nonexistent", "NO_SUCH_EVENT_ANYWHERE");
  EXPECT_FALSE(LibpfmLoaded());
  EXPECT_FALSE(Mapped("libpfm.so")) << "libpfm4 still mapped after resolving";
}

TEST(Libpfm, ScopeKeepsItLoadedForSeveralNames) {
  {
    const LibpfmScope scope;
    ASSERT_TRUE(LibpfmLoaded()) << "libpfm.so.4 could not be loaded on this host";
    EXPECT_TRUE(Mapped("libpfm.so"));
    (void)LibpfmEncode("cycles");
    {
      const LibpfmScope nested;
      (void)LibpfmEncode("instructions");
    }
    EXPECT_TRUE(LibpfmLoaded()) << "the inner scope unloaded it under the outer one";
  }
  EXPECT_FALSE(LibpfmLoaded());
  EXPECT_FALSE(Mapped("libpfm.so"));
}

TEST(Libpfm, UnknownNameIsAnErrorSayingSo) {
  const auto attr = LibpfmEncode("NO_SUCH_EVENT_ANYWHERE");
  ASSERT_FALSE(attr);
  EXPECT_NE(attr.error().find("NO_SUCH_EVENT_ANYWHERE"), std::string::npos) << attr.error();
}

}  // namespace
}  // namespace rdmascope::sys
