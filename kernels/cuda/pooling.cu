// Owns the pooling kernels declared in pooling.h: forward one thread per output value, backward one per input value.
// NCHW: each block takes a tile of planes (sample x channel): several small planes, or a slice of a large one (grid
// y), so a value's plane, row and column come from its index in the tile through FastDivide rather than integer
// divisions. NHWC: a thread takes a pack of adjacent channels at one position (16-byte loads, neighbouring threads
// on neighbouring packs), with the NCHW kernels' window order and arithmetic per channel, so the numbers are the same.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "common/error.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pooling.h"
#include "kernels/fast_divide.h"

namespace ringtrain::kernels::cuda {
namespace {

using detail::load;
using detail::store;

struct Geometry {
  int in_h, in_w, out_h, out_w, window, stride, padding;
  FastDivide by_in_w, by_out_w, by_stride, by_in_plane, by_out_plane;
  __host__ __device__ int in_plane() const { return in_h * in_w; }
  __host__ __device__ int out_plane() const { return out_h * out_w; }
};

Geometry geometry_of(const PoolShape& s) {
  Geometry g{s.in_h,
             s.in_w,
             s.out_h(),
             s.out_w(),
             s.window,
             s.stride,
             s.padding,
             FastDivide(static_cast<uint32_t>(s.in_w)),
             FastDivide(static_cast<uint32_t>(s.out_w())),
             FastDivide(static_cast<uint32_t>(s.stride)),
             FastDivide(static_cast<uint32_t>(std::max(1, s.in_h * s.in_w))),
             FastDivide(static_cast<uint32_t>(std::max(1, s.out_h() * s.out_w())))};
  if (static_cast<int64_t>(s.in_h) * s.in_w > int64_t{detail::kThreads} * 65535)
    throw JobFileError("pooling over " + std::to_string(s.in_h) + " x " + std::to_string(s.in_w) +
                       " planes on the GPU: a plane may hold at most 16.7 M values");
  return g;
}

// How blocks tile planes of per_plane values: planes_per_block whole planes when they are small, else one plane
// per blockIdx.x cut into kThreads-value slices along y.
struct Tiling {
  int64_t planes;
  int per_plane, planes_per_block;
  FastDivide by_plane;
  dim3 grid() const {
    return dim3(static_cast<unsigned>((planes + planes_per_block - 1) / planes_per_block),
                static_cast<unsigned>((per_plane + detail::kThreads - 1) / detail::kThreads));
  }
  // This thread's plane and its value's index in it; false past the last.
  __device__ bool locate(int64_t& plane, int& at) const {
    const uint32_t t = blockIdx.y * blockDim.x + threadIdx.x, local = by_plane.quotient(t);
    at = static_cast<int>(t - local * static_cast<uint32_t>(per_plane));
    plane = static_cast<int64_t>(blockIdx.x) * planes_per_block + local;
    return plane < planes && at < per_plane && static_cast<int>(local) < planes_per_block;
  }
};

Tiling tiling(int64_t planes, int per_plane) {
  return {planes, per_plane, std::max(1, detail::kThreads / per_plane), FastDivide(static_cast<uint32_t>(per_plane))};
}

template <class T>
__global__ void forward_kernel(Geometry g, Tiling tiles, bool max, const T* x, T* y, uint16_t* winners) {
  int64_t plane = 0;
  int at = 0;
  if (!tiles.locate(plane, at)) return;
  const int64_t o = plane * g.out_plane() + at;
  const int oh = static_cast<int>(g.by_out_w.quotient(static_cast<uint32_t>(at))), ow = at - oh * g.out_w;
  const T* xp = x + plane * g.in_plane();
  float best = -INFINITY, sum = 0.0f;
  int32_t winner = -1;
  for (int r = 0; r < g.window; ++r) {
    const int h = oh * g.stride - g.padding + r;
    if (h < 0 || h >= g.in_h) continue;
    for (int q = 0; q < g.window; ++q) {
      const int w = ow * g.stride - g.padding + q;
      if (w < 0 || w >= g.in_w) continue;
      const float v = load(xp + h * g.in_w + w);
      sum += v;
      if (winner < 0 || v > best) best = v, winner = r * g.window + q;
    }
  }
  if (max) {
    store(y + o, best);
    winners[o] = static_cast<uint16_t>(winner);
  } else {
    store(y + o, sum / static_cast<float>(g.window * g.window));
  }
}

// The outputs whose window covers input row (or column) i: first..last, empty when first > last.
struct Cover {
  int first, last;
};
__device__ Cover cover(int i, const Geometry& g, int outputs) {
  const auto top = static_cast<uint32_t>(i + g.padding);  // position in the padded input
  const auto window = static_cast<uint32_t>(g.window);
  const int first = top < window ? 0 : static_cast<int>(g.by_stride.quotient(top - window)) + 1;
  const int last = min(static_cast<int>(g.by_stride.quotient(top)), outputs - 1);
  return {first, last};
}

// Where input (h, w) lies in output (oh, ow)'s window: what forward kept as the winner.
__device__ int place_in_window(const Geometry& g, int h, int w, int oh, int ow) {
  return (h - (oh * g.stride - g.padding)) * g.window + (w - (ow * g.stride - g.padding));
}

template <class T>
__global__ void backward_kernel(Geometry g, Tiling tiles, bool max, const T* dy, const uint16_t* winners, T* dx) {
  int64_t plane = 0;
  int at = 0;
  if (!tiles.locate(plane, at)) return;
  const int h = static_cast<int>(g.by_in_w.quotient(static_cast<uint32_t>(at))), w = at - h * g.in_w;
  const Cover rows = cover(h, g, g.out_h), cols = cover(w, g, g.out_w);
  const float share = 1.0f / static_cast<float>(g.window * g.window);
  float sum = 0.0f;
  for (int oh = rows.first; oh <= rows.last; ++oh)
    for (int ow = cols.first; ow <= cols.last; ++ow) {
      const int64_t o = plane * g.out_plane() + oh * g.out_w + ow;
      if (!max) sum += load(dy + o) * share;
      else if (winners[o] == place_in_window(g, h, w, oh, ow)) sum += load(dy + o);
    }
  store(dx + plane * g.in_plane() + at, sum);
}

// ---- NHWC: rows of `channels` values, one per sample and position, taken in packs of V channels.

// A thread's pack: which of the rows x packs it is (grid-stride), its row and the pack's first channel.
struct PackIndex {
  int64_t packs;      // rows x packs per row
  int channels, vec;  // a row's values, and a pack's
  FastDivide by_packs_per_row;
  __device__ void split(int64_t t, int64_t& row, int& c0) const {
    const auto row32 = by_packs_per_row.quotient(static_cast<uint32_t>(t));
    row = row32;
    c0 = static_cast<int>(static_cast<uint32_t>(t) - row32 * static_cast<uint32_t>(channels / vec)) * vec;
  }
};

template <int V, class T>
__global__ void nhwc_forward_kernel(Geometry g, PackIndex p, bool max, const T* x, T* y, uint16_t* winners) {
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < p.packs; t += gridDim.x * int64_t{blockDim.x}) {
    int64_t row = 0;
    int c0 = 0;
    p.split(t, row, c0);
    const auto n = g.by_out_plane.quotient(static_cast<uint32_t>(row));
    const int at = static_cast<int>(static_cast<uint32_t>(row) - n * static_cast<uint32_t>(g.out_plane()));
    const int oh = static_cast<int>(g.by_out_w.quotient(static_cast<uint32_t>(at))), ow = at - oh * g.out_w;
    const T* xn = x + static_cast<int64_t>(n) * g.in_plane() * p.channels + c0;
    float best[V], sum[V];
    int32_t winner[V];
#pragma unroll
    for (int k = 0; k < V; ++k) best[k] = -INFINITY, sum[k] = 0.0f, winner[k] = -1;
    for (int r = 0; r < g.window; ++r) {
      const int h = oh * g.stride - g.padding + r;
      if (h < 0 || h >= g.in_h) continue;
      for (int q = 0; q < g.window; ++q) {
        const int w = ow * g.stride - g.padding + q;
        if (w < 0 || w >= g.in_w) continue;
        float v[V];
        detail::load_pack(xn + static_cast<int64_t>(h * g.in_w + w) * p.channels, v);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          sum[k] += v[k];
          if (winner[k] < 0 || v[k] > best[k]) best[k] = v[k], winner[k] = r * g.window + q;
        }
      }
    }
    const int64_t o = row * p.channels + c0;
    if (max) {
      detail::store_pack(y + o, best);
#pragma unroll
      for (int k = 0; k < V; ++k) winners[o + k] = static_cast<uint16_t>(winner[k]);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) sum[k] = sum[k] / static_cast<float>(g.window * g.window);
      detail::store_pack(y + o, sum);
    }
  }
}

