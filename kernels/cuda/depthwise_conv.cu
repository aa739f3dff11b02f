// Owns the depthwise convolution kernels declared in depthwise_conv.h, instantiated for the three element types.
// One kernel per direction serves both layouts: at<kNhwc> says where value (n, c, h, w) lies, and the order in which
// a launch's threads walk the values keeps neighbouring threads on neighbouring addresses (NHWC: channels fastest, V
// channels a thread; NCHW: columns fastest, one value a thread).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/depthwise_conv.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::load_pack;
using detail::store_pack;

// The sizes every kernel reads, passed by value.
struct Geometry {
  int batch, channels, in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride, padding;
  __host__ __device__ int taps() const { return kernel_h * kernel_w; }
};

Geometry geometry_of(const Conv2dShape& s) {
  return {s.batch,    s.in_channels, s.in_h,     s.in_w,  s.out_h(), s.out_w(), s.kernel_h,
          s.kernel_w, s.stride,      s.padding};
}

// Where value (n, c, h, w) of an N x C x height x width tensor lies.
template <bool kNhwc>
__device__ inline int64_t at(const Geometry& g, int n, int c, int h, int w, int height, int width) {
  if constexpr (kNhwc) return ((static_cast<int64_t>(n) * height + h) * width + w) * g.channels + c;
  return ((static_cast<int64_t>(n) * g.channels + c) * height + h) * width + w;
}

// Value `index` of a launch's walk over an N x C x height x width tensor, V channels a step in NHWC (channels
// fastest) or one value a step in NCHW (columns fastest).
struct Place {
  int n, c, h, w;
};
template <bool kNhwc, int V>
__device__ inline Place place_of(const Geometry& g, int64_t at_index, int height, int width) {
  int index = static_cast<int>(at_index);  // depthwise_conv_takes: every tensor's values fit an int
  Place p;
  if constexpr (kNhwc) {
    const int groups = g.channels / V;
    p.c = index % groups * V;
    index /= groups;
    p.w = index % width;
    index /= width;
    p.h = index % height;
    p.n = index / height;
  } else {
    p.w = index % width;
    index /= width;
    p.h = index % height;
    index /= height;
    p.c = index % g.channels;
    p.n = index / g.channels;
  }
  return p;
}

// The weights of channels c..c+V-1 at tap t = r * S + s, from the tap-major copy (R x S x C): one load of 4 or 2
// where the pack allows (c a multiple of V, and C of V, so every such load is aligned).
template <int V>
__device__ inline void tap_weights(const Geometry& g, const float* tap_major, int c, int t, float (&out)[V]) {
  const float* p = tap_major + static_cast<int64_t>(t) * g.channels + c;
  if constexpr (V >= 4) {
#pragma unroll
    for (int q = 0; q < V; q += 4) {
      const float4 four = __ldg(reinterpret_cast<const float4*>(p + q));
      out[q] = four.x, out[q + 1] = four.y, out[q + 2] = four.z, out[q + 3] = four.w;
    }
  } else if constexpr (V == 2) {
    const float2 two = __ldg(reinterpret_cast<const float2*>(p));
    out[0] = two.x, out[1] = two.y;
  } else {
    out[0] = __ldg(p);
  }
}

// tap_major[t][c] = w[c][t]: the K x 1 x R x S weights reordered R x S x C.
__global__ void tap_major_kernel(Geometry g, const float* w, float* tap_major) {
  const int64_t total = int64_t{g.channels} * g.taps();
  for (int64_t i = detail::global_index(); i < total; i += detail::grid_stride()) {
    const int64_t t = i / g.channels, c = i % g.channels;
    tap_major[i] = w[c * g.taps() + t];
  }
}

