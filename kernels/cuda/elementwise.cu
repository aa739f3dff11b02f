// Owns the element-wise kernels declared in elementwise.h, each instantiated for the three element types; the ones
// that stream activations move them in packs of up to 16 bytes (element_access.cuh).
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;
using detail::load;
using detail::load_pack;
using detail::store;
using detail::store_pack;

// Calls f(i, v) for this thread's packs of V values at i (v: an array of V), then f(i, w) for each value of the
// n % V left (w: an array of 1). f reads and writes its operands at i itself, so one body serves both.
template <int V, class F>
__device__ void for_packs(int64_t n, F&& f) {
  const int64_t packs = n / V;
  for (int64_t p = global_index(); p < packs; p += grid_stride()) f(p * V, std::integral_constant<int, V>{});
  for (int64_t i = packs * V + global_index(); i < n; i += grid_stride()) f(i, std::integral_constant<int, 1>{});
}

// With Relu, max(a + b, 0) before rounding: rounding keeps the sign, so these are the bits relu_forward writes after
// the plain add.
template <int V, bool Relu, class T>
__global__ void add_kernel(int64_t n, const T* a, const T* b, T* y) {
  for_packs<V>(n, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    float va[W], vb[W];
    load_pack(a + i, va);
    load_pack(b + i, vb);
#pragma unroll
    for (int r = 0; r < W; ++r) {
      va[r] += vb[r];
      if (Relu) va[r] = va[r] > 0.0f ? va[r] : 0.0f;
    }
    store_pack(y + i, va);
  });
}

template <class T>
__global__ void accumulate_into_fp32_kernel(int64_t n, const T* x, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] += load(x + i);
}
__global__ void fill_kernel(int64_t n, float value, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = value;
}
__global__ void scale_kernel(int64_t n, float factor, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] *= factor;
}
// Threads that see a non-finite value all write the same 1, so the race is harmless.
__global__ void unscale_kernel(int64_t n, float factor, float* y, int32_t* nonfinite) {
  bool bad = false;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    bad |= !isfinite(y[i]);
    y[i] *= factor;
  }
  if (bad) *nonfinite = 1;
}
template <int V, class T>
__global__ void relu_forward_kernel(int64_t n, const T* x, T* y) {
  for_packs<V>(n, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    float v[W];
    load_pack(x + i, v);
#pragma unroll
    for (int r = 0; r < W; ++r) v[r] = v[r] > 0.0f ? v[r] : 0.0f;
    store_pack(y + i, v);
  });
}
template <int V, class T>
__global__ void relu_backward_kernel(int64_t n, const T* y, const T* dy, T* dx) {
  for_packs<V>(n, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    float vy[W], g[W];
    load_pack(y + i, vy);
    load_pack(dy + i, g);
#pragma unroll
    for (int r = 0; r < W; ++r) g[r] = vy[r] > 0.0f ? g[r] : 0.0f;
    store_pack(dx + i, g);
  });
}
// The activation is uniform across the launch, so its switch costs no divergence.
template <int V, class T>
__global__ void activation_forward_kernel(Activation a, int64_t n, const T* x, T* y) {
  for_packs<V>(n, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    float v[W];
    load_pack(x + i, v);
#pragma unroll
    for (int r = 0; r < W; ++r) v[r] = activation_value(a, v[r]);
    store_pack(y + i, v);
  });
}
template <int V, class T>
__global__ void activation_backward_kernel(Activation a, int64_t n, const T* x, const T* dy, T* dx) {
  for_packs<V>(n, [&](int64_t i, auto width) {
    constexpr int W = decltype(width)::value;
    float vx[W], g[W];
    load_pack(x + i, vx);
    load_pack(dy + i, g);
#pragma unroll
    for (int r = 0; r < W; ++r) g[r] = activation_slope(a, vx[r]) * g[r];
    store_pack(dx + i, g);
  });
}
template <class T>
__global__ void add_bias_rows_kernel(int64_t n, int units, const float* bias, T* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) store(y + i, load(y + i) + bias[i % units]);
}
template <class T>
__global__ void bias_grad_rows_kernel(int rows, int units, const T* dy, float* dbias) {
  for (int64_t u = global_index(); u < units; u += grid_stride()) {
    float sum = 0.0f;
    for (int r = 0; r < rows; ++r) sum += load(dy + static_cast<int64_t>(r) * units + u);  // coalesced across threads
    dbias[u] += sum;
  }
}
constexpr int kTallChunk = 4096, kTallUnits = 32, kTallLanes = 8;
template <class T>
__global__ void bias_tall_partials_kernel(int rows, int units, const T* dy, float* partials) {
  __shared__ float lane_sums[kTallLanes][kTallUnits];
  const int u = static_cast<int>(blockIdx.x) * kTallUnits + static_cast<int>(threadIdx.x);
  const int first = static_cast<int>(blockIdx.y) * kTallChunk, end = min(rows, first + kTallChunk);
  float sum = 0.0f;
  if (u < units)  // a warp reads 32 neighbouring units of one row: coalesced
    for (int r = first + static_cast<int>(threadIdx.y); r < end; r += kTallLanes)
      sum += load(dy + static_cast<int64_t>(r) * units + u);
  lane_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || u >= units) return;
  float total = 0.0f;
  for (int lane = 0; lane < kTallLanes; ++lane) total += lane_sums[lane][threadIdx.x];
  partials[static_cast<int64_t>(blockIdx.y) * units + u] = total;
}
__global__ void bias_tall_chunks_kernel(int chunks, int units, const float* partials, float* dbias) {
  for (int64_t u = global_index(); u < units; u += grid_stride()) {
    float total = 0.0f;
    for (int c = 0; c < chunks; ++c) total += partials[static_cast<int64_t>(c) * units + u];
    dbias[u] += total;
  }
}
template <class T>
__global__ void add_bias_channels_kernel(int64_t n, int channels, int spatial, const float* bias, T* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride())
    store(y + i, load(y + i) + bias[(i / spatial) % channels]);
}
template <class T>
__global__ void bias_grad_channels_kernel(int batch, int channels, int spatial, const T* dy, float* dbias) {
  const int c = static_cast<int>(blockIdx.x);
  detail::PairSum mine;
  detail::for_channel(batch, channels, spatial, c, [&](int64_t i) { mine.a += load(dy + i); });
  const detail::PairSum total = detail::block_sum(mine);
  if (threadIdx.x == 0) dbias[c] += static_cast<float>(total.a);
}

}  // namespace