template <int V, class T>
__global__ void nhwc_backward_kernel(Geometry g, PackIndex p, bool max, const T* dy, const uint16_t* winners, T* dx) {
  const float share = 1.0f / static_cast<float>(g.window * g.window);
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < p.packs; t += gridDim.x * int64_t{blockDim.x}) {
    int64_t row = 0;
    int c0 = 0;
    p.split(t, row, c0);
    const auto n = g.by_in_plane.quotient(static_cast<uint32_t>(row));
    const int at = static_cast<int>(static_cast<uint32_t>(row) - n * static_cast<uint32_t>(g.in_plane()));
    const int h = static_cast<int>(g.by_in_w.quotient(static_cast<uint32_t>(at))), w = at - h * g.in_w;
    const Cover rows = cover(h, g, g.out_h), cols = cover(w, g, g.out_w);
    float sum[V];
#pragma unroll
    for (int k = 0; k < V; ++k) sum[k] = 0.0f;
    for (int oh = rows.first; oh <= rows.last; ++oh)
      for (int ow = cols.first; ow <= cols.last; ++ow) {
        const int64_t o = (static_cast<int64_t>(n) * g.out_plane() + oh * g.out_w + ow) * p.channels + c0;
        const int place = place_in_window(g, h, w, oh, ow);
        float d[V];
        detail::load_pack(dy + o, d);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          if (!max) sum[k] += d[k] * share;
          else if (winners[o + k] == place) sum[k] += d[k];
        }
      }
    detail::store_pack(dx + row * p.channels + c0, sum);
  }
}

