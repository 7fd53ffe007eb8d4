// google/pprof's profile.proto (perftools.profiles.Profile), gzipped: what `go tool pprof`,
// Pyroscope and Parca open. Sample types, in this order: outstanding_bytes/bytes (the default),
// outstanding_regions/count, registrations/count, registered_bytes/bytes; one sample per
// registration stack (plus the "[no call stack]" remainder, stacks.h).
//
// The protobuf encoding lives in librdmascope_pprof.so (pprof_writer_proto.cc, libprotobuf),
// loaded with dlopen by `rdmascope profile` only: `serve` never maps libprotobuf (issue 17).
#pragma once

#include <expected>
#include <filesystem>
#include <string>

#include "core/version.h"
#include "profile/profile_data.h"

namespace rdmascope::profile {

inline constexpr const char* kPprofLibraryName = "librdmascope_pprof.so";

// What the executable and the library must agree on: the library of another build (another
// ProfileData layout) is refused rather than handed a structure it would misread.
inline std::string PprofAbi() {
  return std::string(kVersion) + " " + kRevision + " " + std::to_string(sizeof(ProfileData));
}

// The library beside the executable (the build tree), else the installed one
// (<libdir>/rdmascope/); the error names both places.
std::expected<std::filesystem::path, std::string> FindPprofLibrary(
    const std::filesystem::path& executable_dir);

// The gzipped profile, encoded by `library`; an error saying why when it cannot be loaded or
// fails (no made-up file: the caller writes no profile.pb.gz then).
std::expected<std::string, std::string> EncodePprof(const ProfileData& data,
                                                    const std::filesystem::path& library);

}  // namespace rdmascope::profile
