// Owns parsing the RINGTRAIN_TEST_CORRUPT_PARAM test hook and applying its bit flip.
#include "train/fault_injection.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.h"

namespace ringtrain::train {

std::optional<ParamCorruption> param_corruption_from_env() {
  const char* text = std::getenv(kCorruptParamEnv);
  if (text == nullptr) return std::nullopt;
  ParamCorruption c;
  long long step = 0;
  int used = 0;
  if (std::sscanf(text, "%d:%lld%n", &c.rank, &step, &used) != 2 || text[used] != '\0' || c.rank < 0 || step < 1)
    throw UsageError(fmt::format("{}='{}': expected RANK:STEP (a rank and an optimizer step >= 1), e.g. 1:3; it is "
                                 "a test hook, unset it for real runs",
                                 kCorruptParamEnv, text));
  c.after_step = step;
  return c;
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
