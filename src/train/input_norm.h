// Owns the numbers that turn a split's uint8 pixels into the network's input: per channel the mean and
// standard deviation the shards carry (in 0..255 units), or 0 and 255 where a shard lacks them (synthetic
// splits), so every input lies in a few units of 0. kernels/pixel_norm.h defines the arithmetic.
#pragma once
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::train {

struct InputNorm {
  std::vector<float> mean, stddev;  // one per channel
  bool operator==(const InputNorm&) const = default;
};

InputNorm input_norm(const io::DatasetMeta& meta);

}  // namespace ringtrain::train
