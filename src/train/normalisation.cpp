// Owns the normalisation table; see normalisation.h.
#include "train/normalisation.h"

namespace ringtrain::train {

Normalisation::Normalisation(const io::DatasetMeta& meta) : shape_(meta.shape) {
  const auto channels = static_cast<size_t>(shape_.channels);
  table_.resize(channels * 256);
  for (size_t c = 0; c < channels; ++c) {
    const float mean = meta.mean.size() == channels ? meta.mean[c] : 0.0f;
    const float sd = meta.stddev.size() == channels && meta.stddev[c] > 0 ? meta.stddev[c] : 255.0f;
    for (int v = 0; v < 256; ++v) table_[c * 256 + static_cast<size_t>(v)] = (static_cast<float>(v) - mean) / sd;
  }
}

void Normalisation::apply(const uint8_t* in, float* out) const {
  const auto plane = static_cast<size_t>(shape_.height) * static_cast<size_t>(shape_.width);
  for (size_t c = 0; c < static_cast<size_t>(shape_.channels); ++c) {
    const uint8_t* src = in + c * plane;
    float* dst = out + c * plane;
    const float* table = table_.data() + c * 256;
    for (size_t p = 0; p < plane; ++p) dst[p] = table[src[p]];
  }
}

}  // namespace ringtrain::train
