// Owns which keys apply under which other keys' values; job_schema.cpp's help texts say the same in words.
#include "config/keys_without_effect.h"

#include <fmt/format.h>

namespace ringtrain::config {
namespace {

struct KeyUse {
  const char* key;                     // "table.key"
  bool (*applies)(const JobConfig&);   // whether the job's other keys put it to use
  const char* only_with;               // the condition, as the job file writes it
};

bool momentum_rule(const JobConfig& j) {
  return j.optimizer.kind == OptimizerKind::sgd || j.optimizer.kind == OptimizerKind::lars;
}
bool adam_rule(const JobConfig& j) {
  return j.optimizer.kind == OptimizerKind::adamw || j.optimizer.kind == OptimizerKind::lamb;
}

bool holds_batchnorm(const std::vector<LayerSpec>& layers) {
  for (const LayerSpec& s : layers)
    if (s.is("batchnorm") || holds_batchnorm(s.body) || holds_batchnorm(s.shortcut)) return true;
  return false;
}

const KeyUse kUses[] = {
    {"optimizer.momentum", momentum_rule, "optimizer.name = \"sgd\" or \"lars\""},
    {"optimizer.beta1", adam_rule, "optimizer.name = \"adamw\" or \"lamb\""},
    {"optimizer.beta2", adam_rule, "optimizer.name = \"adamw\" or \"lamb\""},
    {"optimizer.epsilon", [](const JobConfig& j) { return j.optimizer.kind != OptimizerKind::sgd; },
     "optimizer.name = \"adamw\", \"lamb\" or \"lars\""},
    {"optimizer.trust_coefficient", [](const JobConfig& j) { return j.optimizer.kind == OptimizerKind::lars; },
     "optimizer.name = \"lars\""},
    {"optimizer.decay_factor", [](const JobConfig& j) { return j.optimizer.schedule == LrSchedule::steps; },
     "optimizer.schedule = \"steps\""},
    {"optimizer.poly_power", [](const JobConfig& j) { return j.optimizer.schedule == LrSchedule::poly; },
     "optimizer.schedule = \"poly\""},
    {"optimizer.min_lr",
     [](const JobConfig& j) {
       return j.optimizer.schedule == LrSchedule::cosine || j.optimizer.schedule == LrSchedule::poly;
     },
     "optimizer.schedule = \"cosine\" or \"poly\""},
    {"data.augment_pad", [](const JobConfig& j) { return j.data.augment.kind == AugmentKind::pad_crop_flip; },
     "data.augment = \"pad_crop_flip\""},
    {"data.augment_min_area",
     [](const JobConfig& j) { return j.data.augment.kind == AugmentKind::resized_crop_flip; },
     "data.augment = \"resized_crop_flip\""},
    {"train.loss_scale_init", [](const JobConfig& j) { return j.train.precision == Precision::fp16; },
     "train.precision = \"fp16\""},
    {"train.loss_scale_growth_interval", [](const JobConfig& j) { return j.train.precision == Precision::fp16; },
     "train.precision = \"fp16\""},
    {"dist.node_ranks",
     [](const JobConfig& j) {
       return j.dist.reducer == CpuReducer::shared || j.dist.reducer == CpuReducer::automatic;
     },
     "dist.reducer = \"shared\" (or \"auto\" where it picks shared)"},
    {"run.trace_steps", [](const JobConfig& j) { return j.run.trace; }, "run.trace = true"},
    {"data.decode_regions", [](const JobConfig& j) { return j.data.decode == DecodeOn::gpu; },
     "data.decode = \"gpu\""},
    {"optimizer.warmup_start", [](const JobConfig& j) { return j.optimizer.warmup_epochs > 0; },
     "optimizer.warmup_epochs above 0"},
    {"dist.sync_batchnorm_group", [](const JobConfig& j) { return holds_batchnorm(j.model.layers); },
     "a batchnorm layer in model.layers"},
};

}  // namespace

std::vector<std::string> keys_without_effect(const JobConfig& job, const std::set<std::string>& given) {
  std::vector<std::string> notes;
  for (const KeyUse& use : kUses)
    if (given.contains(use.key) && !use.applies(job))
      notes.push_back(fmt::format("'{}' is set but changes nothing in this job: it applies only with {}", use.key,
                                  use.only_with));
  return notes;
}

}  // namespace ringtrain::config
