// Owns rank 0's log line.
#include "train/run_context.h"

#include <fmt/format.h>

#include <cstdio>

namespace ringtrain::train {

void RunContext::say(const std::string& line) const {
  if (!root()) return;
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

}  // namespace ringtrain::train
