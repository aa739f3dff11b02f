// Owns the layer normalisation kernels declared in layer_norm.h, instantiated for the three element types.
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layer_norm.h"
#include "kernels/layer_norm.h"

namespace ringtrain::kernels::cuda {
namespace {

using detail::load;
using detail::store;

// Where position `pos` (n * HW + i) of the tensor starts, and the step between its channels.
struct PositionAt {
  int64_t base, step;
};
__device__ inline PositionAt position_at(int64_t channels, int64_t hw, PlaneStrides st, int64_t pos) {
  const int64_t n = pos / hw, i = pos % hw;
  return {n * channels * hw + i * st.position, st.channel};
}

template <class T>
__global__ void layer_norm_forward_kernel(int64_t positions, int64_t channels, int64_t hw, PlaneStrides st,
                                          float epsilon, const T* x, LayerNormTensors t, T* y) {
  for (int64_t pos = detail::global_index(); pos < positions; pos += detail::grid_stride()) {
    const PositionAt at = position_at(channels, hw, st, pos);
    const T* xs = x + at.base;
    const LayerNormStats s = layer_norm_stats(channels, epsilon, [&](int64_t c) { return load(xs + c * at.step); });
    t.mean[pos] = s.mean, t.rstd[pos] = s.rstd;
    for (int64_t c = 0; c < channels; ++c)
      store(y + at.base + c * at.step, layer_norm_output(load(xs + c * at.step), s, t.gamma[c], t.beta[c]));
  }
}

template <class T>
__global__ void layer_norm_input_gradient_kernel(int64_t positions, int64_t channels, int64_t hw, PlaneStrides st,
                                                 const T* x, const T* dy, LayerNormTensors t, T* dx) {
  for (int64_t pos = detail::global_index(); pos < positions; pos += detail::grid_stride()) {
    const PositionAt at = position_at(channels, hw, st, pos);
    const T *xs = x + at.base, *dys = dy + at.base;
    const LayerNormStats s{t.mean[pos], t.rstd[pos]};
    const LayerNormGradientMeans m = layer_norm_gradient_means(
        channels, s, [&](int64_t c) { return load(xs + c * at.step); },
        [&](int64_t c) { return load(dys + c * at.step); }, [&](int64_t c) { return t.gamma[c]; });
    for (int64_t c = 0; c < channels; ++c)
      store(dx + at.base + c * at.step,
            layer_norm_input_gradient(load(xs + c * at.step), load(dys + c * at.step), t.gamma[c], s, m));
  }
}

// One block of kChannelThreads per channel (blockIdx.x = c), its threads over the N x HW positions.
template <class T>
__global__ void layer_norm_parameter_gradient_kernel(int64_t positions, int64_t channels, int64_t hw,
                                                     PlaneStrides st, const T* x, const T* dy, LayerNormTensors t,
                                                     float* dgamma, float* dbeta) {
  const int64_t c = blockIdx.x;
  detail::PairSum mine;  // a: dy * xhat, b: dy
  for (int64_t pos = threadIdx.x; pos < positions; pos += detail::kChannelThreads) {
    const int64_t at = position_at(channels, hw, st, pos).base + c * st.channel;
    const float d = load(dy + at);
    mine.a += static_cast<double>(d) * layer_norm_normalised(load(x + at), {t.mean[pos], t.rstd[pos]});
    mine.b += d;
  }
  const detail::PairSum total = detail::block_sum(mine);
  if (threadIdx.x == 0) {
    dgamma[c] += static_cast<float>(total.a);
    dbeta[c] += static_cast<float>(total.b);
  }
}

}  // namespace

void layer_norm_forward(const Planes& p, ActivationLayout layout, float epsilon, const void* x,
                        const LayerNormTensors& t, void* y, Stream stream) {
  const int64_t positions = p.n * p.hw;
  if (positions <= 0 || p.c <= 0) return;
  detail::with_element(p.type, [&](auto e) {
    using T = decltype(e);
    layer_norm_forward_kernel<<<detail::blocks_for(positions), detail::kThreads, 0, stream>>>(
        positions, p.c, p.hw, plane_strides(p, layout), epsilon, static_cast<const T*>(x), t, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

void layer_norm_backward(const Planes& p, ActivationLayout layout, const void* x, const void* dy,
                         const LayerNormTensors& t, void* dx, float* dgamma, float* dbeta, Stream stream) {
  const int64_t positions = p.n * p.hw;
  if (positions <= 0 || p.c <= 0) return;
  const PlaneStrides st = plane_strides(p, layout);
  detail::with_element(p.type, [&](auto e) {
    using T = decltype(e);
    const T *xs = static_cast<const T*>(x), *dys = static_cast<const T*>(dy);
    layer_norm_parameter_gradient_kernel<<<static_cast<unsigned>(p.c), detail::kChannelThreads, 0, stream>>>(
        positions, p.c, p.hw, st, xs, dys, t, dgamma, dbeta);
    if (dx)
      layer_norm_input_gradient_kernel<<<detail::blocks_for(positions), detail::kThreads, 0, stream>>>(
          positions, p.c, p.hw, st, xs, dys, t, static_cast<T*>(dx));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
