// Owns the layer normalisation kernels declared in layer_norm.h, instantiated for the three element types: one thread
// per position in either layout, and the candidate row kernels (one warp per position) where channels are contiguous.
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/column_sums.cuh"
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
    mine.a += layer_norm_gamma_gradient_term(load(x + at), d, {t.mean[pos], t.rstd[pos]});
    mine.b += d;
  }
  const detail::PairSum total = detail::block_sum(mine);
  if (threadIdx.x == 0) {
    dgamma[c] += static_cast<float>(total.a);
    dbeta[c] += static_cast<float>(total.b);
  }
}

// The row kernels: one warp per position (a row of C contiguous channels). Lane l holds packs l, l + 32, ... of V
// channels in registers (kRowPacks<V> of them: up to kRowChannels channels), so x is read once and every load is a
// coalesced pack; the warp's sums are added by shuffles in a fixed butterfly order, the same on every lane.
template <int V>
constexpr int kRowPacks = kRowChannels / (32 * V);

__device__ inline double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

struct RowLanes {
  int64_t warp, warps;
  int lane;
};
__device__ inline RowLanes row_lanes() {
  return {detail::global_index() / 32, detail::grid_stride() / 32, static_cast<int>(threadIdx.x % 32)};
}

// This lane's packs of row `row` (channels / V packs in all), as fp32.
template <int V, class T>
__device__ inline void load_row(const T* rows, int64_t row, int channels, int lane, float (&v)[kRowPacks<V>][V]) {
  const int packs = channels / V;
#pragma unroll
  for (int k = 0; k < kRowPacks<V>; ++k)
    if (const int pack = lane + 32 * k; pack < packs) detail::load_pack(rows + row * channels + pack * V, v[k]);
}

// Stores this lane's packs of row `row`: value(k, r, c) for value r of its k-th pack, channel c.
template <int V, class T, class Value>
__device__ inline void store_row(T* rows, int64_t row, int channels, int lane, Value value) {
  const int packs = channels / V;
#pragma unroll
  for (int k = 0; k < kRowPacks<V>; ++k) {
    const int pack = lane + 32 * k;
    if (pack >= packs) continue;
    float out[V];
#pragma unroll
    for (int r = 0; r < V; ++r) out[r] = value(k, r, pack * V + r);
    detail::store_pack(rows + row * channels + pack * V, out);
  }
}

template <int V, class T>
__global__ void layer_norm_rows_forward_kernel(int64_t rows, int channels, float epsilon, const T* x,
                                               LayerNormTensors t, T* y) {
  const RowLanes at = row_lanes();
  const int packs = channels / V;
  for (int64_t row = at.warp; row < rows; row += at.warps) {
    float v[kRowPacks<V>][V];
    load_row<V>(x, row, channels, at.lane, v);
    double sum = 0;
#pragma unroll
    for (int k = 0; k < kRowPacks<V>; ++k)
      if (at.lane + 32 * k < packs)
#pragma unroll
        for (int r = 0; r < V; ++r) sum += v[k][r];
    const double mean = layer_norm_mean(warp_sum(sum), channels);
    double squares = 0;
#pragma unroll
    for (int k = 0; k < kRowPacks<V>; ++k)
      if (at.lane + 32 * k < packs)
#pragma unroll
        for (int r = 0; r < V; ++r) squares = layer_norm_add_squared_deviation(squares, v[k][r], mean);
    const LayerNormStats s = layer_norm_stats_of(mean, warp_sum(squares), channels, epsilon);
    if (at.lane == 0) t.mean[row] = s.mean, t.rstd[row] = s.rstd;
    store_row<V>(y, row, channels, at.lane,
                 [&](int k, int r, int c) { return layer_norm_output(v[k][r], s, t.gamma[c], t.beta[c]); });
  }
}

