// Owns ActivationLayout: how a backend lays out a 4-D activation (N x C x H x W) in memory. NCHW keeps each
// channel's plane together (the CPU kernels' and cuDNN's fp32 layout); NHWC keeps each position's channels together
// (what tensor cores read fastest in 16 bits). A tensor with H x W = 1 is the same bytes either way. Planes names the
// dimensions a reorder between the two needs.
#pragma once
#include <cstdint>

#include "kernels/element_type.h"
#include "kernels/host_device.h"

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

// Where storage element i of a tensor lies in NCHW order: what an operation whose numbers follow an element's
// position (dropout's draw) indexes by, so that a backend's layout changes no number. NCHW, or one position per
// sample, is the identity.
struct NchwIndex {
  int64_t channels = 1, plane = 1;  // C and H x W
  bool nhwc = false;                 // the tensor is stored NHWC
  RT_HOST_DEVICE int64_t of(int64_t i) const {
    if (!nhwc || channels == 1 || plane == 1) return i;
    const int64_t image = channels * plane, within = i % image;
    return i - within + within % channels * plane + within / channels;
  }
};
inline NchwIndex nchw_index(const Planes& p, ActivationLayout stored) {
  return {p.c, p.hw, stored == ActivationLayout::nhwc};
}

// Where value (c, i) of a sample lies from the sample's start, i a position in its H x W plane: what a kernel that
// walks one (sample, channel) plane steps by in either layout.
struct PlaneStrides {
  int64_t channel = 1, position = 1;
};
inline PlaneStrides plane_strides(const Planes& p, ActivationLayout stored) {
  return stored == ActivationLayout::nhwc ? PlaneStrides{1, p.c} : PlaneStrides{p.hw, 1};
}

}  // namespace ringtrain::kernels