using detail::blocks_for;
using detail::kThreads;
using detail::with_element;

// Launches kernel<V, T> over n.n values in packs of V as wide as every buffer's alignment allows.
template <class Launch>
void launch_packed(Elements n, std::initializer_list<const void*> buffers, Launch launch) {
  with_element(n.type, [&](auto t) {
    detail::with_pack_width(detail::pack_width(n.type, buffers), [&](auto v) {
      launch(t, v, blocks_for((n.n + decltype(v)::value - 1) / decltype(v)::value));
    });
  });
  RT_CHECK_LAUNCH();
}

template <bool Relu>
void launch_add(Elements n, const void* a, const void* b, void* y, Stream stream) {
  if (n.n <= 0) return;
  launch_packed(n, {a, b, y}, [&](auto t, auto v, unsigned blocks) {
    using T = decltype(t);
    add_kernel<decltype(v)::value, Relu><<<blocks, kThreads, 0, stream>>>(
        n.n, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y));
  });
}

void add(Elements n, const void* a, const void* b, void* y, Stream stream) { launch_add<false>(n, a, b, y, stream); }
void add_relu(Elements n, const void* a, const void* b, void* y, Stream stream) {
  launch_add<true>(n, a, b, y, stream);
}
// y += x is y = y + x, and add's output may be one of its inputs.
void accumulate(Elements n, const void* x, void* y, Stream stream) { add(n, y, x, y, stream); }
void accumulate_into_fp32(Elements n, const void* x, float* y, Stream stream) {
  if (n.n <= 0) return;
  with_element(n.type, [&](auto t) {
    using T = decltype(t);
    accumulate_into_fp32_kernel<<<blocks_for(n.n), kThreads, 0, stream>>>(n.n, static_cast<const T*>(x), y);
  });
  RT_CHECK_LAUNCH();
}
void fill(int64_t n, float value, float* y, Stream stream) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, value, y);
  RT_CHECK_LAUNCH();
}
void scale(int64_t n, float factor, float* y, Stream stream) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, factor, y);
  RT_CHECK_LAUNCH();
}
void unscale(int64_t n, float factor, float* y, int32_t* nonfinite, Stream stream) {
  if (n <= 0) return;
  unscale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, factor, y, nonfinite);
  RT_CHECK_LAUNCH();
}
void activation_forward(Activation a, Elements n, const void* x, void* y, Stream stream) {
  if (n.n <= 0) return;
  launch_packed(n, {x, y}, [&](auto t, auto v, unsigned blocks) {
    using T = decltype(t);
    activation_forward_kernel<decltype(v)::value><<<blocks, kThreads, 0, stream>>>(
        a, n.n, static_cast<const T*>(x), static_cast<T*>(y));
  });
}
void activation_backward(Activation a, Elements n, const void* x, const void* dy, void* dx, Stream stream) {
  if (n.n <= 0) return;
  launch_packed(n, {x, dy, dx}, [&](auto t, auto v, unsigned blocks) {
    using T = decltype(t);
    activation_backward_kernel<decltype(v)::value><<<blocks, kThreads, 0, stream>>>(
        a, n.n, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx));
  });
}
void relu_forward(Elements n, const void* x, void* y, Stream stream) {
  if (n.n <= 0) return;
  launch_packed(n, {x, y}, [&](auto t, auto v, unsigned blocks) {
    using T = decltype(t);
    relu_forward_kernel<decltype(v)::value><<<blocks, kThreads, 0, stream>>>(n.n, static_cast<const T*>(x),
                                                                             static_cast<T*>(y));
  });
}
void relu_backward(Elements n, const void* y, const void* dy, void* dx, Stream stream) {
  if (n.n <= 0) return;
  launch_packed(n, {y, dy, dx}, [&](auto t, auto v, unsigned blocks) {
    using T = decltype(t);
    relu_backward_kernel<decltype(v)::value><<<blocks, kThreads, 0, stream>>>(
        n.n, static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx));
  });
}
void add_bias_rows(int rows, int units, const float* bias, ElementType type, void* y, Stream stream) {
  const int64_t n = static_cast<int64_t>(rows) * units;
  if (n <= 0) return;
  with_element(type, [&](auto t) {
    using T = decltype(t);
    add_bias_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, units, bias, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}
void bias_grad_rows(int rows, int units, ElementType type, const void* dy, float* dbias, Stream stream) {
  if (rows <= 0 || units <= 0) return;
  with_element(type, [&](auto t) {
    using T = decltype(t);
    bias_grad_rows_kernel<<<blocks_for(units), kThreads, 0, stream>>>(rows, units, static_cast<const T*>(dy), dbias);
  });
  RT_CHECK_LAUNCH();
}
int64_t bias_grad_tall_partials(int rows, int units) {
  return (static_cast<int64_t>(rows) + kTallChunk - 1) / kTallChunk * units;
}
void bias_grad_tall_rows(int rows, int units, ElementType type, const void* dy, float* partials, float* dbias,
                         Stream stream) {
  if (rows <= 0 || units <= 0) return;
  const int chunks = (rows + kTallChunk - 1) / kTallChunk;
  const dim3 grid((units + kTallUnits - 1) / kTallUnits, chunks), block(kTallUnits, kTallLanes);
  with_element(type, [&](auto t) {
    using T = decltype(t);
    bias_tall_partials_kernel<<<grid, block, 0, stream>>>(rows, units, static_cast<const T*>(dy), partials);
  });
  RT_CHECK_LAUNCH();
  bias_tall_chunks_kernel<<<blocks_for(units), kThreads, 0, stream>>>(chunks, units, partials, dbias);
  RT_CHECK_LAUNCH();
}
void add_bias_channels(int batch, int channels, int spatial, const float* bias, ElementType type, void* y,
                       Stream stream) {
  const int64_t n = static_cast<int64_t>(batch) * channels * spatial;
  if (n <= 0) return;
  with_element(type, [&](auto t) {
    using T = decltype(t);
    add_bias_channels_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, channels, spatial, bias, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}
void bias_grad_channels(int batch, int channels, int spatial, ElementType type, const void* dy, float* dbias,
                        Stream stream) {
  if (batch <= 0 || channels <= 0 || spatial <= 0) return;
  with_element(type, [&](auto t) {
    using T = decltype(t);
    bias_grad_channels_kernel<<<channels, detail::kChannelThreads, 0, stream>>>(batch, channels, spatial,
                                                                                static_cast<const T*>(dy), dbias);
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
