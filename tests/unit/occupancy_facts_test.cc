// The facts a capture keeps beside the preload stats files (collectors/occupancy_facts.h): what
// the recording half writes reads back the same, and the replaying half accepts only that shape.
#include "collectors/occupancy_facts.h"

#include <gtest/gtest.h>

#include <string>

namespace rdmascope::occupancy_facts {
namespace {

struct stat Regular() {
  struct stat st {};
  st.st_mode = S_IFREG | 0600;
  st.st_uid = 1000;
  st.st_dev = 0x803;
  st.st_ino = 424242;
  st.st_size = 8192;
  return st;
}

TEST(OccupancyFacts, WhatIsWrittenReadsBack) {
  const struct stat st = Regular();
  nlohmann::json facts = {
      {"lstat", StatJson(st)}, {"open", "ok"}, {"stat", StatJson(st)}, {"held", true}};
  const auto read = ParseNameFacts(facts.dump());
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->lstat.st_mode, st.st_mode);
  EXPECT_EQ(read->lstat.st_uid, 1000U);
  EXPECT_EQ(read->lstat.st_ino, 424242U);
  EXPECT_EQ(read->open, "ok");
  ASSERT_TRUE(read->stat);
  EXPECT_EQ(read->stat->st_size, 8192);
  EXPECT_EQ(read->held, true);
  EXPECT_EQ(StatJson(st)["mode"], "0100600");
}

TEST(OccupancyFacts, ANameNotOpenedHasOnlyItsLstat) {
  const auto read = ParseNameFacts(nlohmann::json{{"lstat", StatJson(Regular())}}.dump());
  ASSERT_TRUE(read) << read.error();
  EXPECT_FALSE(read->open);
  EXPECT_FALSE(read->stat);
  EXPECT_FALSE(read->held);
}

TEST(OccupancyFacts, RefusesWhatTheRecordingDoesNotWrite) {
  nlohmann::json good = StatJson(Regular());
  const auto name = [](const nlohmann::json& lstat) {
    return ParseNameFacts(nlohmann::json{{"lstat", lstat}}.dump());
  };
  EXPECT_FALSE(ParseNameFacts("[]"));
  EXPECT_FALSE(ParseNameFacts("{\"lstat\": "));
  EXPECT_FALSE(ParseNameFacts("{}"));
  EXPECT_FALSE(ParseNameFacts(std::string(kMaxBytes + 1, ' ')));
  for (const char* mode : {"", "0", "0777", "9", "0100600x", "01777777", "-1"}) {
    nlohmann::json bad = good;
    bad["mode"] = mode;
    EXPECT_FALSE(name(bad)) << mode;  // no file type, not octal, beyond st_mode
  }
  for (const char* field : {"uid", "dev", "ino", "size"}) {
    nlohmann::json bad = good;
    bad.erase(field);
    EXPECT_FALSE(name(bad)) << field;
    bad[field] = -1;
    EXPECT_FALSE(name(bad)) << field;
  }
  nlohmann::json big_uid = good;
  big_uid["uid"] = uint64_t{1} << 32;
  EXPECT_FALSE(name(big_uid));
  nlohmann::json bad_stat = {{"lstat", good}, {"open", "ok"}, {"stat", "not an object"}};
  const auto read = ParseNameFacts(bad_stat.dump());
  ASSERT_TRUE(read);  // the name is listed; its open is refused when asked
  EXPECT_FALSE(read->stat);
}

TEST(OccupancyFacts, TheDirectorySaysWhoCapturedIt) {
  struct stat dir {};
  dir.st_mode = S_IFDIR | 0700;
  nlohmann::json facts = StatJson(dir);
  EXPECT_FALSE(ParseDirectoryFacts(facts.dump()));  // no exporter_euid
  facts["exporter_euid"] = 0;
  const auto read = ParseDirectoryFacts(facts.dump());
  ASSERT_TRUE(read) << read.error();
  EXPECT_TRUE(S_ISDIR(read->st.st_mode));
  EXPECT_EQ(read->exporter_euid, 0U);
  facts["exporter_euid"] = "0";
  EXPECT_FALSE(ParseDirectoryFacts(facts.dump()));
}

TEST(OccupancyFacts, RefusalNamesGoBack) {
  for (const sys::Refusal refusal : {sys::Refusal::kOpenFailed, sys::Refusal::kNotRegular,
                                     sys::Refusal::kTooLarge, sys::Refusal::kShortRead}) {
    EXPECT_EQ(RefusalNamed(sys::RefusalName(refusal)), refusal);
  }
  EXPECT_EQ(RefusalNamed("no such refusal"), sys::Refusal::kOpenFailed);
}

}  // namespace
}  // namespace rdmascope::occupancy_facts
