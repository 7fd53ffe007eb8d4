// Writes the outputs of `rdmascope profile` for the hand-built SampleProfile() into a
// directory, as the profile command names them: for the tests that open them with real tools
// (chromium: tests/e2e/profile_html_chromium.py) and for the example in docs/profile.md.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "profile/folded_writer.h"
#include "profile/html_report.h"
#include "profile/json_writer.h"
#include "profile/pprof_writer.h"
#include "unit/profile_writer_fixture.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  namespace profile = rdmascope::profile;
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  const profile::ProfileData data = profile::testing::SampleProfile();
  std::ofstream(dir / "profile.json") << [&] {
    std::ostringstream out;
    profile::WriteProfileJson(data, out);
    return out.str();
  }();
  const auto pprof = profile::EncodePprof(data, PPROF_LIBRARY);
  if (!pprof) {
    std::fprintf(stderr, "%s\n", pprof.error().c_str());
    return 1;
  }
  std::ofstream(dir / "profile.pb.gz", std::ios::binary) << *pprof;
  for (auto value :
       {profile::FoldedValue::kOutstandingBytes, profile::FoldedValue::kRegisteredBytes,
        profile::FoldedValue::kOutstandingRegions, profile::FoldedValue::kRegistrations}) {
    std::ofstream(dir / (std::string(profile::FoldedValueName(value)) + ".folded"))
        << profile::FoldedStacks(data, value);
  }
  std::ofstream(dir / "profile.html") << profile::HtmlReport(data);
  return 0;
}
