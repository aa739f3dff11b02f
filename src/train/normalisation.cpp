// Owns the one-sample normalisation; see normalisation.h.
#include "train/normalisation.h"

#include "kernels/cpu/pixel_norm.h"

namespace ringtrain::train {

Normalisation::Normalisation(const io::DatasetMeta& meta)
    : shape_(meta.shape),
      norm_(input_norm(meta)),
      table_(kernels::cpu::pixel_table(meta.shape.channels, norm_.mean.data(), norm_.stddev.data())) {}

void Normalisation::apply(const uint8_t* in, float* out) const {
  const kernels::PixelShape one{1, shape_.channels, int64_t{shape_.height} * shape_.width};
  kernels::cpu::normalize_pixels(one, table_.data(), in, out);
}

}  // namespace ringtrain::train
