// Owns opening the data and planning the epoch: both splits (which must agree on sample shape and classes), this
// rank's part of each and the reader of it, and the number of steps every rank runs (the least any rank's part
// allows, so no rank ever waits alone in a collective). It takes the job, the world and the backend rather than
// train/run_context.h's RunContext: data/ sits below train/ and includes nothing of it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "config/job_config.h"
#include "data/batch_loader.h"
#include "data/split_part.h"
#include "dist/world.h"
#include "io/dataset_meta.h"
#include "io/partition.h"
#include "io/shard_reader.h"
#include "model/backend.h"
#include "model/tensor.h"

namespace ringtrain::train {

struct EpochPlan {
  int batch = 0;            // samples per rank per micro-batch
  int accumulate = 1;       // micro-batches per optimizer step
  int64_t per_step = 0;     // samples per rank per step
  int64_t steps = 0;        // optimizer steps per epoch, the same on every rank
  int64_t global_batch = 0; // samples per step over all ranks
  int64_t micro_batches() const { return steps * accumulate; }
};

// The optimizer steps an epoch of the job's training split allows every rank: the least any rank's part (`mine`
// samples here) gives at train.batch_per_rank x train.accumulate_steps a step. Collective; a split too small for one
// step is refused alike on every rank (DataError). DataPlan and input-bench both ask it.
int64_t steps_every_rank_can_take(const config::JobConfig& job, const dist::World& world, int64_t mine,
                                  int64_t split_samples);

// The memory the input takes beside the model, which the model's budget leaves to it (train/network_setup.h).
struct InputMemory {
  double loader_queues = 0;  // host memory: the loaders' queues (DataPlan::loader_queue_bytes)
  double device_decode = 0;  // the backend's memory: the samples it decodes (DataPlan::device_decode_bytes)
};

class DataPlan {
 public:
  // Collective: every failure is agreed, so all ranks stop with the same message.
  DataPlan(const config::JobConfig& job, const dist::World& world, const model::Backend& backend);
  DataPlan(const DataPlan&) = delete;
  DataPlan& operator=(const DataPlan&) = delete;

  const EpochPlan& epoch() const { return epoch_; }
  const io::DatasetMeta& meta() const { return train_.meta(); }
  const io::SplitIndex& train_split() const { return train_.split; }
  const io::SplitIndex& test_split() const { return test_.split; }
  const io::SampleRange& train_range() const { return train_.range; }
  io::ShardReader& train_reader() { return *train_.reader; }
  const io::ShardReader& train_reader() const { return *train_.reader; }
  SplitPart& test() { return test_; }
  // One batch at its largest, as the model is set up for.
  model::Shape input() const;
  BatchForm batch_form() const { return batch_form_; }  // what the loaders hand over (data.normalize)
  bool decodes_on_device() const { return device_decode_; }  // a JPEG split with data.decode = gpu
  // What the model's inputs are normalised with, in training and evaluation: data.mean and data.std, or the training
  // split's statistics (input_norm(meta, keys)).
  const InputNorm& model_norm() const { return model_norm_; }
  // Host memory of two loaders' queues (training, and evaluation while training's stays full): pixels at the
  // model's input, or each split's longest JPEG per sample where the device decodes.
  double loader_queue_bytes() const;
  // The backend's memory for the samples it decodes (train::device_decode_bytes); 0 where the loaders decode.
  double device_decode_bytes() const;
  InputMemory input_memory() const { return {loader_queue_bytes(), device_decode_bytes()}; }

 private:
  SplitPart train_, test_;
  EpochPlan epoch_;
  int prefetch_batches_ = 0;
  BatchForm batch_form_ = BatchForm::normalized;  // what the loaders' queues hold
  bool device_decode_ = false;
  InputNorm model_norm_;
};

}  // namespace ringtrain::train
