// Owns the fresh start's broadcast and the resume's reading, checking and sending out of a checkpoint.
#include "train/start_point.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/error.h"
#include "config/job_config.h"
#include "config/job_difference.h"
#include "io/checkpoint_file.h"
#include "train/run_directory.h"

namespace ringtrain::train {
namespace {

namespace fs = std::filesystem;

// Rank 0: the newest checkpoint of run.dir.
fs::path newest_checkpoint(const RunContext& run) {
  const fs::path dir = run.job.run.dir / "checkpoints";
  const auto found = io::list_checkpoints(dir);
  if (found.empty() && run.resume)
    throw CheckpointError(fmt::format("--resume: no checkpoint in '{}'; start without --resume (or point run.dir at "
                                      "the run to continue)",
                                      dir.string()));
  if (found.empty())  // evaluate without --checkpoint
    throw CheckpointError(fmt::format("no checkpoint to evaluate in '{}' (run.dir's checkpoints); point run.dir at a run "
                                      "that wrote one, or name a checkpoint file with --checkpoint",
                                      dir.string()));
  return found.back();
}

std::string another_model_remedy(bool resuming) {
  return resuming ? "resume with the job file it was written by, or use another run.dir (to start a new model from its "
                    "weights, as a fine-tune does: train.init_from = that checkpoint, without --resume)"
                  : "use the job file and the data (sample shape, classes) it was trained with";
}

// The keys this job changed from the checkpoint's other than the model's (another model is refused; its labels and
// training-only keys are no change worth a line), the run's own (run.*: folders, output) and the seed (warned of on
// its own), or "" when none: the resumed run follows this job's values.
std::string job_changes_note(const std::string& checkpoint_job, const std::string& this_job) {
  std::vector<std::string> changed;
  for (const config::JobDifference& d : config::job_differences(checkpoint_job, this_job))
    if (!d.key.starts_with("run.") && !d.key.starts_with("model.") && d.key != "train.seed")
      changed.push_back(fmt::format("{} ({}, now {})", d.key, d.was, d.now));
  if (changed.empty()) return "";
  constexpr size_t kShown = 8;
  const size_t more = changed.size() > kShown ? changed.size() - kShown : 0;
  changed.resize(std::min(changed.size(), kShown));
  return fmt::format("the job changes {} key{} from the checkpoint's: {}{}; from here on the run follows this job's "
                     "values", changed.size() + more, changed.size() + more == 1 ? "" : "s", fmt::join(changed, ", "),
                     more > 0 ? fmt::format(" and {} more", more) : "");
}

// Rank 0: the checkpoint, checked against this model (and the optimizer, when its state is to be restored) and,
// when it lies in run.dir, against the run there.
io::CheckpointData read_checked(const RunContext& run, const model::Network& net, const model::Optimizer* optimizer,
                                const fs::path& path) {
  const fs::path dir = run.job.run.dir / "checkpoints";
  io::CheckpointData c = io::read_checkpoint(
      path, path.parent_path() == dir ? io::CheckpointUse::newest_in_folder : io::CheckpointUse::named);
  const std::string recorded = RunDirectory::recorded_run_id(run.job.run.dir);
  if (path.parent_path() == dir && !recorded.empty() && !c.run_id.empty() && recorded != c.run_id)
    throw CheckpointError(fmt::format("checkpoint '{}' was written by run {}, but run.dir '{}' holds run {} (run.json); "
                                      "resume that run from its own run.dir, or move the checkpoint out of '{}'",
                                      path.string(), c.run_id, run.job.run.dir.string(), recorded, dir.string()));
  refuse_another_model(c, path, net, run.resume);
  if (const std::string why = config::model_difference(c.job_toml, run.job.resolved_toml); !why.empty())
    throw CheckpointError(fmt::format("checkpoint '{}' belongs to another model: {}; {}", path.string(), why,
                                      another_model_remedy(run.resume)));
  if (optimizer && c.optimizer != optimizer->name())
    throw CheckpointError(fmt::format("checkpoint '{}' holds the state of optimizer '{}' but the job asks for '{}'; "
                                      "resume with optimizer.name = \"{}\", or start again without --resume",
                                      path.string(), c.optimizer, optimizer->name(), c.optimizer));
  return c;
}

// Rank 0's optimizer state, sent to every rank: its name, then each array's name and values.
model::OptimizerState broadcast_optimizer_state(const RunContext& run, io::CheckpointData& c, int64_t params) {
  model::OptimizerState state{run.world.broadcast_string(c.optimizer), {}};
  int arrays = static_cast<int>(c.optimizer_state.size());
  run.world.broadcast(&arrays, sizeof arrays);
  c.optimizer_state.resize(static_cast<size_t>(arrays));
  for (io::NamedArray& a : c.optimizer_state) {
    model::OptimizerArray array{run.world.broadcast_string(a.name), std::move(a.values)};
    array.values.resize(static_cast<size_t>(params));
    run.world.broadcast_floats(array.values.data(), params);
    state.arrays.push_back(std::move(array));
  }
  return state;
}

// The mean of the rows of batch-norm statistics a checkpoint holds, one a rank that wrote it.
std::vector<float> mean_statistics(const std::vector<float>& rows, int64_t row_count, int64_t state_count) {
  std::vector<float> mean(static_cast<size_t>(state_count), 0.0f);
  for (int64_t r = 0; r < row_count; ++r)
    for (size_t i = 0; i < mean.size(); ++i)
      mean[i] += rows[static_cast<size_t>(r * state_count) + i] / static_cast<float>(row_count);
  return mean;
}

// Batch-norm statistics. A run resumed on the world size that wrote them continues each rank's own row (ranks
// average them at each epoch's end, so a mid-epoch checkpoint holds differing rows). Anything else takes the rows'
// mean, so that evaluating a checkpoint gives the same numbers on any number of ranks.
std::vector<float> running_statistics(const std::vector<float>& rows, const CheckpointPosition& p, int rank, int ranks,
                                      bool resuming) {
  if (!resuming || p.ranks != ranks) return mean_statistics(rows, p.ranks, p.state_count);
  const auto row = rows.begin() + static_cast<std::ptrdiff_t>(rank * p.state_count);
  return {row, row + static_cast<std::ptrdiff_t>(p.state_count)};
}

// The first difference between a checkpoint's parameter layout and this model's, or "" when they match. `taken`:
// the model's first tensors the checkpoint must give (fewer than all where the head is replaced; then the checkpoint
// may hold more).
std::string layout_mismatch(const io::CheckpointData& c, const model::Network& net, size_t taken) {
  const auto& tensors = net.param_tensors();
  const size_t n = std::min(taken, c.tensor_names.size());
  for (size_t i = 0; i < n; ++i)
    if (tensors[i].name != c.tensor_names[i] || tensors[i].count != c.tensor_sizes[i])
      return fmt::format("parameter tensor {} is '{}' with {} values in the checkpoint but '{}' with {} values in "
                         "this model",
                         i, c.tensor_names[i], c.tensor_sizes[i], tensors[i].name, tensors[i].count);
  if (taken < tensors.size() && c.tensor_names.size() >= taken && c.state_count == net.state_count()) return "";
  if (tensors.size() != c.tensor_names.size())
    return fmt::format("the checkpoint has {} parameter tensors, this model {}", c.tensor_names.size(), tensors.size());
  if (static_cast<int64_t>(c.params.size()) != net.param_count() || c.state_count != net.state_count())
    return fmt::format("the checkpoint holds {} parameters and {} batch-norm statistics, this model {} and {}",
                       c.params.size(), c.state_count, net.param_count(), net.state_count());
  return "";
}

}  // namespace

void refuse_another_model(const io::CheckpointData& c, const fs::path& path, const model::Network& net, bool resuming) {
  if (const std::string why = layout_mismatch(c, net, net.param_tensors().size()); !why.empty())
    throw CheckpointError(fmt::format("checkpoint '{}' belongs to another model: {}; {}", path.string(), why,
                                      another_model_remedy(resuming)));
}

Weights weights_named(const std::string& name) {
  if (name == "params") return Weights::params;
  if (name == "ema") return Weights::ema;
  throw UsageError(fmt::format("--weights must be params or ema, got '{}'", name));
}

void choose_weights(io::CheckpointData& checkpoint, const fs::path& path, Weights weights) {
  if (weights == Weights::params) return;
  if (checkpoint.ema_params.empty())
    throw Error(ExitCode::job_file,
                fmt::format("--weights ema: checkpoint '{}' holds no moving average of the weights (it was written "
                            "with train.ema_decay = 0, or by a ringtrain without it); use --weights params, or "
                            "train with train.ema_decay in (0, 1)",
                            path.string()));
  checkpoint.params = std::move(checkpoint.ema_params);
  checkpoint.ema_params.clear();
}

std::string other_sample_shape_note(const io::CheckpointData& c, const std::string& path, const model::Shape& input) {
  if (c.sample_shape.empty() || c.sample_shape == std::vector<int64_t>{input.c, input.h, input.w}) return "";
  return fmt::format("note: checkpoint '{}' holds a model made for {}x{}x{} samples; this data's are {}x{}x{}, and the "
                     "model runs at that size (prepare the data at the model's --size for its own numbers)",
                     path, c.sample_shape[0], c.sample_shape[1], c.sample_shape[2], input.c, input.h, input.w);
}

RestoredCheckpoint restore_checkpoint(const RunContext& run, model::Network& net, model::Optimizer* optimizer,
                                      const fs::path& path, Weights weights) {
  io::CheckpointData c;
  std::string chosen, job_changes, other_shape;
  run.world.all_succeed([&] {
    if (!run.root()) return;
    chosen = (path.empty() ? newest_checkpoint(run) : path).string();
    c = read_checked(run, net, optimizer, chosen);
    choose_weights(c, chosen, weights);
    job_changes = job_changes_note(c.job_toml, run.job.resolved_toml);
    other_shape = other_sample_shape_note(c, chosen, net.input_shape());
  });
  CheckpointPosition p{c.epoch,         c.step_in_epoch, c.global_step,  c.steps_per_epoch,
                       c.ranks,         c.global_batch,  c.state_count,  c.train_time_s,
                       c.train_samples,
                       {c.loss_scale, c.loss_scale_finite_in_a_row, c.loss_scale_skipped_steps,
                        c.loss_scale_skips_in_a_row},
                       static_cast<int64_t>(c.ema_params.size()), c.epoch_train, c.seed, c.optimizer_updates};
  run.world.broadcast(&p, sizeof p);
  chosen = run.world.broadcast_string(chosen);
  model::NetworkState state;
  state.params = std::move(c.params);
  state.params.resize(static_cast<size_t>(net.param_count()));
  c.states.resize(static_cast<size_t>(p.ranks * p.state_count));
  run.world.broadcast_floats(state.params.data(), net.param_count());
  run.world.broadcast_floats(c.states.data(), static_cast<long long>(c.states.size()));
  state.states = running_statistics(c.states, p, run.world.rank(), run.ranks(), optimizer != nullptr);
  net.load_state(state);
  c.ema_params.resize(static_cast<size_t>(p.ema_count));
  run.world.broadcast_floats(c.ema_params.data(), p.ema_count);
  if (optimizer) {
    const model::OptimizerState restored = broadcast_optimizer_state(run, c, net.param_count());
    run.world.all_succeed([&] { optimizer->load_state(restored); });
  }
  return {chosen, p, std::move(c.ema_params), std::move(job_changes), std::move(other_shape)};
}

namespace {

StartPoint fresh_start(const RunContext& run, model::Network& net) {
  model::NetworkState state;
  state.params = run.root() ? net.initial_params(run.job.train.seed)
                            : std::vector<float>(static_cast<size_t>(net.param_count()));
  run.world.broadcast_floats(state.params.data(), net.param_count());
  state.states = net.initial_states();
  net.load_state(state);
  return {};
}

// The model's parameter tensors but the head's (model.replace_head makes those anew).
size_t tensors_but_head(const model::Network& net) {
  const auto& tensors = net.param_tensors();
  const model::Layer* head = net.head();
  return static_cast<size_t>(
      std::count_if(tensors.begin(), tensors.end(), [&](const model::ParamTensor& t) { return t.layer != head; }));
}

// Rank 0: train.init_from's checkpoint, checked against the `taken` first tensors of the model.
io::CheckpointData read_pretrained(const RunContext& run, const model::Network& net, size_t taken) {
  const fs::path& path = run.job.train.init_from;
  io::CheckpointData c;
  try {
    c = io::read_checkpoint(path, io::CheckpointUse::named);
  } catch (const CheckpointError& e) {
    throw CheckpointError(fmt::format("train.init_from: {}", e.what()));
  }
  const std::string why = layout_mismatch(c, net, taken);
  if (why.empty()) return c;
  const bool only_the_head = taken == net.param_tensors().size() && layout_mismatch(c, net, tensors_but_head(net)).empty();
  throw CheckpointError(fmt::format("train.init_from: checkpoint '{}' belongs to another model: {}{}; use the job "
                                    "file it was written with (or `ringtrain import` wrote), changing only "
                                    "model.replace_head and the training keys",
                                    path.string(), why,
                                    only_the_head ? " (for a new head with other classes: model.replace_head)" : ""));
}

// Where the checkpoint's own job normalised its inputs with numbers of its own (data.mean and data.std: an imported
// model's, or a model fine-tuned from one) and this job does not take the same: a note for the run header, since
// the weights then see inputs other than those they were made for.
std::string normalisation_note(const RunContext& run, const io::CheckpointData& c) {
  config::JobConfig written;
  try {
    written = config::parse_job(c.job_toml, run.job.train.init_from, {});
  } catch (const std::exception&) {
    return "";  // a job file of an older ringtrain: nothing to compare
  }
  const auto& theirs = written.data;
  const auto& ours = run.job.data;
  if (theirs.mean.empty() || (theirs.mean == ours.mean && theirs.stddev == ours.stddev)) return "";
  return fmt::format("; note: its model took inputs normalised with data.mean [{}] and data.std [{}], and this job "
                     "normalises {}: set data.mean and data.std to those to feed the weights what they were made for",
                     fmt::join(theirs.mean, ", "), fmt::join(theirs.stddev, ", "),
                     ours.mean.empty() ? "with the training split's own statistics"
                                       : fmt::format("with [{}] and [{}]", fmt::join(ours.mean, ", "),
                                                     fmt::join(ours.stddev, ", ")));
}

// Where model.replace_head made the head anew: which tensors, and how much of the checkpoint was left unused (its
// own head, for its own classes).
std::string replaced_head_note(const model::Network& net, size_t taken, const io::CheckpointData& c, int64_t given) {
  const auto& tensors = net.param_tensors();
  if (taken == tensors.size()) return "";
  std::vector<std::string> names;
  for (size_t i = taken; i < tensors.size(); ++i) names.push_back("'" + tensors[i].name + "'");
  const auto unused = static_cast<int64_t>(c.params.size()) - given;
  return fmt::format("; the head's {} made anew from the seed, the checkpoint's last {} parameter value{} (its own "
                     "head) unused",
                     fmt::join(names, ", "), unused, unused == 1 ? "" : "s");
}

// Collective. The fine-tuning start: the parameters and batch-norm statistics of train.init_from's checkpoint over
// the seeded ones already loaded (a replaced head keeps those); returns the run header's line about it.
std::string start_from_pretrained(const RunContext& run, model::Network& net) {
  const size_t taken = run.job.model.replace_head > 0 ? tensors_but_head(net) : net.param_tensors().size();
  io::CheckpointData c;
  run.world.all_succeed([&] {
    if (run.root()) c = read_pretrained(run, net, taken);
  });
  model::NetworkState state = net.read_state();
  const auto& tensors = net.param_tensors();
  const int64_t given = taken == 0 ? 0 : tensors[taken - 1].offset + tensors[taken - 1].count;
  if (run.root()) std::copy_n(c.params.begin(), given, state.params.begin());
  run.world.broadcast_floats(state.params.data(), given);
  state.states = run.root() ? mean_statistics(c.states, c.ranks, c.state_count)
                            : std::vector<float>(static_cast<size_t>(net.state_count()));
  run.world.broadcast_floats(state.states.data(), net.state_count());
  net.load_state(state);
  return fmt::format("parameters and batch-norm statistics from {} ({} of {} parameter tensors{}){}",
                     run.job.train.init_from.string(), taken, tensors.size(),
                     run.root() ? replaced_head_note(net, taken, c, given) : "",
                     run.root() ? normalisation_note(run, c) : "");
}

// What a resume on another plan than the checkpoint's changes, and why: another world size, another batch per rank,
// or another number of steps an epoch (another training split, or train.max_steps_per_epoch changed).
std::string another_plan_note(const RunContext& run, const CheckpointPosition& p, const EpochPlan& plan,
                              const LearningRateSchedule& lr, bool same_steps) {
  const std::string epoch = p.step_in_epoch == 0                ? ""
                            : p.step_in_epoch == p.steps_per_epoch ? "; the interrupted epoch was trained to its end"
                            : same_steps ? "; the interrupted epoch continues at its step on the new partition"
                                         : "; the interrupted epoch starts over";
  const double before = LearningRateSchedule::peak_for(run.job.optimizer, p.global_batch);
  const std::string rate = lr.peak() == before ? fmt::format("learning rate {:.5g} as before", before)
                                               : fmt::format("learning rate re-scaled to {:.5g} (was {:.5g}; "
                                                             "optimizer.lr_scaling over the global batch)",
                                                             lr.peak(), before);
  if (p.ranks != run.ranks() || p.global_batch != plan.global_batch)
    return fmt::format("resume on {} rank{} (checkpoint written by {}): data re-partitioned, global batch {} (was {}), "
                       "{}{}",
                       run.ranks(), run.ranks() == 1 ? "" : "s", p.ranks, plan.global_batch, p.global_batch, rate,
                       epoch);
  return fmt::format("the epoch has {} steps where the checkpoint's run had {} (another training split, or "
                     "train.max_steps_per_epoch changed){}",
                     plan.steps, p.steps_per_epoch, epoch);
}

StartPoint resume(const RunContext& run, model::Network& net, model::Optimizer& optimizer, const EpochPlan& plan,
                  const LearningRateSchedule& lr) {
  RestoredCheckpoint restored = restore_checkpoint(run, net, &optimizer, {});
  const CheckpointPosition& p = restored.position;
  const std::string& path = restored.path;
  // The same steps of the same global batch (the same world, or dist.on_shrink = keep_global_batch): the run
  // continues at the checkpoint's step, so the global step, the schedule and the checkpoints' names go on from
  // it; on another world the rest of the epoch is drawn from the new partition.
  const bool same_steps = p.steps_per_epoch == plan.steps && p.global_batch == plan.global_batch;
  const bool same_world = p.ranks == run.ranks() && same_steps;
  // A checkpoint after an epoch's last step leaves only its evaluation and record, on any plan.
  const bool epoch_trained = p.step_in_epoch == p.steps_per_epoch;
  StartPoint start;
  start.epoch = static_cast<int>(p.epoch);
  start.step = same_steps ? p.step_in_epoch : epoch_trained ? plan.steps : 0;
  start.global_step = int64_t{start.epoch} * plan.steps + start.step;
  start.optimizer_updates = p.optimizer_updates;
  start.train_time_s = p.train_time_s, start.train_samples = p.train_samples;
  start.resumed_from = path;
  start.from = p;
  start.loss_scale = p.loss_scale;
  start.ema_params = std::move(restored.ema_params);
  const std::string where = start.step == plan.steps
                                ? fmt::format("epoch {} after its last step (its evaluation and record follow)",
                                              start.epoch + 1)
                                : fmt::format("epoch {} step {}", start.epoch + 1, start.step + 1);
  start.notes.push_back(fmt::format("resumed from {}: {} (after {} optimizer steps)", path, where, p.global_step));
  if (start.step > 0) {
    start.epoch_train = p.epoch_train;
    if (!p.epoch_train.known)
      start.notes.push_back(fmt::format("the checkpoint holds no training totals of epoch {} before it (an older "
                                        "ringtrain wrote it): that epoch's train loss and accuracy cover the steps "
                                        "after the resume only",
                                        start.epoch + 1));
  }
  if (run.job.train.ema_decay > 0 && start.ema_params.empty())
    start.notes.push_back("the checkpoint holds no moving average of the weights: train.ema_decay's average starts "
                          "at the resumed parameters");
  if (!same_world) start.notes.push_back(another_plan_note(run, p, plan, lr, same_steps));
  if (!restored.job_changes.empty()) start.notes.push_back(restored.job_changes);
  if (!restored.other_sample_shape.empty()) start.notes.push_back(restored.other_sample_shape);
  if (p.seed != run.job.train.seed)
    start.notes.push_back(fmt::format("warning: train.seed is {} and the checkpoint's run had {}: from here on the "
                                      "shuffles, augmentations and dropout follow the new seed, so this run no longer "
                                      "continues the one that wrote it step for step",
                                      run.job.train.seed, p.seed));
  return start;
}

}  // namespace

StartPoint start_run(const RunContext& run, model::Network& net, model::Optimizer& optimizer, const EpochPlan& plan,
                     const LearningRateSchedule& lr) {
  // Rank 0 initialises from the seed and broadcasts: every rank starts bit-identical (a resume then overwrites).
  StartPoint start = fresh_start(run, net);
  if (run.resume)
    start = resume(run, net, optimizer, plan, lr);
  else if (!run.job.train.init_from.empty())
    start.notes.push_back(start_from_pretrained(run, net));
  if (!run.job.train.freeze.empty())
    start.notes.push_back(fmt::format("frozen: the layers up to '{}' ({} of {} parameters) run as in evaluation and "
                                      "are not updated",
                                      run.job.train.freeze, net.frozen_param_count(), net.param_count()));
  if (run.job.optimizer.head_lr_multiplier != 1.0 && net.head())
    start.notes.push_back(fmt::format("the head ({}) trains at {} x the rate", net.head()->describe(),
                                      run.job.optimizer.head_lr_multiplier));
  return start;
}

}  // namespace ringtrain::train
