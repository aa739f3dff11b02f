// Owns evaluation on the test split, distributed like training: each rank its own partition, the loss sums kept
// on the device and read once per evaluation. Batch-norm running statistics differ per rank (each saw its own
// samples), so they are first averaged across ranks: every rank evaluates, and later checkpoints, the same model.
#pragma once
#include "model/network.h"
#include "train/data_plan.h"
#include "train/device_batch.h"
#include "train/epoch_summary.h"
#include "train/run_context.h"

namespace ringtrain::train {

class Evaluator {
 public:
  Evaluator(const RunContext& run, model::Network& net, DataPlan& data, DeviceBatch& batch);
  // Collective (the statistics' average). This rank's sums; a label outside the class range is a DataError.
  Totals run();

 private:
  void average_running_statistics();

  const RunContext& run_;
  model::Network& net_;
  DataPlan& data_;
  DeviceBatch& batch_;
  model::DeviceBuffer totals_;  // model::LossTotals on the device
};

}  // namespace ringtrain::train
