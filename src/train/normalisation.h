// Owns turning a sample's uint8 pixels into the floats a model sees: (value - mean) / std per channel, with the
// statistics of the training split that the shards carry (std 255 and mean 0 where a split has none). One table
// of 256 values per channel, so normalising is one lookup per byte. The loader and `predict` on image files both
// normalise through it, so a model sees an image exactly as it saw its shards.
#pragma once
#include <cstdint>
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::train {

class Normalisation {
 public:
  explicit Normalisation(const io::DatasetMeta& meta);
  // One planar sample (C x H x W) of the meta's shape, from `in` to `out`.
  void apply(const uint8_t* in, float* out) const;

 private:
  io::SampleShape shape_;
  std::vector<float> table_;  // channel c's value v at c * 256 + v
};

}  // namespace ringtrain::train
