// Owns parsing the fault-injection test hooks and applying the parameter bit flip.
#include "train/fault_injection.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/error.h"

namespace ringtrain::train {
namespace {

struct RankAndNumber {
  int rank = 0;
  long long number = 0;
};

// What the number after the rank is, for the message on a malformed value.
struct NumberMeaning {
  const char* name;     // "STEP"
  const char* meaning;  // "an optimizer step"
  const char* example;  // a whole good value: "1:3"
};

// RANK:NUMBER from `variable` (NUMBER >= 1), or nothing when it is unset.
std::optional<RankAndNumber> rank_and_number_from_env(const char* variable, const NumberMeaning& number) {
  const char* text = std::getenv(variable);
  if (text == nullptr) return std::nullopt;
  RankAndNumber value;
  int used = 0;
  if (std::sscanf(text, "%d:%lld%n", &value.rank, &value.number, &used) != 2 || text[used] != '\0' ||
      value.rank < 0 || value.number < 1)
    throw UsageError(fmt::format("{}='{}': expected RANK:{} (a rank and {} >= 1), e.g. {}; it is a test hook, unset "
                                 "it for real runs",
                                 variable, text, number.name, number.meaning, number.example));
  return value;
}

}  // namespace

std::optional<ParamCorruption> param_corruption_from_env() {
  const auto value = rank_and_number_from_env(kCorruptParamEnv, {"STEP", "an optimizer step", "1:3"});
  if (!value) return std::nullopt;
  return ParamCorruption{value->rank, value->number};
}

std::optional<InjectedBudget> injected_budget_from_env() {
  const auto value = rank_and_number_from_env(kMemoryBudgetEnv, {"BYTES", "a byte count", "1:4096"});
  if (!value) return std::nullopt;
  return InjectedBudget{value->rank, value->number};
}

void stall_if_asked(const char* phase, int rank) {
  const char* text = std::getenv(kStallEnv);
  if (text == nullptr) return;
  int stalled = -1, used = 0;
  char named[16] = {};
  const std::string_view phases[] = {"startup", "step", "end", "evaluate", "prepare"};
  if (std::sscanf(text, "%d:%15[a-z]%n", &stalled, named, &used) != 2 || text[used] != '\0' || stalled < 0 ||
      std::find(std::begin(phases), std::end(phases), std::string_view(named)) == std::end(phases))
    throw UsageError(fmt::format("{}='{}': expected RANK:PHASE with PHASE startup, step, end, evaluate or prepare, e.g. "
                                 "1:startup; it is a test hook, unset it for real runs",
                                 kStallEnv, text));
  if (stalled == rank && std::string_view(named) == phase) std::raise(SIGSTOP);
}

std::optional<AwaitedStop> awaited_stop_from_env() {
  const char* text = std::getenv(kAwaitStopEnv);
  if (text == nullptr) return std::nullopt;
  int epoch = 0, used = 0;
  long long step = 0;
  if (std::sscanf(text, "%d:%lld%n", &epoch, &step, &used) != 2 || text[used] != '\0' || epoch < 1 || step < 1)
    throw UsageError(fmt::format("{}='{}': expected EPOCH:STEP (both >= 1, as the stop message numbers them), e.g. "
                                 "2:3; it is a test hook, unset it for real runs",
                                 kAwaitStopEnv, text));
  return AwaitedStop{epoch - 1, step - 1};
}

void require_same_awaited_stop(const dist::World& world) {
  std::optional<AwaitedStop> awaited;
  world.all_succeed([&] { awaited = awaited_stop_from_env(); });
  const long long mine = awaited ? awaited->epoch * (1LL << 40) + awaited->step : -1;
  if (world.max_across(mine) != world.min_across(mine))
    throw UsageError(fmt::format("{} is not the same on every rank; pass it to every rank (mpirun -x {}) or to none",
                                 kAwaitStopEnv, kAwaitStopEnv));
}

void flip_lowest_bit(model::Backend& backend, float* device_params) {
  float value = 0;
  backend.to_host(&value, device_params, sizeof value);
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  bits ^= 1u;
  std::memcpy(&value, &bits, sizeof bits);
  backend.to_device(device_params, &value, sizeof value);
}

}  // namespace ringtrain::train
