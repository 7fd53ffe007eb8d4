// libpfm4, loaded only while event names are resolved: dlopen("libpfm.so.4") when a name needs
// it, pfm_terminate and dlclose when the last user is done. Its event tables (2.5 MiB of RSS,
// 1 MiB of it dirtied by relocation at load) are then not in a serving exporter's memory
// (issue 17); `serve` without the perf collector never maps it.
#pragma once

#include <linux/perf_event.h>

#include <expected>
#include <string>
#include <string_view>

namespace rdmascope::sys {

// Keeps libpfm4 loaded and initialised for its lifetime, so that resolving a list of names
// loads it once. Scopes nest and may live on several threads; the last one unloads it. A
// replaying process (core/capture.h) never loads it: the capture holds the encodings
// (sys/libpfm_capture.h), and pfm_initialize would read the replaying host's /proc and sysfs.
class LibpfmScope {
 public:
  LibpfmScope();
  ~LibpfmScope();
  LibpfmScope(const LibpfmScope&) = delete;
  LibpfmScope& operator=(const LibpfmScope&) = delete;

 private:
  bool held_ = false;
};

// An event name ("cycles", "LLC-load-misses", "INST_RETIRED:ANY_P") -> perf_event_attr, counting
// in user and kernel mode. Loads libpfm4 for the call unless a LibpfmScope holds it. Errors are
// one-line reasons (libpfm4 missing, its initialisation failed, the name is unknown).
std::expected<perf_event_attr, std::string> LibpfmEncode(std::string_view name);

// Whether libpfm4 is loaded by us now (tests).
bool LibpfmLoaded();

}  // namespace rdmascope::sys
