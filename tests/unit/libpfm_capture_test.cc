// libpfm4's encodings under capture and replay (sys/libpfm_capture.h): what the captured host's
// libpfm4 answered comes back byte for byte, a replay never loads libpfm4, and a file a user
// edited wrongly is refused rather than read as another event.
#include "sys/libpfm_capture.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/capture.h"
#include "sys/perf_events.h"
#include "sys/pmu_libpfm.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope::sys {
namespace {

namespace fs = std::filesystem;
using rdmascope::testing::InstalledSession;
using rdmascope::testing::TempDir;

bool SameAttr(perf_event_attr a, perf_event_attr b) {
  a.size = b.size = 0;  // PerfGroup::Open sets it
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Names libpfm4's generic perf table knows on any x86 host, with and without modifiers.
constexpr const char* kNames[] = {"cycles",          "instructions",
                                  "LLC-load-misses", "cycles:u",
                                  "instructions:k",  "PERF_COUNT_HW_CACHE_LL:READ",
                                  "cpu-clock",       "PERF_COUNT_SW_PAGE_FAULTS"};

TEST(LibpfmCapture, LiveEncodingsRoundTripByteForByte) {
  int encoded = 0;
  for (const char* name : kNames) {
    const LibpfmAnswer live = LibpfmEncode(name);
    if (!live) continue;
    ++encoded;
    const auto text = FormatLibpfmAnswer(live);
    const auto parsed = ParseLibpfmAnswer(text);
    ASSERT_TRUE(parsed) << name << ": " << parsed.error() << "\n" << text;
    ASSERT_TRUE(parsed->has_value()) << name;
    // A field libpfm4 sets that the file does not carry fails here.
    EXPECT_TRUE(SameAttr(**parsed, *live)) << name << "\n" << text;
  }
  EXPECT_GE(encoded, 4) << "libpfm.so.4 encodes too few generic events on this host";
  const auto user = ParseLibpfmAnswer(FormatLibpfmAnswer(LibpfmEncode("cycles:u"))).value();
  ASSERT_TRUE(user.has_value());
  EXPECT_EQ(user->exclude_kernel, 1U);
  EXPECT_EQ(user->exclude_user, 0U);
}

TEST(LibpfmCapture, ErrorsRoundTripAsTheirReason) {
  const auto parsed = ParseLibpfmAnswer(
      FormatLibpfmAnswer(LibpfmAnswer(std::unexpect, "libpfm4: event not found\n(\"X\")")));
  ASSERT_TRUE(parsed);
  ASSERT_FALSE(parsed->has_value());
  EXPECT_EQ(parsed->error(), "libpfm4: event not found(\"X\")");
}

TEST(LibpfmCapture, RefusesWhatIsNotAnEncoding) {
  EXPECT_TRUE(ParseLibpfmAnswer("type 0\nconfig 0x3c\n"));
  EXPECT_TRUE(ParseLibpfmAnswer("type 4\nconfig 60\nexclude_hv 1"));
  for (const char* bad :
       {"", "config 0x3c\n", "type 0\n", "type 0\nconfig 0x3c\nconfig 0x3c\n",
        "type 0\nconfig 0x3c\nexclude_hv 2\n", "type 0\nconfig 0x3c\nprecise_ip 4\n",
        "type 0x100000000\nconfig 1\n", "type 0\nconfig 0x10000000000000000\n",
        "type 0\nconfig -1\n", "type 0\nconfig 0x\n", "type 0\nconfig 1 \n", "type 0\nconfig\n",
        "type 0\nconfig 1\nbranch_sample_type 1\n", "type 0\nconfig 1\n\n", "error \n",
        "error a\nb\n", "TYPE 0\nconfig 1\n"}) {
    EXPECT_FALSE(ParseLibpfmAnswer(bad)) << bad;
  }
}

TEST(LibpfmCapture, FileNamesStayInTheirDirectory) {
  EXPECT_EQ(LibpfmCaptureFile("INST_RETIRED:ANY_P").value(), "perf/libpfm/INST_RETIRED:ANY_P");
  EXPECT_EQ(LibpfmCaptureFile("../x").value(), "perf/libpfm/%2E.%2Fx");
  EXPECT_EQ(LibpfmCaptureFile("a b\n").value(), "perf/libpfm/a%20b%0A");
  EXPECT_EQ(LibpfmCaptureFile(".").value(), "perf/libpfm/%2E");
  EXPECT_FALSE(LibpfmCaptureFile(""));
  EXPECT_FALSE(LibpfmCaptureFile(std::string(201, 'a')));
  EXPECT_TRUE(LibpfmCaptureFile(std::string(200, 'a')));
}

class Captured : public ::testing::Test {
 protected:
  void SetUp() override {
    auto writer = capture::Writer::Create(dir(), false).value();
    InstalledSession session(
        capture::Session::Recording(capture::Layout("/sys", "/proc"), writer.get()));
    ASSERT_TRUE(writer->BeginSample(1).has_value());
    live_ = ResolvePerfEvent("/nonexistent", "cycles");
    unknown_ = ResolvePerfEvent("/nonexistent", "NO_SUCH_EVENT_ANYWHERE");
    ASSERT_TRUE(writer->CommitSample().has_value());
    ASSERT_TRUE(writer->WriteIndex("test", {}).has_value());
    ASSERT_TRUE(live_) << live_.error();
  }
  fs::path dir() const { return out_.path() / "cap"; }
  fs::path file(std::string_view name) const {
    return dir() / "samples/0001" / LibpfmCaptureFile(name).value();
  }
  InstalledSession Replaying() const {
    return InstalledSession(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                        capture::Reader::Open(dir()).value()));
  }

  TempDir out_;
  std::expected<PerfEventSpec, std::string> live_;
  std::expected<PerfEventSpec, std::string> unknown_;
};

TEST_F(Captured, ReplayAnswersWithoutLoadingLibpfm) {
  ASSERT_TRUE(fs::exists(file("cycles")));
  const InstalledSession session = Replaying();
  const LibpfmScope scope;  // as the perf collector holds one around its names
  const auto replayed = ResolvePerfEvent("/nonexistent", "cycles");
  ASSERT_TRUE(replayed) << replayed.error();
  EXPECT_TRUE(SameAttr(replayed->attr, live_->attr));
  const auto unknown = ResolvePerfEvent("/nonexistent", "NO_SUCH_EVENT_ANYWHERE");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error(), unknown_.error());  // the captured host's reason, as it said it
  EXPECT_FALSE(LibpfmLoaded()) << "a replay loaded libpfm4";
}

TEST_F(Captured, ANameOrFileTheCaptureLacksIsNeverTheReplayingHostsAnswer) {
  fs::remove(file("cycles"));
  std::ofstream(file("instructions")) << "type 0\nconfig 1\nexclude_hv 7\n";
  const InstalledSession session = Replaying();
  const auto missing = ResolvePerfEvent("/nonexistent", "cycles");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("capture has no libpfm4 encoding"), std::string::npos)
      << missing.error();
  const auto refused = ResolvePerfEvent("/nonexistent", "instructions");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("line 3"), std::string::npos) << refused.error();
  EXPECT_FALSE(LibpfmLoaded());
}

}  // namespace
}  // namespace rdmascope::sys