// y(n, c, oh, ow) = bias(c) + sum over taps (r, s) inside the input of x(n, c, oh*stride - pad + r, ...) * w(c, r, s).
template <class T, bool kNhwc, int V>
__global__ void forward_kernel(Geometry g, const T* x, const float* w, const float* bias, T* y) {  // w tap-major
  const int64_t total = int64_t{g.batch} * g.channels / V * g.out_h * g.out_w;
  for (int64_t i = detail::global_index(); i < total; i += detail::grid_stride()) {
    const Place o = place_of<kNhwc, V>(g, i, g.out_h, g.out_w);
    float sum[V];
#pragma unroll
    for (int v = 0; v < V; ++v) sum[v] = bias ? __ldg(bias + o.c + v) : 0.0f;
    for (int r = 0; r < g.kernel_h; ++r) {
      const int ih = o.h * g.stride - g.padding + r;
      if (ih < 0 || ih >= g.in_h) continue;
      for (int s = 0; s < g.kernel_w; ++s) {
        const int iw = o.w * g.stride - g.padding + s;
        if (iw < 0 || iw >= g.in_w) continue;
        float xs[V], ws[V];
        load_pack<V>(x + at<kNhwc>(g, o.n, o.c, ih, iw, g.in_h, g.in_w), xs);
        tap_weights<V>(g, w, o.c, r * g.kernel_w + s, ws);
#pragma unroll
        for (int v = 0; v < V; ++v) sum[v] += xs[v] * ws[v];
      }
    }
    store_pack<V>(y + at<kNhwc>(g, o.n, o.c, o.h, o.w, g.out_h, g.out_w), sum);
  }
}

// dx(n, c, ih, iw) = sum over the outputs (oh, ow) whose tap (r, s) = (ih + pad - oh*stride, ...) lies in the
// filter, of dy(n, c, oh, ow) * w(c, r, s): each input gathers its own sum, so no two threads write one value.
template <class T, bool kNhwc, int V>
__global__ void backward_data_kernel(Geometry g, const T* dy, const float* w, T* dx) {  // w tap-major
  const int64_t total = int64_t{g.batch} * g.channels / V * g.in_h * g.in_w;
  for (int64_t i = detail::global_index(); i < total; i += detail::grid_stride()) {
    const Place in = place_of<kNhwc, V>(g, i, g.in_h, g.in_w);
    float sum[V] = {};
    for (int r = 0; r < g.kernel_h; ++r) {
      const int row = in.h + g.padding - r;  // oh * stride
      if (row < 0 || row % g.stride != 0 || row / g.stride >= g.out_h) continue;
      for (int s = 0; s < g.kernel_w; ++s) {
        const int col = in.w + g.padding - s;
        if (col < 0 || col % g.stride != 0 || col / g.stride >= g.out_w) continue;
        float d[V], ws[V];
        load_pack<V>(dy + at<kNhwc>(g, in.n, in.c, row / g.stride, col / g.stride, g.out_h, g.out_w), d);
        tap_weights<V>(g, w, in.c, r * g.kernel_w + s, ws);
#pragma unroll
        for (int v = 0; v < V; ++v) sum[v] += d[v] * ws[v];
      }
    }
    store_pack<V>(dx + at<kNhwc>(g, in.n, in.c, in.h, in.w, g.in_h, g.in_w), sum);
  }
}

// ---- filter gradient

constexpr int kBlockThreads = 256;
constexpr int kTargetBlocks = 1024;      // enough to fill any current GPU a few times over
constexpr int kMinChunkPositions = 256;  // so a chunk's lanes each add up a run of positions, not one or two

// How a filter-gradient block is laid out: lanes_x threads across channels (V each), lanes_y across positions
// (lanes_x * lanes_y = kBlockThreads, both powers of two), channel_blocks blocks across the channels.
struct GradientBlocks {
  int vec = 1, lanes_x = 1, lanes_y = kBlockThreads, channel_blocks = 1;
};

