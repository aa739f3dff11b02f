// Owns the device copy of one batch (images and labels), sized for the largest batch the model is set up for;
// training and evaluation load their host batches into it in turn. A batch of uint8 pixels is copied as such
// and normalised on the device, with its split's InputNorm (uploaded when it changes).
#pragma once
#include <cstdint>

#include "data/batch_loader.h"
#include "model/backend.h"
#include "model/tensor.h"

namespace ringtrain::train {

class DeviceBatch {
 public:
  // `form`: what the loaders feeding it hand over; BatchForm::pixels adds a uint8 buffer and the InputNorm's.
  DeviceBatch(model::Backend& backend, const model::Shape& largest, BatchForm form);
  void load(const HostBatch& host);  // its `count` samples
  const float* images() { return images_.as<float>(); }
  const int32_t* labels() { return labels_.as<int32_t>(); }
  model::Tensor input(int count) { return {images_.as<float>(), largest_.with_batch(count)}; }

 private:
  void load_pixels(const HostBatch& host);

  model::Backend& backend_;
  model::Shape largest_;
  model::DeviceBuffer images_, labels_;
  model::DeviceBuffer pixels_, norm_;  // BatchForm::pixels: the uint8 batch; mean then stddev per channel
  InputNorm uploaded_;                 // what norm_ holds
};

}  // namespace ringtrain::train
