// Owns what a relaunch on a world that dist.sync_batchnorm_group does not divide (an elastic restart on fewer nodes:
// --resume, or --failed-node where no checkpoint was written yet) does to the group: the largest divisor of the new
// rank count up to it, with a note saying so. A refusal would end the elastic run the relaunch exists for; a first
// launch with such a group is refused where the device opens (exit 3), since its job file asks for groups the world
// cannot make.
#pragma once
#include <string>

namespace ringtrain::config {

struct SyncBatchnormFit {
  int group = 0;     // the group to synchronise batch norm over
  std::string note;  // what changed and why; empty: the job's own group
};

SyncBatchnormFit fit_sync_batchnorm_group(int group, int ranks, bool relaunch);

}  // namespace ringtrain::config
