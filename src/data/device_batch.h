// Owns the device copy of one batch (images and labels, and a mixed batch's soft targets), sized for the largest batch the model is set up for;
// training and evaluation load their host batches into it in turn. A batch of uint8 pixels is copied as such
// and normalised on the device, with its split's InputNorm (uploaded when it changes); a batch of JPEGs is decoded
// and cropped by the backend (Backend::decode_jpegs), then normalised so.
#pragma once
#include <cstdint>
#include <functional>

#include "data/batch_loader.h"
#include "model/backend.h"
#include "model/tensor.h"

namespace ringtrain::train {

// `decode` (a JPEG batch's decode on the device) run, and a sample that does not decode named by its shard and
// sample, with the remedies (DataError).
void decode_naming_sample(const HostBatch& host, const std::function<void()>& decode);

class DeviceBatch {
 public:
  // `form`: what the loaders feeding it hand over; BatchForm::pixels adds a uint8 buffer.
  DeviceBatch(model::Backend& backend, const model::Shape& largest, BatchForm form);
  void load(const HostBatch& host);  // its `count` samples
  // A batch of JPEGs (BatchForm::jpegs) whose samples were decoded already into `decoded` (device memory, made
  // visible to the work queued from here on: model::JpegSlots::use): its labels copied, its pixels normalised.
  void load_decoded(const HostBatch& host, const uint8_t* decoded);
  const float* images() { return images_.as<float>(); }
  const int32_t* labels() { return labels_.as<int32_t>(); }
  // The last batch's soft targets (count x classes) when it was mixed; null when its labels are its targets.
  const float* targets() { return mixed_ ? targets_.as<float>() : nullptr; }
  model::Tensor input(int count) { return {images_.as<float>(), largest_.with_batch(count)}; }
  // The loaded `count` samples followed by zeros up to `full` samples (full == count: input(count)): a partial batch
  // run at a full batch's shape, for a forward pass whose samples do not interact (evaluation: batch norm uses its
  // running statistics), the padding's outputs then ignored.
  model::Tensor input_padded(int count, int full);

 private:
  void load_pixels(const HostBatch& host);
  void load_jpegs(const HostBatch& host);
  void load_targets(const HostBatch& host);
  void normalize(const HostBatch& host, const uint8_t* pixels);  // pixels (device) -> images_, with the split's norm

  model::Backend& backend_;
  model::Shape largest_;
  model::DeviceBuffer images_, labels_;
  model::DeviceBuffer norm_;    // mean then stddev per channel
  model::DeviceBuffer pixels_;  // BatchForm::pixels: the uint8 batch
  model::DeviceBuffer targets_;  // mixed batches' soft targets: allocated by the first one, at its size
  bool mixed_ = false;
  InputNorm uploaded_;                 // what norm_ holds
};

}  // namespace ringtrain::train
