// Owns the per-channel scale kernels declared in channel_scale.h, instantiated for the three element types.
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/channel_scale.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::load;

bool contiguous_channels(const Planes& p, ActivationLayout layout) { return plane_strides(p, layout).channel == 1; }

// Element i's channel is i / step % C: step 1 where channels are contiguous, HW in NCHW. Packs of V > 1 only where
// channels are contiguous and V divides C.
template <int V, class T>
__global__ void channel_scale_kernel(int64_t n, int64_t channels, int64_t step, const T* x, const float* scale,
                                     const float* shift, T* y) {
  for (int64_t i = detail::global_index() * V; i < n; i += detail::grid_stride() * V) {
    float v[V];
    detail::load_pack(x + i, v);
#pragma unroll
    for (int r = 0; r < V; ++r) {
      const int64_t c = (i + r) / step % channels;
      v[r] = v[r] * scale[c] + (shift ? shift[c] : 0.0f);
    }
    detail::store_pack(y + i, v);
  }
}

// NCHW: one block per channel (blockIdx.x = c), its threads over the channel's planes.
template <class T>
__global__ void channel_scale_gradient_planes_kernel(int batch, int channels, int spatial, const T* x, const T* dy,
                                                     float* dscale, float* dshift) {
  const int c = static_cast<int>(blockIdx.x);
  detail::PairSum mine;
  detail::for_channel(batch, channels, spatial, c, [&](int64_t i) {
    const float d = load(dy + i);
    mine.a += static_cast<double>(d) * load(x + i);
    mine.b += d;
  });
  const detail::PairSum total = detail::block_sum(mine);
  if (threadIdx.x != 0) return;
  dscale[c] += static_cast<float>(total.a);
  if (dshift) dshift[c] += static_cast<float>(total.b);
}

// dy * x and dy at (row, channel) of the contiguous-channel matrix, for detail::column_sums.
template <class T>
struct ScaleGradientTerm {
  const T *x, *dy;
  int64_t columns;
  __device__ void operator()(int64_t row, int64_t c, detail::PairSum& sums) const {
    const int64_t at = row * columns + c;
    const float d = load(dy + at);
    sums.a += static_cast<double>(d) * load(x + at);
    sums.b += d;
  }
};

}  // namespace

void channel_scale(const Planes& p, ActivationLayout layout, const void* x, const float* scale, const float* shift,
                   void* y, Stream stream) {
  const int64_t n = p.elements();
  if (n <= 0) return;
  const bool contiguous = contiguous_channels(p, layout);
  const int64_t step = contiguous ? 1 : p.hw;
  detail::with_element(p.type, [&](auto e) {
    using T = decltype(e);
    int vec = contiguous ? detail::pack_width(p.type, {x, y}) : 1;
    while (p.c % vec) vec /= 2;
    detail::with_pack_width(vec, [&](auto width) {
      constexpr int V = decltype(width)::value;
      if constexpr (V * sizeof(T) <= 16)
        channel_scale_kernel<V><<<detail::blocks_for(n / V), detail::kThreads, 0, stream>>>(
            n, p.c, step, static_cast<const T*>(x), scale, shift, static_cast<T*>(y));
    });
  });
  RT_CHECK_LAUNCH();
}

std::size_t channel_scale_gradient_scratch_bytes(const Planes& p, ActivationLayout layout) {
  return contiguous_channels(p, layout) ? detail::column_sums_scratch_bytes(p.n * p.hw, p.c) : 0;
}

void channel_scale_gradient(const Planes& p, ActivationLayout layout, const void* x, const void* dy, float* dscale,
                            float* dshift, void* scratch, Stream stream) {
  if (p.elements() <= 0) return;
  detail::with_element(p.type, [&](auto e) {
    using T = decltype(e);
    const T *xs = static_cast<const T*>(x), *dys = static_cast<const T*>(dy);
    if (contiguous_channels(p, layout))
      return detail::column_sums(p.n * p.hw, p.c, ScaleGradientTerm<T>{xs, dys, p.c}, scratch, dscale, dshift,
                                 stream);
    channel_scale_gradient_planes_kernel<<<static_cast<unsigned>(p.c), detail::kChannelThreads, 0, stream>>>(
        static_cast<int>(p.n), static_cast<int>(p.c), static_cast<int>(p.hw), xs, dys, dscale, dshift);
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
