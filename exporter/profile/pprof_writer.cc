#include "profile/pprof_writer.h"

#include <dlfcn.h>

#include <mutex>

#include "core/gzip.h"
#include "core/log.h"
#include "core/private_library.h"

namespace rdmascope::profile {
namespace {

using AbiFn = const char* (*)();
using SerializeFn = int (*)(const ProfileData*, std::string*, std::string*);

}  // namespace

std::expected<std::filesystem::path, std::string> FindPprofLibrary(
    const std::filesystem::path& executable_dir) {
  return FindPrivateLibrary(kPprofLibraryName, executable_dir, RDMASCOPE_PPROF_INSTALL_DIR);
}

std::expected<std::string, std::string> EncodePprof(const ProfileData& data,
                                                    const std::filesystem::path& library) {
  // Loaded once per process and kept: `profile` writes one report and exits. dlerror's state
  // is per thread, but dlopen may run concurrently with another thread's: one at a time.
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return std::unexpected("cannot load " + library.string() + ": " + DlError("dlopen failed"));
  }
  const auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "rdmascope_pprof_abi"));
  const auto serialize = reinterpret_cast<SerializeFn>(dlsym(handle, "rdmascope_pprof_serialize"));
  if (abi == nullptr || serialize == nullptr) {
    dlclose(handle);
    return std::unexpected(library.string() + " is not rdmascope's pprof library");
  }
  if (const std::string theirs = abi(); theirs != PprofAbi()) {
    dlclose(handle);
    return std::unexpected(library.string() + " is from another build (" + theirs + ", this is " +
                           PprofAbi() + ")");
  }
  std::string bytes, error;
  if (serialize(&data, &bytes, &error) != 0) {
    return std::unexpected("pprof encoding failed: " + error);
  }
  if (auto gzipped = GzipCompress(bytes)) return *std::move(gzipped);
  // pprof reads an uncompressed profile too: better that than no profile.
  log::Warn("gzip of the pprof profile failed, writing it uncompressed");
  return bytes;
}

}  // namespace rdmascope::profile
