#include "profile/outputs.h"

#include <expected>
#include <sstream>
#include <string>

#include "core/log.h"
#include "profile/folded_writer.h"
#include "profile/html_report.h"
#include "profile/json_writer.h"
#include "profile/output_dir.h"
#include "profile/pprof_writer.h"

namespace rdmascope::profile {
namespace {

// pprof's encoder is librdmascope_pprof.so (libprotobuf), loaded here only: without it the
// other outputs are written, and the note says why there is no profile.pb.gz.
std::expected<std::string, std::string> EncodePprof(const ProfileData& data) {
  std::error_code ec;
  const auto library =
      FindPprofLibrary(std::filesystem::read_symlink("/proc/self/exe", ec).parent_path());
  if (!library) return std::unexpected(library.error());
  return EncodePprof(data, *library);
}

}  // namespace

// Written as root into a directory that may be under /tmp: profile/output_dir.h.
void WriteOutputs(ProfileData& data, const std::filesystem::path& path) {
  const OutputDir dir(path);
  if (auto pprof = EncodePprof(data)) {
    dir.Write("profile.pb.gz", *pprof);
  } else {
    log::Error("profile: no pprof output (profile.pb.gz)", {{"err", pprof.error()}});
    data.notes.push_back("no profile.pb.gz: " + pprof.error());
    dir.Remove("profile.pb.gz");  // not a previous run's
  }
  std::ostringstream json;
  WriteProfileJson(data, json);
  dir.Write("profile.json", json.str());
  for (const auto value : {FoldedValue::kOutstandingBytes, FoldedValue::kRegisteredBytes,
                           FoldedValue::kOutstandingRegions, FoldedValue::kRegistrations}) {
    dir.Write(std::string(FoldedValueName(value)) + ".folded", FoldedStacks(data, value));
  }
  dir.Write("profile.html", HtmlReport(data));
}

}  // namespace rdmascope::profile
