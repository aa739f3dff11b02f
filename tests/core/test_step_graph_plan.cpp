// Proves the graphed step's bookkeeping (train/step_graph_plan.h) through a fake capturer that counts what it was
// asked to do: eager steps through the warm-up, one capture per slot, replays after, a partial last batch run eagerly
// without losing the full batch's graphs, a recapture when memory moved (an evaluation grew a scratch buffer) or the
// shape changed for good, a capture that allocated refused rather than replayed, a capture whose step threw
// ended rather than left open, a recapture that could not end leaving no graph behind, and memory that moved on
// another rank recaptured on this one (the ranks agree through a sum of fingerprints).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "train/step_graph_plan.h"

namespace ringtrain::train {
namespace {

// Records the calls in order; `allocate_during_capture` moves the memory generation inside the next capture.
class FakeCapturer final : public model::StepCapturer {
 public:
  uint64_t memory_generation() const override { return generation; }
  void begin_capture(int slot) override {
    calls.push_back("begin" + std::to_string(slot));
    capturing = true;
    if (allocate_during_capture) ++generation;
  }
  void end_capture(int slot, bool replace) override {
    calls.push_back((replace ? "replace" : "end") + std::to_string(slot));
    capturing = false;
    if (fail_end) throw Error(ExitCode::library, "cudaGraphInstantiate failed");
    ++captures;
  }
  void abandon_capture(int slot) noexcept override {
    calls.push_back("abandon" + std::to_string(slot));
    capturing = false;
  }
  void launch(int slot) override {
    calls.push_back("launch" + std::to_string(slot));
    ++launches;
  }
  void drop(int slot) override { calls.push_back("drop" + std::to_string(slot)); }
  void begin_scalars(int, ScalarsPass) override {}
  void end_scalars() noexcept override {}
  void fill_pass_seed(int, uint64_t) override {}

  uint64_t generation = 7;
  bool allocate_during_capture = false;
  bool fail_end = false;  // end_capture throws, as an instantiation the runtime refuses does
  bool capturing = false;
  int captures = 0, launches = 0;
  std::vector<std::string> calls;
};

const int kImages = 1, kOtherImages = 2;  // stand-ins for device memory the step reads its batch from
const StepShape kFull{{32, 32}, false, {&kImages}};
const StepShape kPartial{{32, 8}, false, {&kImages}};

class StepGraphPlanTest : public ::testing::Test {
 protected:
  // One step on the slot StepRunner would use (steps alternate between two); counts the work queued eagerly and
  // the work queued into a capture.
  StepAction step(const StepShape& shape) {
    const int slot = static_cast<int>(steps_++ % 2);
    return run_step(plan_, capturer_, slot, shape, sum_over_ranks_, [&](StepAction action) {
      EXPECT_EQ(action != StepAction::eager, capturer_.capturing);  // the work is told whether it is captured
      ++(capturer_.capturing ? captured_work_ : eager_work_);
    });
  }
  StepGraphPlan plan_{2, 3};
  FakeCapturer capturer_;
  // The job's other ranks, as the agreement sees them: their fingerprints' sum, added to this rank's. One rank: 0.
  uint64_t peers_ = 0;
  int agreements_ = 0;
  SumOverRanks sum_over_ranks_ = [this](uint64_t mine) {
    ++agreements_;
    return (mine & 0xffffffffULL) + peers_;
  };
  uint64_t steps_ = 0;
  int eager_work_ = 0, captured_work_ = 0;
};

TEST_F(StepGraphPlanTest, WarmUpRunsEagerlyThenEachSlotCapturesOnceAndReplays) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(kFull), StepAction::eager) << i;
  EXPECT_EQ(step(kFull), StepAction::capture);  // slot 1
  EXPECT_EQ(step(kFull), StepAction::capture);  // slot 0
  for (int i = 0; i < 10; ++i) EXPECT_EQ(step(kFull), StepAction::replay) << i;
  EXPECT_EQ(eager_work_, 3);
  EXPECT_EQ(captured_work_, 2);
  EXPECT_EQ(capturer_.captures, 2);
  EXPECT_EQ(capturer_.launches, 12);  // each capture's own step, then the replays
  EXPECT_TRUE(plan_.holds_graph(0) && plan_.holds_graph(1));
  const std::vector<std::string> first_capture{"begin1", "end1", "launch1", "begin0", "end0", "launch0", "launch1"};
  EXPECT_EQ(std::vector<std::string>(capturer_.calls.begin(), capturer_.calls.begin() + 7), first_capture);
}

