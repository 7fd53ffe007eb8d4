// The eBPF collectors' capture files as a replay reads them (collectors/probe_capture.h,
// docs/capture.md "eBPF probes"): bpf/mr.json, bpf/verbs.json and mr/uverbs_holders. Input: a
// selector byte (which file), then its bytes. What a reader accepts is written back and must
// read back the same: a replay maps exactly what the file says.
#include <cstdlib>

#include "collectors/mr_snapshot_json.h"
#include "collectors/probe_capture.h"
#include "collectors/verbs_snapshot_json.h"
#include "fuzz_input.h"

namespace {

// Written back, the text reads back to the same text (every field kept, none made up).
template <typename Read, typename Write>
void RoundTrip(std::string_view text, Read read, Write write) {
  const auto first = read(text);
  if (!first) return;
  const std::string written = write(*first);
  const auto second = read(written);
  if (!second || write(*second) != written) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rdmascope;
  fuzz::Input input(data, size);
  const uint8_t which = input.Byte() % 3;
  const std::string_view text = input.RestText();
  if (which == 0) RoundTrip(text, MrReadingFromJson, MrReadingToJson);
  if (which == 1) RoundTrip(text, VerbsReadingFromJson, VerbsReadingToJson);
  if (which == 2) {
    const auto holders = ParseUverbsHolders(text);
    if (holders && ParseUverbsHolders(FormatUverbsHolders(*holders)) != holders) std::abort();
  }
  return 0;
}