int next_power_of_two(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

GradientBlocks gradient_blocks(const Conv2dShape& s, ActivationLayout layout, int vec) {
  GradientBlocks b;
  if (layout != ActivationLayout::nhwc) {  // a block per channel, its threads along the positions
    b.channel_blocks = s.in_channels;
    return b;
  }
  b.vec = vec;
  const int groups = s.in_channels / vec;
  b.lanes_x = std::min(32, next_power_of_two(groups));
  if (groups > 32 && groups % 32 != 0 && groups % 16 == 0) b.lanes_x = 16;  // no half-empty last block
  b.lanes_y = kBlockThreads / b.lanes_x;
  b.channel_blocks = (groups + b.lanes_x - 1) / b.lanes_x;
  return b;
}

// Two channels a thread where they pair (the accumulators of 7x7 taps for more would spill).
int nominal_gradient_vec(const Conv2dShape& s, ActivationLayout layout) {
  return layout == ActivationLayout::nhwc && s.in_channels % 2 == 0 ? 2 : 1;
}

// Sums the block's lanes_y rows of `lanes` (lanes_y x lanes_x x V floats) into row 0 in a fixed tree order.
__device__ inline void sum_rows(float* lanes, int row_floats) {
  const int row = threadIdx.y, column = threadIdx.x;
  const int V = row_floats / blockDim.x;
  for (int half = blockDim.y / 2; half > 0; half /= 2) {
    if (row < half)
      for (int v = 0; v < V; ++v)
        lanes[row * row_floats + column * V + v] += lanes[(row + half) * row_floats + column * V + v];
    __syncthreads();
  }
}

// Each block sums, for its channels and its chunk of the N x OH x OW positions, dy(p) * x(p's input at tap (r, s))
// for every tap and dy(p) for the bias, each lane over its positions in order, then over the lanes in a fixed tree
// order, into partials[chunk][c][tap] (taps + 1 a channel, the bias's last). K bounds R and S, so a thread's
// K x K x V sums are registers (their indices known when compiled).
template <class T, bool kNhwc, int V, int K>
__global__ void filter_partials_kernel(Geometry g, int chunks, const T* x, const T* dy, float* partials) {
  extern __shared__ float lanes[];
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * V;
  const bool active = c < g.channels;
  const int64_t positions = int64_t{g.batch} * g.out_h * g.out_w;
  const int64_t per_chunk = (positions + chunks - 1) / chunks;
  const int64_t begin = blockIdx.y * per_chunk;
  const int64_t end = begin + per_chunk < positions ? begin + per_chunk : positions;
  float tap_sum[K * K][V] = {}, bias_sum[V] = {};
  for (int64_t p = begin + threadIdx.y; active && p < end; p += blockDim.y) {
    const int position = static_cast<int>(p);  // depthwise_conv_takes: the positions fit an int
    const int ow = position % g.out_w, oh = position / g.out_w % g.out_h, n = position / g.out_w / g.out_h;
    float d[V];
    load_pack<V>(dy + at<kNhwc>(g, n, c, oh, ow, g.out_h, g.out_w), d);
#pragma unroll
    for (int v = 0; v < V; ++v) bias_sum[v] += d[v];
#pragma unroll
    for (int r = 0; r < K; ++r) {
      const int ih = oh * g.stride - g.padding + r;
      if (r >= g.kernel_h || ih < 0 || ih >= g.in_h) continue;
#pragma unroll
      for (int s = 0; s < K; ++s) {
        const int iw = ow * g.stride - g.padding + s;
        if (s >= g.kernel_w || iw < 0 || iw >= g.in_w) continue;
        float xs[V];
        load_pack<V>(x + at<kNhwc>(g, n, c, ih, iw, g.in_h, g.in_w), xs);
#pragma unroll
        for (int v = 0; v < V; ++v) tap_sum[r * K + s][v] += d[v] * xs[v];
      }
    }
  }
  const int row_floats = static_cast<int>(blockDim.x) * V, mine = threadIdx.y * row_floats + threadIdx.x * V;
  const int stride = g.taps() + 1;
  float* const out = partials + (int64_t{blockIdx.y} * g.channels + c) * stride;
  // The same taps in every thread of the block, so each __syncthreads below is reached by all of them.
#pragma unroll
  for (int t = 0; t <= K * K; ++t) {
    const bool bias = t == K * K;
    const int r = t / K, s = t % K;
    if (!bias && (r >= g.kernel_h || s >= g.kernel_w)) continue;
#pragma unroll
    for (int v = 0; v < V; ++v) lanes[mine + v] = bias ? bias_sum[v] : tap_sum[bias ? 0 : t][v];
    __syncthreads();
    sum_rows(lanes, row_floats);
    if (threadIdx.y == 0 && active)
      for (int v = 0; v < V; ++v) out[v * stride + (bias ? g.taps() : r * g.kernel_w + s)] = lanes[threadIdx.x * V + v];
    __syncthreads();
  }
}

// dw(c, tap) += the chunks' partial sums added in chunk order; dbias(c) likewise from the bias's column.
__global__ void filter_finish_kernel(Geometry g, int chunks, const float* partials, float* dw, float* dbias) {
  const int stride = g.taps() + 1;
  const int64_t per_chunk = int64_t{g.channels} * stride;
  for (int64_t i = detail::global_index(); i < per_chunk; i += detail::grid_stride()) {
    float sum = 0;
    for (int k = 0; k < chunks; ++k) sum += partials[k * per_chunk + i];
    const int64_t c = i / stride;
    const int tap = static_cast<int>(i % stride);
    if (tap < g.taps())
      dw[c * g.taps() + tap] += sum;
    else if (dbias)
      dbias[c] += sum;
  }
}

// The widest pack of `vec_limit` or fewer channels that divides the channels and every buffer's alignment.
int channel_pack(const Conv2dShape& s, ActivationLayout layout, int vec_limit,
                 std::initializer_list<const void*> buffers) {
  if (layout != ActivationLayout::nhwc) return 1;
  int vec = std::min(vec_limit, detail::pack_width(s.data, buffers));
  while (vec > 1 && s.in_channels % vec != 0) vec /= 2;
  return vec;
}

// Launches a kernel a pack of channels a thread over `values` values of s's activations: calls
// launch(T{}, kNhwc, V, blocks) with the element type, the layout and the pack (NHWC at `vec` channels a thread, 8, 4,
// 2 or 1; NCHW at one value a thread, its kernels instantiated only so) as compile-time constants.
template <class Launch>
void launch_per_pack(const Conv2dShape& s, ActivationLayout layout, int vec, int64_t values, Launch launch) {
  const unsigned blocks = detail::blocks_for(values / vec);
  detail::with_element(s.data, [&](auto element) {
    if (layout != ActivationLayout::nhwc)
      return launch(element, std::false_type{}, std::integral_constant<int, 1>{}, blocks);
    detail::with_pack_width(vec, [&](auto v) { launch(element, std::true_type{}, v, blocks); });
  });
  RT_CHECK_LAUNCH();
}

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

template <class Body>
void with_kernel_bound(const Conv2dShape& s, Body body) {
  const int k = std::max(s.kernel_h, s.kernel_w);
  if (k <= 3) return body(std::integral_constant<int, 3>{});
  if (k <= 5) return body(std::integral_constant<int, 5>{});
  return body(std::integral_constant<int, kDepthwiseMaxKernel>{});
}

}  // namespace