TEST_F(StepGraphPlanTest, APartialLastBatchRunsEagerlyAndKeepsTheFullBatchGraphs) {
  for (int i = 0; i < 6; ++i) step(kFull);  // 3 eager, 2 captures, 1 replay; the next step is on slot 0
  EXPECT_EQ(step(kPartial), StepAction::eager);
  EXPECT_EQ(step(kFull), StepAction::replay);  // the epoch's next full batch: same shape and memory as captured
  EXPECT_EQ(step(kFull), StepAction::replay);
  EXPECT_EQ(capturer_.captures, 2);
}

TEST_F(StepGraphPlanTest, MovedMemoryMakesEverySlotSettleAndRecapture) {
  for (int i = 0; i < 6; ++i) step(kFull);
  ++capturer_.generation;  // an evaluation grew a scratch buffer the step uses
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(kFull), StepAction::eager) << i;
  EXPECT_EQ(step(kFull), StepAction::recapture);
  EXPECT_EQ(step(kFull), StepAction::recapture);
  EXPECT_EQ(step(kFull), StepAction::replay);
  EXPECT_EQ(capturer_.captures, 4);
  EXPECT_EQ(capturer_.calls[capturer_.calls.size() - 3], "replace0");  // the stale graph updated, not a second one
}

TEST_F(StepGraphPlanTest, AShapeThatChangesForGoodIsRecapturedAfterItSettles) {
  for (int i = 0; i < 6; ++i) step(kFull);
  const StepShape soft{{32, 32}, true, {&kImages}};  // mixing turned on: soft targets through another loss kernel
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(soft), StepAction::eager) << i;
  EXPECT_EQ(step(soft), StepAction::recapture);
  EXPECT_EQ(step(soft), StepAction::recapture);
  EXPECT_EQ(step(soft), StepAction::replay);
}

// A graph reads its batch where it was captured: a batch in other memory is another step for the plan.
TEST_F(StepGraphPlanTest, ABatchInOtherMemoryIsNotReplayedOverTheCapturedOne) {
  for (int i = 0; i < 6; ++i) step(kFull);
  const StepShape moved{{32, 32}, false, {&kOtherImages}};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(moved), StepAction::eager) << i;
  EXPECT_EQ(step(moved), StepAction::recapture);
}

// NCCL needs every rank to capture, replay or run a step eagerly alike: memory that moved on another rank only (an
// allocation there, a batch buffer at another address) reaches this rank's plan through the agreed sum, so this
// rank settles and recaptures with it, where its own generation and shape stayed as they were.
TEST_F(StepGraphPlanTest, MemoryThatMovedOnAnotherRankRecapturesOnThisOneToo) {
  for (int i = 0; i < 6; ++i) step(kFull);
  EXPECT_EQ(step(kFull), StepAction::replay);
  peers_ += 12345;  // another rank grew a buffer
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(kFull), StepAction::eager) << i;
  EXPECT_EQ(step(kFull), StepAction::recapture);
  EXPECT_EQ(step(kFull), StepAction::recapture);
  EXPECT_EQ(step(kFull), StepAction::replay);
  // One agreement a step, and one more after each capture (every rank captures at the same steps).
  EXPECT_EQ(agreements_, 13 + 4);
}

