// Owns the device copy of one batch (images and labels), sized for the largest batch the model is set up for;
// training and evaluation load their host batches into it in turn.
#pragma once
#include <cstdint>

#include "model/backend.h"
#include "model/tensor.h"
#include "train/batch_loader.h"

namespace ringtrain::train {

class DeviceBatch {
 public:
  DeviceBatch(model::Backend& backend, const model::Shape& largest);
  void load(const HostBatch& host);  // its `count` samples
  const float* images() { return images_.as<float>(); }
  const int32_t* labels() { return labels_.as<int32_t>(); }
  model::Tensor input(int count) { return {images_.as<float>(), largest_.with_batch(count)}; }

 private:
  model::Backend& backend_;
  model::Shape largest_;
  model::DeviceBuffer images_, labels_;
};

}  // namespace ringtrain::train
