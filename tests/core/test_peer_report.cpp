// What rank 0 says about the other ranks when a collective times out (src/dist/peer_report.h).
#include <gtest/gtest.h>

#include "dist/peer_report.h"

namespace ringtrain::dist {
namespace {

constexpr double kNow = 100.0, kSilentAfter = 2.0;
constexpr StepPlace kInStep22{21, true};

TEST(PeerReport, ARankWaitingInTheSameCollectiveAndHeardRecentlyHasArrived) {
  const std::vector<PeerBeat> peers = {{}, {21, kInStep22, true, 99.6}, {21, kInStep22, true, 99.9}};
  EXPECT_EQ(describe_missing_ranks(peers, 21, kInStep22, kNow, kSilentAfter),
            "every rank reports waiting in it: MPI or the network is stalled");
}

// A rank stopped (SIGSTOP) just after it entered the same collective last said it waits there; its silence names it.
TEST(PeerReport, ARankSilentForSeveralBeatsHasNotArrivedEvenIfItLastSaidItWaitsHere) {
  const std::vector<PeerBeat> peers = {{}, {21, kInStep22, true, 97.1}};
  EXPECT_EQ(describe_missing_ranks(peers, 21, kInStep22, kNow, kSilentAfter),
            "rank 1 has not arrived\n    rank 1: silent for 2.9 s (stopped, hung or unreachable); it had reached "
            "this wait");
}

// Silent ranks first: the launch scripts blame the first rank named, and a rank still computing (rank 2, slower)
// is less likely the cause than one that stopped answering.
TEST(PeerReport, NamesEachMissingRankWithWhatItLastSaidSilentOnesFirst) {
  const std::vector<PeerBeat> peers = {
      {}, {21, kInStep22, true, 99.8}, {20, {20, true}, false, 99.7}, {}, {19, {19, true}, true, 90.0}};
  EXPECT_EQ(describe_missing_ranks(peers, 21, kInStep22, kNow, kSilentAfter),
            "ranks 3, 4, 2 have not arrived"
            "\n    rank 3: never heard from"
            "\n    rank 4: silent for 10.0 s (stopped, hung or unreachable), last at step 20 (waiting in a collective)"
            "\n    rank 2: last heard 0.3 s ago, at step 21 (computing or reading)");
}

// The same step number at another place is another wait: a rank in step 13's all-reduce has not arrived at the
// checkpoint after step 12, though both are entered with the step number 12.
TEST(PeerReport, ARankWaitingAtAnotherPlaceHasNotArrived) {
  const std::vector<PeerBeat> peers = {{}, {12, {12, true}, true, 99.9}};
  EXPECT_EQ(describe_missing_ranks(peers, 12, {11, false}, kNow, kSilentAfter),
            "rank 1 has not arrived\n    rank 1: last heard 0.1 s ago, at step 13 (waiting in a collective)");
}

TEST(PeerReport, AWaitIsInsideTheStepBegunOrAfterTheStepsDone) {
  EXPECT_EQ(at_step({-1, false}), "before any training step");
  EXPECT_EQ(at_step({0, true}), "at step 1");
  EXPECT_EQ(at_step({11, false}), "after step 12") << "the checkpoint after the twelfth step";
  EXPECT_EQ(at_step({39, false}), "after step 40") << "a run resumed after 40 steps, before its first";
}

// A rank evaluating after the epoch's last step is named as being after it, as rank 0's own wait is.
TEST(PeerReport, APeerBetweenStepsIsNamedAfterTheLastOne) {
  const std::vector<PeerBeat> peers = {{}, {12, {11, false}, false, 99.8}};
  EXPECT_EQ(describe_missing_ranks(peers, 12, {11, false}, kNow, kSilentAfter),
            "rank 1 has not arrived\n    rank 1: last heard 0.2 s ago, after step 12 (computing or reading)");
}

TEST(PeerReport, SilenceIsAFewMissedBeatsButNeverLongerThanTheTimeout) {
  EXPECT_DOUBLE_EQ(silent_after_s(0.5, 3.0), 2.0);
  EXPECT_DOUBLE_EQ(silent_after_s(0.5, 1.0), 1.0);
}

}  // namespace
}  // namespace ringtrain::dist
