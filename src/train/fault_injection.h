// Owns ringtrain's test hooks for faults one rank meets alone. RINGTRAIN_TEST_CORRUPT_PARAM=RANK:STEP makes rank
// RANK flip one bit of its first parameter right after optimizer step STEP, the silent corruption that
// run.consistency_every exists to catch (tests/faults/consistency.sh). RINGTRAIN_TEST_MEMORY_BUDGET=RANK:BYTES
// gives rank RANK a memory budget of BYTES for the model, as a host with that little memory available would: the
// set-up check failing on one rank only (tests/faults/bad_input.sh). Unset, as in every real run, they do nothing;
// RINGTRAIN_TEST_STALL=RANK:PHASE stops rank RANK (SIGSTOP, as `kill -STOP` or a hung node would) at PHASE: `startup`
// (train, before the model is built), `end` (train, after the last epoch), `evaluate` (the evaluate command, before
// the ranks sum their totals) or `prepare` (prepare images, before its first agreement): the waits outside the training
// loop's steps that the watchdog times
// (tests/faults/stalls.sh). RINGTRAIN_TEST_AWAIT_STOP=EPOCH:STEP holds every rank of a fresh run before that step
// (1-based, as the stop message numbers them) until a stop signal arrives, as a slow step would: a test's signal
// then lands by that step however fast the machine runs the ones before (tests/recovery/recovery.sh,
// tests/slurm/train_on_slurm.sh). Each is read when used and checked before run.dir is claimed (train::Trainer), and
// a malformed value is refused, never ignored.
#pragma once
#include <cstdint>
#include <optional>

#include "dist/world.h"
#include "model/backend.h"

namespace ringtrain::train {

struct ParamCorruption {
  int rank = 0;
  int64_t after_step = 0;  // optimizer steps done, 1-based
};

inline constexpr const char* kCorruptParamEnv = "RINGTRAIN_TEST_CORRUPT_PARAM";

// The requested corruption, or nothing when the variable is unset. Throws UsageError when it is malformed.
std::optional<ParamCorruption> param_corruption_from_env();

struct InjectedBudget {
  int rank = 0;
  int64_t bytes = 0;
};

inline constexpr const char* kMemoryBudgetEnv = "RINGTRAIN_TEST_MEMORY_BUDGET";

// The requested budget, or nothing when the variable is unset. Throws UsageError when it is malformed.
std::optional<InjectedBudget> injected_budget_from_env();

inline constexpr const char* kStallEnv = "RINGTRAIN_TEST_STALL";

// Stops this process when RINGTRAIN_TEST_STALL names `rank` and `phase` ("startup", "step": before the first training
// step this launch takes, "end", "evaluate", "prepare"); returns when
// it is continued, or at once when it is not named. Throws UsageError when the variable is malformed.
void stall_if_asked(const char* phase, int rank);

inline constexpr const char* kAwaitStopEnv = "RINGTRAIN_TEST_AWAIT_STOP";

struct AwaitedStop {
  int epoch = 0;      // 0-based
  int64_t step = 0;   // 0-based, within the epoch
};

// The step RINGTRAIN_TEST_AWAIT_STOP names, or nothing when it is unset. Throws UsageError when it is malformed. The
// training loop waits there (all ranks polling together, so a signal on any one rank lets them all go) for up to two
// minutes, in a fresh run only: a resumed one (Slurm's requeue of the stopped job) never waits.
std::optional<AwaitedStop> awaited_stop_from_env();

// Collective: throws the same UsageError on every rank unless every rank holds the same RINGTRAIN_TEST_AWAIT_STOP
// (the wait is collective; a multi-host mpirun passes a variable on only with -x), or a malformed one.
void require_same_awaited_stop(const dist::World& world);

// Flips the lowest mantissa bit of the parameter at `device_params` (a device pointer): a change too small to
// upset the loss, as a real bit error usually is, but one the parameter checksum sees.
void flip_lowest_bit(model::Backend& backend, float* device_params);

}  // namespace ringtrain::train