template <int V, class T>
__global__ void layer_norm_rows_input_gradient_kernel(int64_t rows, int channels, const T* x, const T* dy,
                                                      LayerNormTensors t, T* dx) {
  const RowLanes at = row_lanes();
  const int packs = channels / V;
  for (int64_t row = at.warp; row < rows; row += at.warps) {
    float v[kRowPacks<V>][V], g[kRowPacks<V>][V];
    load_row<V>(x, row, channels, at.lane, v);
    load_row<V>(dy, row, channels, at.lane, g);
    const LayerNormStats s{t.mean[row], t.rstd[row]};
    LayerNormGradientSums sums;
#pragma unroll
    for (int k = 0; k < kRowPacks<V>; ++k)
      if (at.lane + 32 * k < packs)
#pragma unroll
        for (int r = 0; r < V; ++r)
          add_layer_norm_gradient_terms(sums, v[k][r], g[k][r], t.gamma[(at.lane + 32 * k) * V + r], s);
    sums.g = warp_sum(sums.g), sums.g_xhat = warp_sum(sums.g_xhat);
    const LayerNormGradientMeans m = layer_norm_gradient_means_of(sums, channels);
    store_row<V>(dx, row, channels, at.lane, [&](int k, int r, int c) {
      return layer_norm_input_gradient(v[k][r], g[k][r], t.gamma[c], s, m);
    });
  }
}

// dgamma's dy * xhat and dbeta's dy at (row, channel), for detail::column_sums.
template <class T>
struct LayerNormParameterTerms {
  const T *x, *dy;
  const float *mean, *rstd;
  __device__ void operator()(int64_t row, int64_t c, detail::PairSum& sums) const {
    const int64_t at = row * columns + c;
    const float d = load(dy + at);
    sums.a += layer_norm_gamma_gradient_term(load(x + at), d, {mean[row], rstd[row]});
    sums.b += d;
  }
  int64_t columns;
};

// Warps of a block, and blocks enough for one warp per row up to the usual cap (grid-stride beyond).
unsigned row_blocks(int64_t rows) { return detail::blocks_for(rows * 32); }

// The widest pack (at most 16 bytes) that divides the channels and to which every buffer is aligned.
int row_pack_width(const Planes& p, std::initializer_list<const void*> buffers) {
  int vec = detail::pack_width(p.type, buffers);
  while (p.c % vec) vec /= 2;
  return vec;
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

bool layer_norm_rows_fit(const Planes& p, ActivationLayout layout) {
  return plane_strides(p, layout).channel == 1 && p.c > 0 && p.c <= kRowChannels;
}

std::size_t layer_norm_rows_scratch_bytes(const Planes& p) {
  return detail::column_sums_scratch_bytes(p.n * p.hw, p.c);
}

void layer_norm_rows_forward(const Planes& p, float epsilon, const void* x, const LayerNormTensors& t, void* y,
                             Stream stream) {
  const int64_t rows = p.n * p.hw;
  if (rows <= 0 || p.c <= 0) return;
  detail::with_element(p.type, [&](auto e) {
    using T = decltype(e);
    detail::with_pack_width(row_pack_width(p, {x, y}), [&](auto width) {
      constexpr int V = decltype(width)::value;
      if constexpr (V * sizeof(T) <= 16)
        layer_norm_rows_forward_kernel<V><<<row_blocks(rows), detail::kThreads, 0, stream>>>(
            rows, static_cast<int>(p.c), epsilon, static_cast<const T*>(x), t, static_cast<T*>(y));
    });
  });
  RT_CHECK_LAUNCH();
}

void layer_norm_rows_backward(const Planes& p, const void* x, const void* dy, const LayerNormTensors& t, void* dx,
                              float* dgamma, float* dbeta, void* scratch, Stream stream) {
  const int64_t rows = p.n * p.hw;
  if (rows <= 0 || p.c <= 0) return;
  detail::with_element(p.type, [&](auto e) {
    using T = decltype(e);
    const T *xs = static_cast<const T*>(x), *dys = static_cast<const T*>(dy);
    detail::column_sums(rows, p.c, LayerNormParameterTerms<T>{xs, dys, t.mean, t.rstd, p.c}, scratch, dgamma, dbeta,
                        stream);
    if (!dx) return;
    detail::with_pack_width(row_pack_width(p, {x, dy, dx}), [&](auto width) {
      constexpr int V = decltype(width)::value;
      if constexpr (V * sizeof(T) <= 16)
        layer_norm_rows_input_gradient_kernel<V><<<row_blocks(rows), detail::kThreads, 0, stream>>>(
            rows, static_cast<int>(p.c), xs, dys, t, static_cast<T*>(dx));
    });
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
