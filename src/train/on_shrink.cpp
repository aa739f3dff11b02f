// Owns the accumulation arithmetic of dist.on_shrink = keep_global_batch; see on_shrink.h.
#include "train/on_shrink.h"

#include <fmt/format.h>

#include "common/error.h"
#include "config/job_difference.h"
#include "config/sync_batchnorm_fit.h"
#include "io/checkpoint_file.h"

namespace ringtrain::train {

int accumulation_for_global_batch(int64_t global_batch, int batch_per_rank, int ranks) {
  const int64_t per_micro_batch = int64_t{batch_per_rank} * ranks;
  if (global_batch % per_micro_batch != 0 || global_batch < per_micro_batch)
    throw Error(ExitCode::job_file,
                fmt::format("dist.on_shrink = \"keep_global_batch\": the checkpoint's global batch {} is not a "
                            "multiple of {} ranks x train.batch_per_rank {} = {}, so no number of accumulation "
                            "steps keeps it; resume on a rank count that divides it, set train.batch_per_rank to "
                            "one that does, or use dist.on_shrink = \"keep_per_rank_batch\"",
                            global_batch, ranks, batch_per_rank, per_micro_batch));
  return static_cast<int>(global_batch / per_micro_batch);
}

namespace {

// What of the checkpoint's world the fitting needs, broadcast as bytes (its job text goes as a string of its own).
struct CheckpointBatch {
  int64_t ranks = 0, global_batch = 0;
};

// This job sets train.batch_per_rank or train.accumulate_steps otherwise than the checkpoint's job did.
bool batch_keys_changed(const std::string& checkpoint_job, const config::JobConfig& job) {
  for (const config::JobDifference& d : config::job_differences(checkpoint_job, job.resolved_toml))
    if (d.key == "train.batch_per_rank" || d.key == "train.accumulate_steps") return true;
  return false;
}

}  // namespace

namespace {

config::SyncBatchnormFit fit_group(const config::JobConfig& job, int ranks, bool resume, bool relaunched) {
  return config::fit_sync_batchnorm_group(job.dist.sync_batchnorm_group, ranks, resume || relaunched);
}

}  // namespace

int fitted_sync_batchnorm_group(const config::JobConfig& job, int ranks, bool resume, bool relaunched) {
  return fit_group(job, ranks, resume, relaunched).group;
}

FittedJob fit_to_world(const config::JobConfig& job, const dist::World& world, bool resume, bool relaunched) {
  FittedJob fitted{job, {}};
  const config::SyncBatchnormFit group = fit_group(job, world.size(), resume, relaunched);
  fitted.job.dist.sync_batchnorm_group = group.group;
  if (!group.note.empty()) fitted.notes.push_back(group.note);
  if (job.dist.on_shrink != config::OnShrink::keep_global_batch) return fitted;
  // A relaunch before the first checkpoint (--failed-node without --resume) has no global batch to keep.
  if (!resume && relaunched)
    fitted.notes.push_back("dist.on_shrink = keep_global_batch is not applied: this relaunch starts before any "
                           "checkpoint, which the global batch to keep is read from, so the global batch is this "
                           "world's");
  if (!resume) return fitted;
  io::CheckpointWorld was;
  world.all_succeed([&] {
    if (!world.is_root()) return;
    const auto found = io::list_checkpoints(job.run.dir / "checkpoints");
    if (!found.empty()) was = io::read_checkpoint_world(found.back());  // none: start_run says so
  });
  CheckpointBatch batch{was.ranks, was.global_batch};
  world.broadcast(&batch, sizeof batch);
  was.job_toml = world.broadcast_string(was.job_toml);
  was.ranks = batch.ranks, was.global_batch = batch.global_batch;
  if (was.ranks == 0) return fitted;
  // On the checkpoint's own world the job's batch fits as it is, unless the run shrank once and is resumed again on
  // its smaller world: then the global batch differs while the job's batch keys are the checkpoint job's own (the
  // accumulation that kept the global batch lives in no job file). Batch keys the user changed are the user's.
  const int64_t job_global_batch = int64_t{world.size()} * job.train.batch_per_rank * job.train.accumulate_steps;
  if (was.ranks == world.size() && (was.global_batch == job_global_batch || batch_keys_changed(was.job_toml, job)))
    return fitted;
  world.all_succeed([&] {
    fitted.job.train.accumulate_steps =
        accumulation_for_global_batch(was.global_batch, job.train.batch_per_rank, world.size());
  });
  fitted.notes.push_back(fmt::format("dist.on_shrink = keep_global_batch: {} rank{} (checkpoint written by {}) keep "
                                     "its global batch {} with train.accumulate_steps = {} (job file: {})",
                                     world.size(), world.size() == 1 ? "" : "s", was.ranks, was.global_batch,
                                     fitted.job.train.accumulate_steps, job.train.accumulate_steps));
  return fitted;
}

}  // namespace ringtrain::train
