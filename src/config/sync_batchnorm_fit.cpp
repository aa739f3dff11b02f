// Owns the group a resume on another world takes; see sync_batchnorm_fit.h.
#include "config/sync_batchnorm_fit.h"

#include <fmt/format.h>

namespace ringtrain::config {

SyncBatchnormFit fit_sync_batchnorm_group(int group, int ranks, bool relaunch) {
  if (!relaunch || group == 0 || ranks % group == 0) return {group, ""};
  int fitted = group;
  while (ranks % fitted != 0) --fitted;
  return {fitted, fmt::format("dist.sync_batchnorm_group = {} does not divide the {} rank{} relaunched on: batch norm "
                              "statistics over groups of {} (the largest divisor of {} up to {})",
                              group, ranks, ranks == 1 ? "" : "s", fitted, ranks, group)};
}

}  // namespace ringtrain::config