// The packs of an NHWC tensor of `rows` rows: the widest pack of up to 16 bytes that divides the channels and the
// buffers' alignment.
PackIndex pack_index(const PoolShape& s, int64_t rows, std::initializer_list<const void*> buffers) {
  int vec = detail::pack_width(s.data, buffers);
  while (s.channels % vec) vec /= 2;
  const int64_t packs = rows * (s.channels / vec);
  if (packs >= FastDivide::kNumeratorLimit)
    throw JobFileError("pooling over " + std::to_string(rows * s.channels) + " NHWC values on the GPU: at most " +
                       "2^31 packs of channels; lower train.batch_size");
  return {packs, s.channels, vec, FastDivide(static_cast<uint32_t>(s.channels / vec))};
}

}  // namespace

std::size_t pool_saved_bytes(const PoolShape& s, PoolMode mode) {
  if (mode != PoolMode::max) return 0;
  return sizeof(uint16_t) * static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.channels) *
         static_cast<std::size_t>(s.out_h()) * static_cast<std::size_t>(s.out_w());
}

void pool_forward(const PoolShape& s, PoolMode mode, ActivationLayout layout, const void* x, void* y,
                  uint16_t* winners, Stream stream) {
  const int64_t planes = static_cast<int64_t>(s.batch) * s.channels;
  if (planes <= 0 || s.out_h() <= 0 || s.out_w() <= 0) return;
  if (mode == PoolMode::max && s.window > 255)  // the winner is kept as its place in the window, in 16 bits
    throw JobFileError("max pooling windows of " + std::to_string(s.window) + " on the GPU: at most 255");
  const Geometry g = geometry_of(s);
  if (layout == ActivationLayout::nhwc) {
    const PackIndex p = pack_index(s, static_cast<int64_t>(s.batch) * g.out_plane(), {x, y});
    detail::with_element(s.data, [&](auto t) {
      detail::with_pack_width(p.vec, [&](auto v) {
        using T = decltype(t);
        nhwc_forward_kernel<decltype(v)::value><<<detail::blocks_for(p.packs), detail::kThreads, 0, stream>>>(
            g, p, mode == PoolMode::max, static_cast<const T*>(x), static_cast<T*>(y), winners);
      });
    });
    RT_CHECK_LAUNCH();
    return;
  }
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    const Tiling tiles = tiling(planes, g.out_plane());
    forward_kernel<<<tiles.grid(), detail::kThreads, 0, stream>>>(g, tiles, mode == PoolMode::max,
                                                                  static_cast<const T*>(x), static_cast<T*>(y), winners);
  });
  RT_CHECK_LAUNCH();
}

void pool_backward(const PoolShape& s, PoolMode mode, ActivationLayout layout, const void* dy,
                   const uint16_t* winners, void* dx, Stream stream) {
  const int64_t planes = static_cast<int64_t>(s.batch) * s.channels;
  if (planes <= 0 || s.in_h <= 0 || s.in_w <= 0) return;
  const Geometry g = geometry_of(s);
  if (layout == ActivationLayout::nhwc) {
    const PackIndex p = pack_index(s, static_cast<int64_t>(s.batch) * g.in_plane(), {dy, dx});
    detail::with_element(s.data, [&](auto t) {
      detail::with_pack_width(p.vec, [&](auto v) {
        using T = decltype(t);
        nhwc_backward_kernel<decltype(v)::value><<<detail::blocks_for(p.packs), detail::kThreads, 0, stream>>>(
            g, p, mode == PoolMode::max, static_cast<const T*>(dy), winners, static_cast<T*>(dx));
      });
    });
    RT_CHECK_LAUNCH();
    return;
  }
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    const Tiling tiles = tiling(planes, g.in_plane());
    backward_kernel<<<tiles.grid(), detail::kThreads, 0, stream>>>(g, tiles, mode == PoolMode::max,
                                                                   static_cast<const T*>(dy), winners,
                                                                   static_cast<T*>(dx));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