TEST(StepFingerprint, MovesWithTheMemoryGenerationAndEachPartOfTheShape) {
  const uint64_t base = step_fingerprint(kFull, 7);
  EXPECT_EQ(step_fingerprint(kFull, 7), base);
  EXPECT_NE(step_fingerprint(kFull, 8), base);
  EXPECT_NE(step_fingerprint(kPartial, 7), base);
  EXPECT_NE(step_fingerprint({{32, 32}, true, {&kImages}}, 7), base);
  EXPECT_NE(step_fingerprint({{32, 32}, false, {&kOtherImages}}, 7), base);
  EXPECT_NE(step_fingerprint(kFull, 7) & 0xffffffffULL, step_fingerprint(kFull, 8) & 0xffffffffULL)
      << "the 32 bits the ranks sum move too";
}

TEST_F(StepGraphPlanTest, AnEagerStepThatAllocatesRestartsTheWarmUp) {
  step(kFull);
  step(kFull);
  ++capturer_.generation;  // the second step grew a buffer: the shape has not settled
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(kFull), StepAction::eager) << i;
  EXPECT_EQ(step(kFull), StepAction::capture);
}

TEST_F(StepGraphPlanTest, ACaptureThatAllocatesIsDroppedAndRefused) {
  for (int i = 0; i < 3; ++i) step(kFull);
  capturer_.allocate_during_capture = true;
  EXPECT_THROW(step(kFull), Error);
  EXPECT_EQ(capturer_.calls.back(), "drop1");
  EXPECT_FALSE(plan_.holds_graph(1));
  EXPECT_EQ(capturer_.launches, 0);  // the captured step never ran
}

TEST_F(StepGraphPlanTest, AStepThatThrowsWhileCapturedEndsTheCaptureAndKeepsNoGraph) {
  for (int i = 0; i < 3; ++i) step(kFull);
  EXPECT_THROW(
      run_step(plan_, capturer_, 1, kFull, sum_over_ranks_,
               [](StepAction) { throw Error(ExitCode::fault, "a peer stalled"); }),
      Error);
  EXPECT_EQ(capturer_.calls.back(), "abandon1");
  EXPECT_FALSE(capturer_.capturing);
  EXPECT_FALSE(plan_.holds_graph(1));
  EXPECT_EQ(capturer_.launches, 0);
}

TEST_F(StepGraphPlanTest, ARecaptureThatCannotEndKeepsNoGraphForTheSlot) {
  for (int i = 0; i < 6; ++i) step(kFull);
  const StepShape soft{{32, 32}, true, {&kImages}};
  for (int i = 0; i < 3; ++i) step(soft);  // slots 0, 1, 0; the next, slot 1, recaptures
  capturer_.fail_end = true;
  EXPECT_THROW(step(soft), Error);
  EXPECT_EQ(capturer_.calls.back(), "drop1");
  EXPECT_FALSE(plan_.holds_graph(1));
  EXPECT_TRUE(plan_.holds_graph(0));
  capturer_.fail_end = false;
  EXPECT_EQ(step(kFull), StepAction::replay);  // slot 0's graph is still the one it captured
  EXPECT_EQ(step(kFull), StepAction::eager);   // slot 1's is gone: it settles again before it captures
}

TEST_F(StepGraphPlanTest, ForgetDropsEveryGraph) {
  for (int i = 0; i < 6; ++i) step(kFull);
  plan_.forget();
  EXPECT_FALSE(plan_.holds_graph(0) || plan_.holds_graph(1));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(kFull), StepAction::eager) << i;
  EXPECT_EQ(step(kFull), StepAction::capture);
}

TEST(StepGraphPlan, NoWarmUpCapturesTheFirstStep) {
  StepGraphPlan plan(1, 0);
  EXPECT_EQ(plan.decide(0, kFull, 1), StepAction::capture);
  EXPECT_TRUE(plan.captured(0, 1));
  EXPECT_EQ(plan.decide(0, kFull, 1), StepAction::replay);
  EXPECT_STREQ(step_action_name(StepAction::recapture), "recapture");
  EXPECT_THROW(StepGraphPlan(0, 1), Error);
}

}  // namespace
}  // namespace ringtrain::train
