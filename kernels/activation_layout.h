// Owns ActivationLayout: how a backend lays out a 4-D activation (N x C x H x W) in memory. NCHW keeps each
// channel's plane together (the CPU kernels' and cuDNN's fp32 layout); NHWC keeps each position's channels together
// (what tensor cores read fastest in 16 bits). A tensor with H x W = 1 is the same bytes either way. Planes names the
// dimensions a reorder between the two needs.
#pragma once
#include <cstdint>

#include "kernels/element_type.h"

namespace ringtrain::kernels {

enum class ActivationLayout { nchw, nhwc };

inline const char* layout_name(ActivationLayout l) { return l == ActivationLayout::nhwc ? "NHWC" : "NCHW"; }

// n samples of c channels of hw positions each, stored as `type`.
struct Planes {
  int64_t n = 0;
  int64_t c = 0;
  int64_t hw = 0;
  ElementType type = ElementType::f32;
  int64_t elements() const { return n * c * hw; }
};

}  // namespace ringtrain::kernels
