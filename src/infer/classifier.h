// Owns a checkpoint's model set up to classify batches of one sample shape: built for the job's batch size,
// the checkpoint restored (refused when it belongs to another model), and a device batch to run it on in eval
// mode. `predict` runs split folders and image files through it alike.
#pragma once
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "data/batch_loader.h"
#include "data/device_batch.h"
#include "io/dataset_meta.h"
#include "model/network.h"
#include "train/run_context.h"
#include "train/start_point.h"

namespace ringtrain::infer {

class Classifier {
 public:
  // Collective (one rank in `predict`). Throws CheckpointError for another model's or a damaged checkpoint.
  // `weights`: the checkpoint's parameters or their moving average (an Error, exit 3, where it holds none).
  Classifier(const train::RunContext& run, const std::filesystem::path& checkpoint, const io::SampleShape& shape,
             int classes, train::Weights weights = train::Weights::params);
  int batch() const { return input_.n; }  // the most samples one call takes
  // What the batches it takes carry: uint8 pixels on a GPU (normalised there), normalised floats on the CPU.
  train::BatchForm form() const { return form_; }
  int classes() const { return classes_; }
  // The logits of the batch's `count` samples, count x classes, valid until the next call.
  std::span<const float> logits(const train::HostBatch& batch);

 private:
  const train::RunContext& run_;
  model::Shape input_;
  int classes_;
  train::BatchForm form_;
  std::unique_ptr<model::Network> net_;
  train::DeviceBatch device_batch_;
  std::vector<float> logits_;
};

}  // namespace ringtrain::infer
