// Owns turning one sample's uint8 pixels into the floats a model sees, for code that handles samples one at a
// time (`predict` on image files): the split's InputNorm (train/input_norm.h: its mean and std, or the stand-ins)
// through kernels/cpu/pixel_norm.h's table, the same arithmetic the loader threads and the device use, so a
// model sees an image exactly as it saw its shards.
#pragma once
#include <cstdint>
#include <vector>

#include "io/dataset_meta.h"
#include "train/input_norm.h"

namespace ringtrain::train {

class Normalisation {
 public:
  explicit Normalisation(const io::DatasetMeta& meta);
  // One planar sample (C x H x W) of the meta's shape, from `in` to `out`.
  void apply(const uint8_t* in, float* out) const;
  // The numbers, for a batch the device normalises (BatchForm::pixels).
  const InputNorm& norm() const { return norm_; }

 private:
  io::SampleShape shape_;
  InputNorm norm_;
  std::vector<float> table_;  // channel c's value v at c * 256 + v
};

}  // namespace ringtrain::train
