// Owns evaluation on a split, distributed like training: each rank its own part, the loss sums kept on the device
// and read once per evaluation. Batch-norm running statistics differ per rank (each saw its own samples), so
// training averages them across ranks first: every rank evaluates, and later checkpoints, the same model.
#pragma once
#include <functional>

#include "data/device_batch.h"
#include "data/normalisation.h"
#include "data/split_part.h"
#include "model/network.h"
#include "train/epoch_summary.h"
#include "train/evaluated_batch.h"
#include "train/run_context.h"

namespace ringtrain::train {

using BatchSink = std::function<void(const EvaluatedBatch&)>;

class Evaluator {
 public:
  // `model_norm`: the numbers the model's inputs are normalised with (its training split's, or its job's own).
  Evaluator(const RunContext& run, model::Network& net, SplitPart& part, int batch, DeviceBatch& device_batch,
            InputNorm model_norm);
  void average_running_statistics();  // collective
  // This rank's sums; a label outside the class range is a DataError naming the split. A batch this rank cannot read
  // or decode is thrown after the forward passes of the batches left (on the batch it holds, counting nothing), so
  // the rank reaches the callers' agreement (dist::agree_on_errors) when the others do. With a sink, each batch's
  // logits also come to the host (a device synchronisation per batch).
  Totals run(const BatchSink& sink = {});
  int64_t batches() const;  // this rank's evaluation batches, the last one partial

 private:
  const RunContext& run_;
  model::Network& net_;
  SplitPart& part_;
  InputNorm model_norm_;
  int batch_;
  DeviceBatch& device_batch_;
  model::DeviceBuffer totals_;  // model::LossTotals on the device
};

}  // namespace ringtrain::train
