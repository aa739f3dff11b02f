// Owns opening both splits, the ranks' parts and readers, and the agreed step count.
#include "data/data_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "data/decode_ahead.h"
#include "data/loader_work.h"

namespace ringtrain::train {

DataPlan::DataPlan(const config::JobConfig& job, const dist::World& world, const model::Backend& backend) {
  train_ = open_split_part(world, job.data.train, "data.train");
  test_ = open_split_part(world, job.data.test, "data.test");
  world.all_succeed([&] {
    if (!(train_.meta().shape == test_.meta().shape) || train_.meta().num_classes != test_.meta().num_classes)
      throw DataError(fmt::format("data.train '{}' and data.test '{}' disagree on sample shape or class count; "
                                  "prepare both from the same source",
                                  job.data.train.string(), job.data.test.string()));
  });
  prefetch_batches_ = job.data.prefetch_batches;
  batch_form_ = train::batch_form(job, backend);
  device_decode_ = train::decodes_on_device(job, meta());
  world.all_succeed([&] {
    if (device_decode_) train::refuse_what_device_decoding_excludes(job);
    train::refuse_eval_resize_below_the_sample(job, meta().shape);
    model_norm_ = input_norm(meta(), job.data);  // refused where data.mean and data.std miss the samples' channels
  });
  epoch_.batch = job.train.batch_per_rank;
  epoch_.accumulate = job.train.accumulate_steps;
  epoch_.per_step = int64_t{epoch_.batch} * epoch_.accumulate;
  epoch_.steps = steps_every_rank_can_take(job, world, train_.range.size(), train_.split.total_samples());
  if (job.train.max_steps_per_epoch > 0) epoch_.steps = std::min(epoch_.steps, job.train.max_steps_per_epoch);
  epoch_.global_batch = epoch_.per_step * world.size();
}

int64_t steps_every_rank_can_take(const config::JobConfig& job, const dist::World& world, int64_t mine,
                                  int64_t split_samples) {
  const int64_t per_step = int64_t{job.train.batch_per_rank} * job.train.accumulate_steps;
  const int64_t steps = world.min_across(mine / per_step);
  world.all_succeed([&] {
    if (steps == 0)
      throw DataError(fmt::format(
          "data.train '{}' has {} samples: too few for {} ranks x batch_per_rank {} x accumulate_steps {} (= {} per "
          "step); lower train.batch_per_rank, use fewer ranks, or prepare more data",
          job.data.train.string(), split_samples, world.size(), job.train.batch_per_rank, job.train.accumulate_steps,
          per_step * world.size()));
  });
  return steps;
}

model::Shape DataPlan::input() const {
  const io::SampleShape& s = meta().shape;
  return {epoch_.batch, s.channels, s.height, s.width};
}

// A queued batch holds its samples as the loaders hand them over: fp32 or uint8 pixels at the model's input shape,
// or, where the device decodes, each sample's JPEG bytes (at most its split's longest) and the crop chosen for it.
double DataPlan::loader_queue_bytes() const {
  const double queued = prefetch_batches_ + 1.0;
  const double per_sample_extra = sizeof(int32_t);  // the label
  if (batch_form_ == BatchForm::jpegs) {
    const double jpeg_extra = per_sample_extra + sizeof(kernels::JpegCrop) + sizeof(int64_t);
    const auto batch_bytes = [&](const SplitPart& part) {
      return epoch_.batch * (static_cast<double>(part.reader->largest_stored_sample_bytes()) + jpeg_extra);
    };
    return queued * (batch_bytes(train_) + batch_bytes(test_));
  }
  const double sample_bytes = batch_form_ == BatchForm::pixels ? 1.0 : sizeof(float);
  const double batch_bytes = epoch_.batch * (static_cast<double>(input().per_sample()) * sample_bytes + per_sample_extra);
  return 2.0 * queued * batch_bytes;
}

double DataPlan::device_decode_bytes() const { return device_decode_ ? train::device_decode_bytes(input()) : 0; }

}  // namespace ringtrain::train
