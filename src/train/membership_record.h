// Owns the "membership" record of metrics.jsonl: one per elastic restart, written by the relaunched run itself,
// since it alone knows the checkpoint's world and step; the launcher adds what only it knows (the node that
// failed, the seconds lost) on the command line (train --failed-node, --seconds-lost).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/job_config.h"
#include "train/run_context.h"

namespace ringtrain::train {

// What the resume found and chose; old_* from the checkpoint, new_* this run's.
struct WorldChange {
  int64_t old_ranks = 0, new_ranks = 0;
  int64_t old_global_batch = 0, new_global_batch = 0;
  int64_t resumed_from_step = 0;  // optimizer steps the checkpoint holds
  int64_t accumulate_steps = 1;   // this run's
  double old_peak_lr = 0, new_peak_lr = 0;
  config::OnShrink on_shrink = config::OnShrink::keep_per_rank_batch;
};

// The record, or none where the world is the checkpoint's and the launcher named no failure (a plain resume).
// Unknown launcher facts are null, not guessed.
std::optional<nlohmann::ordered_json> membership_record(const WorldChange& change, const MembershipChange& launcher);

}  // namespace ringtrain::train
