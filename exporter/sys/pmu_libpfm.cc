#include "sys/pmu_libpfm.h"

#include <dlfcn.h>
#include <perfmon/pfmlib_perf_event.h>

#include <mutex>

#include "core/capture.h"

namespace rdmascope::sys {
namespace {

constexpr const char* kLibrary = "libpfm.so.4";

// The process's one copy of libpfm4: loaded by the first scope, unloaded by the last.
struct Libpfm {
  std::mutex mutex;
  int refs = 0;
  void* handle = nullptr;
  std::string load_error;  // why dlopen/dlsym failed; empty when loaded
  int init_status = PFM_SUCCESS;
  decltype(&pfm_initialize) initialize = nullptr;
  decltype(&pfm_terminate) terminate = nullptr;
  decltype(&pfm_strerror) strerror = nullptr;
  decltype(&pfm_get_os_event_encoding) encode = nullptr;
};

Libpfm& State() {
  static Libpfm state;
  return state;
}

template <typename F>
bool Symbol(Libpfm& pfm, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(pfm.handle, name));
  if (out == nullptr) pfm.load_error = std::string("no symbol ") + name + " in " + kLibrary;
  return out != nullptr;
}

void Load(Libpfm& pfm) {
  pfm.load_error.clear();
  pfm.handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (pfm.handle == nullptr) {
    const char* error = dlerror();
    pfm.load_error = std::string("libpfm4 is not available (") + (error ? error : kLibrary) +
                     "): install libpfm4 to count events named like \"cycles\"";
    return;
  }
  if (!Symbol(pfm, "pfm_initialize", pfm.initialize) ||
      !Symbol(pfm, "pfm_terminate", pfm.terminate) || !Symbol(pfm, "pfm_strerror", pfm.strerror) ||
      !Symbol(pfm, "pfm_get_os_event_encoding", pfm.encode)) {
    dlclose(pfm.handle);
    pfm.handle = nullptr;
    return;
  }
  pfm.init_status = pfm.initialize();
}

void Unload(Libpfm& pfm) {
  if (pfm.handle == nullptr) return;
  // pfm_terminate frees what pfm_initialize allocated (per-PMU tables); after a failed
  // initialisation there is nothing to free.
  if (pfm.init_status == PFM_SUCCESS) pfm.terminate();
  dlclose(pfm.handle);
  pfm.handle = nullptr;
}

}  // namespace

LibpfmScope::LibpfmScope() {
  const capture::Session* session = capture::Active();
  if (session != nullptr && session->replaying()) return;
  held_ = true;
  Libpfm& pfm = State();
  std::lock_guard lock(pfm.mutex);
  if (pfm.refs++ == 0) Load(pfm);
}

LibpfmScope::~LibpfmScope() {
  if (!held_) return;
  Libpfm& pfm = State();
  std::lock_guard lock(pfm.mutex);
  if (--pfm.refs == 0) Unload(pfm);
}

std::expected<perf_event_attr, std::string> LibpfmEncode(std::string_view name) {
  const LibpfmScope scope;
  Libpfm& pfm = State();
  std::lock_guard lock(pfm.mutex);  // libpfm4's encoder is not documented as thread-safe
  if (pfm.handle == nullptr) return std::unexpected(pfm.load_error);
  if (pfm.init_status != PFM_SUCCESS) {
    return std::unexpected(std::string("libpfm4 initialisation failed: ") +
                           pfm.strerror(pfm.init_status));
  }
  perf_event_attr attr{};
  pfm_perf_encode_arg_t arg{};
  arg.attr = &attr;
  arg.size = sizeof arg;
  const std::string text(name);
  // Count in user and kernel mode (PLM3 and PLM0): the whole cost of the host's work.
  const int ret = pfm.encode(text.c_str(), PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT, &arg);
  if (ret != PFM_SUCCESS) {
    return std::unexpected(std::string("libpfm4: ") + pfm.strerror(ret) + " (\"" + text + "\")");
  }
  return attr;
}

bool LibpfmLoaded() {
  Libpfm& pfm = State();
  std::lock_guard lock(pfm.mutex);
  return pfm.handle != nullptr;
}

}  // namespace rdmascope::sys
