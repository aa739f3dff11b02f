// Owns input normalisation as the data pipeline sees it: the numbers that turn a split's uint8 pixels into the
// network's input (InputNorm: per channel the mean and standard deviation the shards carry, in 0..255 units, or 0
// and 255 where a shard lacks them, as synthetic splits do, so every input lies in a few units of 0; or the job's
// data.mean and data.std), and
// turning one sample's pixels into those floats for code that handles samples one at a time (`predict` on image
// files). kernels/pixel_norm.h defines the arithmetic and kernels/cpu/pixel_norm.h its table: the loader
// threads, the device and Normalisation all evaluate it, so a model sees an image exactly as it saw its shards.
#pragma once
#include <cstdint>
#include <vector>

#include "config/job_config.h"
#include "io/dataset_meta.h"

namespace ringtrain::train {

struct InputNorm {
  std::vector<float> mean, stddev;  // one per channel
  bool operator==(const InputNorm&) const = default;
};

InputNorm input_norm(const io::DatasetMeta& meta);

// The numbers a job's inputs are normalised with: data.mean and data.std where the job sets them (the model's own,
// e.g. an imported model's, whatever split it meets), else the split's. A count other than the split's channels is
// a JobFileError naming the keys.
InputNorm input_norm(const io::DatasetMeta& meta, const config::JobConfig::Data& keys);

class Normalisation {
 public:
  Normalisation(const io::DatasetMeta& meta, InputNorm norm);
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
