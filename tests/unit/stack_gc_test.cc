// The MR probes' stack-trace map cleanup (bpf/stack_gc.h): which ids are deleted, and when the
// maps are walked. Times are injected: no clock is read.
#include "bpf/stack_gc.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace rdmascope {
namespace {

using namespace std::chrono_literals;
using Ids = std::vector<uint32_t>;

const StackGc::Clock::time_point kT0{};

TEST(StackGc, DeletesOnlyIdsUnreferencedAtTwoWalksInARow) {
  StackGc gc;
  // Walk 1: 1 and 2 in use, 3 and 4 unreferenced: only candidates.
  EXPECT_EQ(gc.Decide(kT0, {1, 2, 3, 4}, {1, 2}), Ids{});
  EXPECT_EQ(gc.candidates(), (std::set<uint32_t>{3, 4}));
  // Walk 2: 4 got a region meanwhile (the registration had its id before its region), 2 is
  // now unreferenced (first time), 3 still is: only 3 goes.
  EXPECT_EQ(gc.Decide(kT0 + 10s, {1, 2, 3, 4}, {1, 4}), Ids{3});
  EXPECT_EQ(gc.candidates(), (std::set<uint32_t>{2}));
  // Walk 3: 2 is confirmed.
  EXPECT_EQ(gc.Decide(kT0 + 20s, {1, 2, 4}, {1, 4}), Ids{2});
  EXPECT_TRUE(gc.candidates().empty());
}

TEST(StackGc, ReferencedIdsNeverDeleted) {
  StackGc gc;
  for (int walk = 0; walk < 4; ++walk) {
    EXPECT_EQ(gc.Decide(kT0 + walk * 10s, {7, 8}, {7, 8}), Ids{});
  }
  // Referenced by ids absent from the map (a region whose stack was refused): nothing to do.
  EXPECT_EQ(gc.Decide(kT0 + 50s, {}, {1, 2}), Ids{});
}

TEST(StackGc, AnIdReusedBetweenWalksStartsOver) {
  StackGc gc;
  EXPECT_EQ(gc.Decide(kT0, {5}, {}), Ids{});
  EXPECT_EQ(gc.Decide(kT0 + 10s, {5}, {5}), Ids{});  // used again: no longer a candidate
  EXPECT_EQ(gc.Decide(kT0 + 20s, {5}, {}), Ids{});   // unreferenced once more: candidate
  EXPECT_EQ(gc.Decide(kT0 + 30s, {5}, {}), Ids{5});
}

TEST(StackGc, DuplicatePresentIdsDeletedOnce) {
  StackGc gc;
  gc.Decide(kT0, {9}, {});
  EXPECT_EQ(gc.Decide(kT0 + 10s, {9, 9}, {}), Ids{9});
}

TEST(StackGc, AnAbandonedWalkForgetsItsCandidates) {
  StackGc gc;
  gc.Decide(kT0, {3}, {});
  gc.Abandon(kT0 + 10s);  // a map could not be read: 3 might have been referenced
  EXPECT_EQ(gc.Decide(kT0 + 20s, {3}, {}), Ids{});
  EXPECT_EQ(gc.Decide(kT0 + 30s, {3}, {}), Ids{3});
}

TEST(StackGc, WalksFirstTimeThenOnlyWhenSomethingEndedOrCandidatesWait) {
  StackGc gc(StackGc::Options{.min_gap = 5s, .idle_period = 300s});
  EXPECT_TRUE(gc.Due(kT0, false));  // never walked
  gc.Decide(kT0, {}, {});
  EXPECT_FALSE(gc.Due(kT0 + 10s, false));  // nothing ended, nothing waits
  EXPECT_TRUE(gc.Due(kT0 + 11s, true));    // ended: due (not walked this time)...
  // ... remembered, not forgotten by the next collections until a walk.
  EXPECT_TRUE(gc.Due(kT0 + 12s, false));
  gc.Decide(kT0 + 12s, {4}, {});  // 4 is a candidate
  EXPECT_FALSE(gc.Due(kT0 + 12s + 4s, false)) << "within min_gap of the last walk";
  EXPECT_TRUE(gc.Due(kT0 + 12s + 5s, false)) << "a candidate waits for its confirming walk";
  gc.Decide(kT0 + 17s, {4}, {});
  EXPECT_FALSE(gc.Due(kT0 + 30s, false));
}

TEST(StackGc, EndedWithinMinGapWaitsForIt) {
  StackGc gc(StackGc::Options{.min_gap = 5s, .idle_period = 300s});
  gc.Decide(kT0, {}, {});
  EXPECT_FALSE(gc.Due(kT0 + 1s, true));
  EXPECT_FALSE(gc.Due(kT0 + 4s, false));
  EXPECT_TRUE(gc.Due(kT0 + 5s, false));
}

TEST(StackGc, ALongWalkSpacesTheNextOne) {
  StackGc gc(StackGc::Options{.min_gap = 5s, .idle_period = 300s, .duty_factor = 50});
  gc.Decide(kT0, {1}, {}, 400ms);  // a big regions map: the next walk 20 s later at the earliest
  EXPECT_FALSE(gc.Due(kT0 + 19s, true));
  EXPECT_TRUE(gc.Due(kT0 + 20s, true));
  gc.Decide(kT0 + 20s, {}, {}, 1ms);  // small again: min_gap
  EXPECT_TRUE(gc.Due(kT0 + 25s, true));
}

TEST(StackGc, IdlePeriodWalksEvenWhenNothingEnded) {
  StackGc gc(StackGc::Options{.min_gap = 5s, .idle_period = 300s});
  gc.Decide(kT0, {}, {});
  EXPECT_FALSE(gc.Due(kT0 + 299s, false));
  EXPECT_TRUE(gc.Due(kT0 + 300s, false));
}

}  // namespace
}  // namespace rdmascope