DepthwiseConvScratch depthwise_conv_scratch(const Conv2dShape& s, ActivationLayout layout) {
  const GradientBlocks b = gradient_blocks(s, layout, nominal_gradient_vec(s, layout));
  const int64_t positions = int64_t{s.batch} * s.out_h() * s.out_w();
  const int64_t wanted = (kTargetBlocks + b.channel_blocks - 1) / b.channel_blocks;
  const int64_t most = std::max<int64_t>(1, positions / kMinChunkPositions);
  DepthwiseConvScratch scratch;
  scratch.chunks = static_cast<int>(std::clamp<int64_t>(wanted, 1, most));
  const auto channels = static_cast<std::size_t>(s.in_channels);
  const auto taps = static_cast<std::size_t>(s.kernel_h) * static_cast<std::size_t>(s.kernel_w);
  scratch.forward = aligned(sizeof(float) * channels * taps);
  scratch.backward = scratch.forward + sizeof(float) * static_cast<std::size_t>(scratch.chunks) * channels * (taps + 1);
  return scratch;
}

namespace {

float* tap_major_weights(const Geometry& g, const float* w, void* scratch, Stream stream) {
  auto* const tap_major = static_cast<float*>(scratch);
  const int64_t n = int64_t{g.channels} * g.taps();
  tap_major_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(g, w, tap_major);
  RT_CHECK_LAUNCH();
  return tap_major;
}

void backward_data(const Conv2dShape& s, ActivationLayout layout, const void* dy, const float* tap_major, void* dx,
                   Stream stream) {
  const Geometry g = geometry_of(s);
  const int64_t values = int64_t{s.batch} * s.in_channels * g.in_h * g.in_w;
  const int vec = channel_pack(s, layout, 8, {dy, dx});
  launch_per_pack(s, layout, vec, values, [&](auto t, auto nhwc, auto v, unsigned blocks) {
    using T = decltype(t);
    backward_data_kernel<T, decltype(nhwc)::value, decltype(v)::value>
        <<<blocks, detail::kThreads, 0, stream>>>(g, static_cast<const T*>(dy), tap_major, static_cast<T*>(dx));
  });
}

void backward_filter(const Conv2dShape& s, ActivationLayout layout, const void* x, const void* dy, int chunks,
                     float* partials, float* dw, float* dbias, Stream stream) {
  const Geometry g = geometry_of(s);
  const int vec = channel_pack(s, layout, nominal_gradient_vec(s, layout), {x, dy});
  const GradientBlocks b = gradient_blocks(s, layout, vec);
  const dim3 grid(static_cast<unsigned>(b.channel_blocks), static_cast<unsigned>(chunks));
  const dim3 block(static_cast<unsigned>(b.lanes_x), static_cast<unsigned>(b.lanes_y));
  const std::size_t shared = sizeof(float) * kBlockThreads * static_cast<std::size_t>(b.vec);
  detail::with_element(s.data, [&](auto element) {
    using T = decltype(element);
    with_kernel_bound(s, [&](auto k) {
      const auto launch = [&](auto nhwc, auto v) {
        filter_partials_kernel<T, decltype(nhwc)::value, decltype(v)::value, decltype(k)::value>
            <<<grid, block, shared, stream>>>(g, chunks, static_cast<const T*>(x), static_cast<const T*>(dy),
                                              partials);
      };
      if (layout != ActivationLayout::nhwc)
        launch(std::false_type{}, std::integral_constant<int, 1>{});
      else if (b.vec == 2)
        launch(std::true_type{}, std::integral_constant<int, 2>{});
      else
        launch(std::true_type{}, std::integral_constant<int, 1>{});
    });
  });
  RT_CHECK_LAUNCH();
  const int64_t finish = int64_t{s.in_channels} * (g.taps() + 1);
  filter_finish_kernel<<<detail::blocks_for(finish), detail::kThreads, 0, stream>>>(g, chunks, partials, dw, dbias);
  RT_CHECK_LAUNCH();
}

}  // namespace

