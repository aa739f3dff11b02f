// Owns the per-plane kernels declared in plane_scale.h, instantiated for the three element types.
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/plane_scale.h"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;
using detail::load;
using detail::store;

// One block of kChannelThreads per plane (blockIdx.x = n*C + c).
template <class T>
__global__ void plane_sums_kernel(int64_t channels, int64_t hw, PlaneStrides st, float factor, const T* a, const T* b,
                                  float* sums) {
  const int64_t plane = blockIdx.x, n = plane / channels, c = plane % channels;
  const int64_t base = n * channels * hw + c * st.channel;
  detail::PairSum mine;
  for (int64_t i = threadIdx.x; i < hw; i += detail::kChannelThreads) {
    const int64_t at = base + i * st.position;
    mine.a += b ? double{load(a + at)} * load(b + at) : double{load(a + at)};
  }
  const detail::PairSum total = detail::block_sum(mine);
  if (threadIdx.x == 0) sums[plane] = static_cast<float>(total.a * factor);
}

template <class T>
__global__ void plane_scale_kernel(int64_t n, int64_t channels, int64_t hw, bool nhwc, const T* x,
                                   const float* scale, const float* shift, T* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t image = i / (channels * hw);
    const int64_t c = nhwc ? i % channels : i / hw % channels, nc = image * channels + c;
    store(y + i, load(x + i) * scale[nc] + (shift ? shift[nc] : 0.0f));
  }
}

}  // namespace

void plane_sums(const Planes& p, ActivationLayout layout, float factor, const void* a, const void* b, float* sums,
                Stream stream) {
  const int64_t planes = p.n * p.c;
  if (planes <= 0) return;
  detail::with_element(p.type, [&](auto t) {
    using T = decltype(t);
    plane_sums_kernel<<<static_cast<unsigned>(planes), detail::kChannelThreads, 0, stream>>>(
        p.c, p.hw, plane_strides(p, layout), factor, static_cast<const T*>(a), static_cast<const T*>(b), sums);
  });
  RT_CHECK_LAUNCH();
}

void plane_scale(const Planes& p, ActivationLayout layout, const void* x, const float* scale, const float* shift,
                 void* y, Stream stream) {
  const int64_t n = p.elements();
  if (n <= 0) return;
  detail::with_element(p.type, [&](auto t) {
    using T = decltype(t);
    plane_scale_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
        n, p.c, p.hw, layout == ActivationLayout::nhwc, static_cast<const T*>(x), scale, shift, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
