// libpfm4 encodings for named CPU models, without their hardware: libpfm4's forced-PMU mode
// (LIBPFM_FORCE_PMU, set by ctest for each run of this program) makes it encode for that
// model. The expected configs are the models' documented event/umask codes.
#include <gtest/gtest.h>
#include <linux/perf_event.h>

#include <cstdlib>
#include <string>

#include "sys/perf_events.h"

namespace rdmascope::sys {
namespace {

bool Forced(const char* pmu) {
  const char* forced = std::getenv("LIBPFM_FORCE_PMU");
  return forced != nullptr && std::string(forced) == pmu;
}

void ExpectRaw(std::string_view name, uint64_t config) {
  const auto spec = ResolvePerfEvent("/nonexistent", name);
  ASSERT_TRUE(spec) << spec.error();
  EXPECT_EQ(spec->attr.type, static_cast<uint32_t>(PERF_TYPE_RAW)) << name;
  EXPECT_EQ(spec->attr.config, config) << name;
}

TEST(ForcedPmu, Skylake) {
  if (!Forced("skl")) GTEST_SKIP() << "run with LIBPFM_FORCE_PMU=skl";
  ExpectRaw("INST_RETIRED:ANY_P", 0x00c0);      // event 0xc0, umask 0x00
  ExpectRaw("LONGEST_LAT_CACHE:MISS", 0x412e);  // event 0x2e, umask 0x41: LLC misses
  ExpectRaw("UNHALTED_CORE_CYCLES", 0x003c);
  EXPECT_FALSE(ResolvePerfEvent("/nonexistent", "RETIRED_INSTRUCTIONS")) << "an AMD name";
}

TEST(ForcedPmu, Zen2) {
  if (!Forced("amd64_fam17h_zen2")) GTEST_SKIP() << "run with LIBPFM_FORCE_PMU=amd64_fam17h_zen2";
  ExpectRaw("RETIRED_INSTRUCTIONS", 0x00c0);
  ExpectRaw("CYCLES_NOT_IN_HALT", 0x0076);
  EXPECT_FALSE(ResolvePerfEvent("/nonexistent", "LONGEST_LAT_CACHE:MISS")) << "an Intel name";
}

}  // namespace
}  // namespace rdmascope::sys
