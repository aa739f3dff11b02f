// Owns the run header and the job record; see run_header.h.
#include "train/run_header.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/normalisation.h"
#include "dist/open_mpi_defaults.h"
#include "dist/wire_format.h"

namespace ringtrain::train {
namespace {

const char* plural(int64_t n) { return n == 1 ? "" : "s"; }

const char* lr_scaling_name(config::LrScaling rule) {
  switch (rule) {
    case config::LrScaling::linear: return "linear";
    case config::LrScaling::sqrt: return "sqrt";
    case config::LrScaling::none: return "none";
  }
  return "?";
}

std::string batch_text(const DataPlan& data) {
  if (data.decodes_on_device()) return "JPEGs decoded, cropped and normalised by the backend (data.decode = gpu)";
  return data.batch_form() == BatchForm::pixels ? "uint8 batches, normalised on the device"
                                                : "normalised on the loader threads";
}

// The job's own normalisation is said with the split's it replaces, so a fine-tune's user sees both.
std::string normalisation_text(const DataPlan& data, const config::JobConfig::Data& keys) {
  if (keys.mean.empty()) return "";
  const InputNorm& own = data.model_norm();
  const InputNorm split = input_norm(data.meta());
  return fmt::format(", with data.mean [{}] and data.std [{}] (the split's own: [{}], [{}])",
                     fmt::join(own.mean, ", "), fmt::join(own.stddev, ", "), fmt::join(split.mean, ", "),
                     fmt::join(split.stddev, ", "));
}

std::string data_line(const DataPlan& data, const config::JobConfig::Data& keys) {
  const size_t files = data.train_reader().opened_files().size();
  return fmt::format("data: {} train samples in {} shards, {} test samples; rank 0 trains on {} (reads {} file{}); {}{}",
                     data.train_split().total_samples(), data.train_split().shards.size(),
                     data.test_split().total_samples(), data.train_range().size(), files, plural(static_cast<int64_t>(files)),
                     batch_text(data), normalisation_text(data, keys));
}

// Training accuracy under mixing is a choice, said where the numbers are read.
std::string mix_line(const config::MixSpec& mix) {
  const std::string methods =
      mix.mixup_alpha > 0 && mix.cutmix_alpha > 0
          ? fmt::format("mixup (alpha {}) or CutMix (alpha {}), one of them per pair at random", mix.mixup_alpha,
                        mix.cutmix_alpha)
          : mix.mixup_alpha > 0 ? fmt::format("mixup (alpha {})", mix.mixup_alpha)
                                : fmt::format("CutMix (alpha {})", mix.cutmix_alpha);
  return fmt::format("mixing: each training sample with its batch partner by {}; the loss is against the mixed "
                     "targets, and training accuracy counts a sample right when it predicts the label it holds most "
                     "of; evaluation is never mixed",
                     methods);
}

std::string sync_batchnorm_text(int group, int batch_per_rank) {
  if (group == 0) return "";
  if (group == 1) return "; batch norm statistics per rank (dist.sync_batchnorm_group = 1: groups of one rank)";
  return fmt::format("; batch norm statistics over groups of {} ranks ({} samples each, dist.sync_batchnorm_group)",
                     group, group * batch_per_rank);
}

std::string batch_line(const RunContext& run, const EpochPlan& plan, const LearningRateSchedule& lr) {
  const auto& opt = run.job.optimizer;
  // A warm-up from base_lr has nothing to climb to where the peak is base_lr (it starts at the peak): saying
  // "warm-up N steps" would promise a ramp the run never takes.
  const std::string why_flat = opt.lr_scaling == config::LrScaling::none
                                   ? "optimizer.lr_scaling = \"none\" keeps the peak at base_lr"
                                   : "the global batch is at most base_batch";
  const std::string warmup =
      lr.warmup_steps() == 0 ? "no warm-up"
      : lr.warmup_climbs()   ? fmt::format("warm-up {} steps from {:g}", lr.warmup_steps(), lr.at(0))
                             : fmt::format("warm-up {} steps at the peak ({}: nothing to climb to from "
                                           "optimizer.warmup_start = \"base_lr\"; \"zero\" climbs from 0)",
                                           lr.warmup_steps(), why_flat);
  return fmt::format("batch: {} ranks x {} per rank x {} accumulation = global batch {}; lr = {} ({}, then {})",
                     run.ranks(), plan.batch, plan.accumulate, plan.global_batch,
                     lr.arithmetic(opt, plan.global_batch), warmup, lr.decay_text()) +
         sync_batchnorm_text(run.job.dist.sync_batchnorm_group, plan.batch);
}

std::string epoch_line(const DataPlan& data, int64_t max_steps) {
  const EpochPlan& plan = data.epoch();
  const int64_t used = plan.steps * plan.per_step, mine = data.train_range().size();
  const std::string why = max_steps > 0 && plan.steps == max_steps
                              ? fmt::format("train.max_steps_per_epoch = {} caps the epoch", max_steps)
                              : "the last partial batch and any surplus of uneven partitions";
  return fmt::format("epoch: {} steps x {} samples per rank = {} of rank 0's {} samples ({} unused each epoch: {})",
                     plan.steps, plan.per_step, used, mine, mine - used, why);
}

}  // namespace

void print_header(const RunContext& run, const RunSetup& setup, const util::VersionList& versions) {
  for (const std::string& note : setup.start.notes) run.say(note);
  run.say(fmt::format("ringtrain: job {} on {} rank{}, backend {}", run.job.source.string(), run.ranks(),
                      plural(run.ranks()), run.backend.description()));
  run.say(fmt::format("versions:\n{}", util::format_versions(versions)));
  if (run.job.run.threads == 0)
    if (const std::string idle = dist::idle_cores_warning(run.world.rank_cores(), run.world.local_size()); !idle.empty())
      run.say("warning: " + idle);
  const model::Network& net = setup.net;
  run.say(fmt::format("model '{}': {} parameters, {:.2f} MFLOP/sample forward, {:.2f} MFLOP/sample training\n{}",
                      run.job.model.name, net.param_count(), net.forward_flops_per_sample() / 1e6,
                      net.train_flops_per_sample() / 1e6, net.summary()));
  run.say(data_line(setup.data, run.job.data));
  if (run.job.data.mix.on()) run.say(mix_line(run.job.data.mix));
  run.say(batch_line(run, setup.data.epoch(), setup.lr));
  for (const std::string& note : setup.lr.cut_short()) run.say("warning: " + note);
  run.say(fmt::format("optimizer: {}{}", setup.optimizer.describe(),
                      run.job.train.label_smoothing > 0
                          ? fmt::format("; label smoothing {} (the training loss is against the smoothed target)",
                                        run.job.train.label_smoothing)
                          : ""));
  for (const std::string& key : run.job.keys_without_effect) run.say("warning: " + key);
  if (setup.ema)
    run.say(fmt::format("weights' moving average: decay {} after every optimizer step (train.ema_decay; saved in "
                        "checkpoints, --weights ema)",
                        setup.ema->decay()));
  run.say(epoch_line(setup.data, run.job.train.max_steps_per_epoch));
}

nlohmann::ordered_json job_record(const RunContext& run, const RunSetup& setup, const std::string& run_id) {
  const EpochPlan& plan = setup.data.epoch();
  return {{"kind", "job"},
          {"job", run.job.source.string()},
          {"ranks", run.ranks()},
          {"batch_per_rank", plan.batch},
          {"accumulate_steps", plan.accumulate},
          {"global_batch", plan.global_batch},
          {"peak_lr", setup.lr.peak()},
          {"optimizer", setup.optimizer.name()},
          {"lr_scaling", lr_scaling_name(run.job.optimizer.lr_scaling)},
          {"label_smoothing", run.job.train.label_smoothing},
          {"mixup_alpha", run.job.data.mix.mixup_alpha},
          {"cutmix_alpha", run.job.data.mix.cutmix_alpha},
          {"steps_per_epoch", plan.steps},
          {"epochs", run.job.train.epochs},
          {"params", setup.net.param_count()},
          {"forward_flops_per_sample", setup.net.forward_flops_per_sample()},
          {"train_flops_per_sample", setup.net.train_flops_per_sample()},
          {"backend", run.backend.description()},
          {"open_mpi_settings", dist::open_mpi_defaults_summary()},
          {"allreduce_dtype", dist::wire_format_name(run.job.dist.allreduce_dtype)},
          {"resumed_from", setup.start.resumed_from},
          {"run_id", run_id}};
}

}  // namespace ringtrain::train
