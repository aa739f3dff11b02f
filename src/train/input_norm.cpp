// Owns the per-channel normalisation numbers of a split; see input_norm.h.
#include "train/input_norm.h"

#include <cstddef>

namespace ringtrain::train {

InputNorm input_norm(const io::DatasetMeta& meta) {
  const auto channels = static_cast<std::size_t>(meta.shape.channels);
  const bool has_mean = meta.mean.size() == channels, has_stddev = meta.stddev.size() == channels;
  InputNorm norm{std::vector<float>(channels, 0.0f), std::vector<float>(channels, 255.0f)};
  for (std::size_t c = 0; c < channels; ++c) {
    if (has_mean) norm.mean[c] = meta.mean[c];
    if (has_stddev && meta.stddev[c] > 0) norm.stddev[c] = meta.stddev[c];
  }
  return norm;
}

}  // namespace ringtrain::train