void depthwise_conv_forward(const Conv2dShape& s, ActivationLayout layout, const void* x, const float* w,
                            const float* bias, void* y, void* scratch, Stream stream) {
  const Geometry g = geometry_of(s);
  const float* tap_major = tap_major_weights(g, w, scratch, stream);
  const int64_t values = int64_t{s.batch} * s.in_channels * g.out_h * g.out_w;
  const int vec = channel_pack(s, layout, 8, {x, y});
  launch_per_pack(s, layout, vec, values, [&](auto t, auto nhwc, auto v, unsigned blocks) {
    using T = decltype(t);
    forward_kernel<T, decltype(nhwc)::value, decltype(v)::value>
        <<<blocks, detail::kThreads, 0, stream>>>(g, static_cast<const T*>(x), tap_major, bias, static_cast<T*>(y));
  });
}

void depthwise_conv_backward(const Conv2dShape& s, ActivationLayout layout, const void* x, const void* dy,
                             const float* w, void* dx, float* dw, float* dbias, void* scratch, Stream stream) {
  const DepthwiseConvScratch sizes = depthwise_conv_scratch(s, layout);
  auto* const partials = reinterpret_cast<float*>(static_cast<std::byte*>(scratch) + sizes.forward);
  backward_filter(s, layout, x, dy, sizes.chunks, partials, dw, dbias, stream);
  if (dx) backward_data(s, layout, dy, tap_major_weights(geometry_of(s), w, scratch, stream), dx, stream);
}

}  // namespace ringtrain::kernels::cuda
