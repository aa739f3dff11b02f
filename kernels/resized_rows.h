// Owns the description of a row resize: `rows` rows of `from` values become rows of `to` values, the first
// min(from, to) of each copied and any beyond `from` zero. It pads the channels of NHWC activations and KRSC filters
// (rows of C values, one per position) to the multiple of 8 that tensor-core convolutions read, and crops them back.
#pragma once
#include <cstdint>

#include "kernels/element_type.h"

namespace ringtrain::kernels {

struct ResizedRows {
  int64_t rows = 0;
  int64_t from = 0, to = 0;  // values per row before and after
  ElementType type = ElementType::f32;
};

// The channel count a 16-bit NHWC convolution is run with: c rounded up to a multiple of 8.
inline int64_t tensor_core_channels(int64_t c) { return (c + 7) / 8 * 8; }

}  // namespace ringtrain::kernels
