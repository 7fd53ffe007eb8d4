// libpfm4's event encodings behind the host boundary of core/capture.h. libpfm4 answers from
// its tables for the CPU it runs on (and reads /proc and sysfs to pick them): a name like
// "LLC-load-misses" or "INST_RETIRED:ANY_P" encodes differently on another CPU model or libpfm4
// release. So a capture keeps what the captured host's libpfm4 answered, per name, and a replay
// uses that and never loads libpfm4 (docs/capture.md "perf"):
//
//   perf/libpfm/LLC-load-misses     type 3 / config 0x10002 / exclude_hv 1 ... (a line each)
//   perf/libpfm/NOT_AN_EVENT        error libpfm4: event not found ("NOT_AN_EVENT")
//
// The file is text a person can read and write: "key value" lines of the perf_event_attr
// fields libpfm4 sets (hex or decimal), or one "error <reason>" line.
#pragma once

#include <linux/perf_event.h>

#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace rdmascope::sys {

// "perf/libpfm/<name>" with bytes outside [A-Za-z0-9_.:=+-] and a leading '.' as %XX; nullopt
// for an empty name or one whose file name would pass 200 bytes (not recorded: resolved live).
std::optional<std::string> LibpfmCaptureFile(std::string_view name);

// What one encoding was, as the file says it; and back. Parsing refuses the file (the outer
// error, a reason naming the line) for an unknown key, a key twice, a value that is not a
// number of its field's range, or no "type"/"config": a made-up encoding counts something else.
using LibpfmAnswer = std::expected<perf_event_attr, std::string>;
std::string FormatLibpfmAnswer(const LibpfmAnswer& answer);
std::expected<LibpfmAnswer, std::string> ParseLibpfmAnswer(std::string_view text);

// LibpfmEncode behind the boundary: live, libpfm4 answers (recorded when a capture is taken);
// replaying, the capture answers, and a name it lacks or a file it refuses is an error naming
// the capture, never libpfm4's answer on the replaying machine.
LibpfmAnswer CapturedLibpfmEncode(std::string_view name);

}  // namespace rdmascope::sys
