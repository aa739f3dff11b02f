// What rank 0 says about the other ranks when a collective times out (src/dist/peer_report.h).
#include <gtest/gtest.h>

#include "dist/peer_report.h"

namespace ringtrain::dist {
namespace {

constexpr double kNow = 100.0, kSilentAfter = 2.0;

TEST(PeerReport, ARankWaitingInTheSameCollectiveAndHeardRecentlyHasArrived) {
  const std::vector<PeerBeat> peers = {{}, {21, 21, true, 99.6}, {21, 21, true, 99.9}};
  EXPECT_EQ(describe_missing_ranks(peers, 21, kNow, kSilentAfter),
            "every rank reports waiting in it: MPI or the network is stalled");
}

// A rank stopped (SIGSTOP) just after it entered the same collective last said it waits there; its silence names it.
TEST(PeerReport, ARankSilentForSeveralBeatsHasNotArrivedEvenIfItLastSaidItWaitsHere) {
  const std::vector<PeerBeat> peers = {{}, {21, 21, true, 97.1}};
  EXPECT_EQ(describe_missing_ranks(peers, 21, kNow, kSilentAfter),
            "rank 1 has not arrived\n    rank 1: silent for 2.9 s (stopped, hung or unreachable); it had reached "
            "this wait");
}

TEST(PeerReport, NamesEachMissingRankWithWhatItLastSaid) {
  const std::vector<PeerBeat> peers = {{}, {21, 21, true, 99.8}, {20, 20, false, 99.7}, {}, {19, 19, true, 90.0}};
  EXPECT_EQ(describe_missing_ranks(peers, 21, kNow, kSilentAfter),
            "ranks 2, 3, 4 have not arrived"
            "\n    rank 2: last heard 0.3 s ago, at step 21 (computing or reading)"
            "\n    rank 3: never heard from"
            "\n    rank 4: silent for 10.0 s (stopped, hung or unreachable), last at step 20 (waiting in a collective)");
}

TEST(PeerReport, AWaitIsWithinTheStepBegunOrAfterTheStepsDone) {
  EXPECT_EQ(at_step(-1, -1), "before any training step");
  EXPECT_EQ(at_step(0, 0), "at step 1");
  EXPECT_EQ(at_step(12, 11), "after step 12") << "an epoch's checkpoint after its twelfth step, no 13th begun";
  EXPECT_EQ(at_step(40, -1), "after step 40") << "a resumed run's start, 40 steps done before it";
}

// A rank evaluating after the epoch's last step is named as being after it, as rank 0's own wait is.
TEST(PeerReport, APeerBetweenStepsIsNamedAfterTheLastOne) {
  const std::vector<PeerBeat> peers = {{}, {12, 11, false, 99.8}};
  EXPECT_EQ(describe_missing_ranks(peers, 12, kNow, kSilentAfter),
            "rank 1 has not arrived\n    rank 1: last heard 0.2 s ago, after step 12 (computing or reading)");
}

TEST(PeerReport, SilenceIsAFewMissedBeatsButNeverLongerThanTheTimeout) {
  EXPECT_DOUBLE_EQ(silent_after_s(0.5, 3.0), 2.0);
  EXPECT_DOUBLE_EQ(silent_after_s(0.5, 1.0), 1.0);
}

}  // namespace
}  // namespace ringtrain::dist
