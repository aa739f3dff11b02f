// Owns the pooling kernels declared in pooling.h: forward one thread per output value, backward one per input value.
#include <cmath>

#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pooling.h"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;
using detail::load;
using detail::store;

struct Geometry {
  int in_h, in_w, out_h, out_w, window, stride, padding;
};

Geometry geometry_of(const PoolShape& s) {
  return {s.in_h, s.in_w, s.out_h(), s.out_w(), s.window, s.stride, s.padding};
}

template <class T>
__global__ void forward_kernel(int64_t outputs, Geometry g, bool max, const T* x, T* y, int32_t* winners) {
  const int64_t out_plane = static_cast<int64_t>(g.out_h) * g.out_w, in_plane = static_cast<int64_t>(g.in_h) * g.in_w;
  for (int64_t o = global_index(); o < outputs; o += grid_stride()) {
    const int64_t plane = o / out_plane;
    const int oh = static_cast<int>((o % out_plane) / g.out_w), ow = static_cast<int>(o % g.out_w);
    const T* xp = x + plane * in_plane;
    float best = -INFINITY, sum = 0.0f;
    int32_t winner = -1;
    for (int r = 0; r < g.window; ++r) {
      const int h = oh * g.stride - g.padding + r;
      if (h < 0 || h >= g.in_h) continue;
      for (int q = 0; q < g.window; ++q) {
        const int w = ow * g.stride - g.padding + q;
        if (w < 0 || w >= g.in_w) continue;
        const float v = load(xp + static_cast<int64_t>(h) * g.in_w + w);
        sum += v;
        if (winner < 0 || v > best) best = v, winner = h * g.in_w + w;
      }
    }
    if (max) {
      store(y + o, best);
      winners[o] = winner;
    } else {
      store(y + o, sum / static_cast<float>(g.window * g.window));
    }
  }
}

// The outputs whose window covers input row (or column) i: first..last, empty when first > last.
struct Cover {
  int first, last;
};
__device__ Cover cover(int i, int padding, int window, int stride, int outputs) {
  const int top = i + padding;  // position in the padded input
  const int first = top < window ? 0 : (top - window) / stride + 1;
  const int last = min(top / stride, outputs - 1);
  return {first, last};
}

template <class T>
__global__ void backward_kernel(int64_t inputs, Geometry g, bool max, const T* dy, const int32_t* winners, T* dx) {
  const int64_t out_plane = static_cast<int64_t>(g.out_h) * g.out_w, in_plane = static_cast<int64_t>(g.in_h) * g.in_w;
  const float share = 1.0f / static_cast<float>(g.window * g.window);
  for (int64_t i = global_index(); i < inputs; i += grid_stride()) {
    const int64_t plane = i / in_plane;
    const int at = static_cast<int>(i % in_plane), h = at / g.in_w, w = at % g.in_w;
    const Cover rows = cover(h, g.padding, g.window, g.stride, g.out_h);
    const Cover cols = cover(w, g.padding, g.window, g.stride, g.out_w);
    float sum = 0.0f;
    for (int oh = rows.first; oh <= rows.last; ++oh)
      for (int ow = cols.first; ow <= cols.last; ++ow) {
        const int64_t o = plane * out_plane + static_cast<int64_t>(oh) * g.out_w + ow;
        if (!max) sum += load(dy + o) * share;
        else if (winners[o] == at) sum += load(dy + o);
      }
    store(dx + i, sum);
  }
}

}  // namespace

std::size_t pool_saved_bytes(const PoolShape& s, PoolMode mode) {
  if (mode != PoolMode::max) return 0;
  return sizeof(int32_t) * static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.channels) *
         static_cast<std::size_t>(s.out_h()) * static_cast<std::size_t>(s.out_w());
}

void pool_forward(const PoolShape& s, PoolMode mode, const void* x, void* y, int32_t* winners, Stream stream) {
  const int64_t outputs = static_cast<int64_t>(s.batch) * s.channels * s.out_h() * s.out_w();
  if (outputs <= 0) return;
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    forward_kernel<<<detail::blocks_for(outputs), detail::kThreads, 0, stream>>>(
        outputs, geometry_of(s), mode == PoolMode::max, static_cast<const T*>(x), static_cast<T*>(y), winners);
  });
  RT_CHECK_LAUNCH();
}

void pool_backward(const PoolShape& s, PoolMode mode, const void* dy, const int32_t* winners, void* dx,
                   Stream stream) {
  const int64_t inputs = static_cast<int64_t>(s.batch) * s.channels * s.in_h * s.in_w;
  if (inputs <= 0) return;
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    backward_kernel<<<detail::blocks_for(inputs), detail::kThreads, 0, stream>>>(
        inputs, geometry_of(s), mode == PoolMode::max, static_cast<const T*>(dy), winners, static_cast<T*>(dx));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
