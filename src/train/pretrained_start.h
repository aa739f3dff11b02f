// Owns the fine-tuning start (train.init_from): a fresh run whose parameters and batch-norm statistics come from a
// checkpoint another run (or `ringtrain import`) wrote, except the head that model.replace_head makes anew.
#pragma once
#include <string>

#include "model/network.h"
#include "train/run_context.h"

namespace ringtrain::train {

// Collective. Overwrites `net`'s parameters and running statistics with those of the checkpoint at
// job.train.init_from (rank 0 reads it; every rank gets the same values); with model.replace_head the head's
// parameters keep the seeded values already loaded. Returns the run header's line about it. Throws
// CheckpointError (agreed) naming the file and the first tensor that differs where the checkpoint belongs to
// another model.
std::string start_from_pretrained(const RunContext& run, model::Network& net);

}  // namespace ringtrain::train
