// Owns the dropout kernels declared in dropout.h, instantiated for the three element types.
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;
using detail::load;
using detail::store;

template <class T>
__device__ void drop_elements(int64_t n, float p, float keep_scale, uint64_t seed, NchwIndex order, const T* x, T* y,
                              uint8_t* mask) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const bool keep = dropout_keeps(seed, static_cast<uint64_t>(order.of(i)), p);
    mask[i] = keep ? 1 : 0;
    store(y + i, keep ? load(x + i) * keep_scale : 0.0f);
  }
}

template <class T>
__global__ void dropout_forward_kernel(int64_t n, float p, float keep_scale, uint64_t seed, NchwIndex order,
                                       const T* x, T* y, uint8_t* mask) {
  drop_elements(n, p, keep_scale, seed, order, x, y, mask);
}

// The graphed form: the layer's seed from the pass's, read where the step's copy lands each step.
template <class T>
__global__ void dropout_forward_read_seed_kernel(int64_t n, float p, float keep_scale, const uint64_t* pass_seed,
                                                 LayerSeed place, NchwIndex order, const T* x, T* y, uint8_t* mask) {
  drop_elements(n, p, keep_scale, layer_seed_for(place, *pass_seed), order, x, y, mask);
}

template <class T>
__global__ void dropout_backward_kernel(int64_t n, float keep_scale, const uint8_t* mask, const T* dy, T* dx) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) store(dx + i, mask[i] ? load(dy + i) * keep_scale : 0.0f);
}

// 1/(1-p); p >= 1 keeps nothing, and a scale of 0 keeps the arithmetic finite; p <= 0 keeps everything as it is,
// as the CPU twin clamps it (kernels/cpu/elementwise.cpp).
float keep_scale_for(float p) { return p <= 0.0f ? 1.0f : p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

}  // namespace

void dropout_forward(Elements n, float p, uint64_t seed, const void* x, void* y, uint8_t* mask, Stream stream,
                     NchwIndex order) {
  if (n.n <= 0) return;
  detail::with_element(n.type, [&](auto t) {
    using T = decltype(t);
    dropout_forward_kernel<<<detail::blocks_for(n.n), detail::kThreads, 0, stream>>>(
        n.n, p, keep_scale_for(p), seed, order, static_cast<const T*>(x), static_cast<T*>(y), mask);
  });
  RT_CHECK_LAUNCH();
}

void dropout_forward(Elements n, float p, const uint64_t* pass_seed, const LayerSeed& place, const void* x, void* y,
                     uint8_t* mask, Stream stream, NchwIndex order) {
  if (n.n <= 0) return;
  detail::with_element(n.type, [&](auto t) {
    using T = decltype(t);
    dropout_forward_read_seed_kernel<<<detail::blocks_for(n.n), detail::kThreads, 0, stream>>>(
        n.n, p, keep_scale_for(p), pass_seed, place, order, static_cast<const T*>(x), static_cast<T*>(y), mask);
  });
  RT_CHECK_LAUNCH();
}

void dropout_backward(Elements n, float p, const uint8_t* mask, const void* dy, void* dx, Stream stream) {
  if (n.n <= 0) return;
  detail::with_element(n.type, [&](auto t) {
    using T = decltype(t);
    dropout_backward_kernel<<<detail::blocks_for(n.n), detail::kThreads, 0, stream>>>(
        n.n, keep_scale_for(p), mask, static_cast<const T*>(dy), static_cast<T*>(dx));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
