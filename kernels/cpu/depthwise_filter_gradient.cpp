// Owns the direct depthwise filter gradient declared in depthwise_filter_gradient.h.
#include "kernels/cpu/depthwise_filter_gradient.h"

#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

// The value of a stored element: fp32, or bf16 (the bits of a uint16_t), widened exactly.
double value(float v) { return v; }
double value(uint16_t v) { return bf16_to_float(v); }

// One channel's elements in an N x C x plane tensor blocked by `block` channels: element (n, position p) lies at
// n * image + p * step from the channel's first.
template <class T>
struct ChannelPlanes {
  const T* first;
  int64_t image, step;
};
template <class T>
ChannelPlanes<T> channel_planes(const void* t, int64_t channels, int64_t plane, int64_t block, int64_t c) {
  return {static_cast<const T*>(t) + (c / block) * plane * block + c % block, channels * plane, block};
}

// Channel c's R x S sums over the batch into taps[0, R x S), and its dy sum into taps[R x S].
template <class T>
void channel_sums(const Conv2dShape& s, const ChannelPlanes<T>& x, const ChannelPlanes<T>& dy,
                  std::vector<double>& taps) {
  const int oh = s.out_h(), ow = s.out_w(), r_count = s.kernel_h, s_count = s.kernel_w;
  taps.assign(static_cast<size_t>(r_count * s_count + 1), 0.0);
  double* const sums = taps.data();
  for (int64_t n = 0; n < s.batch; ++n) {
    const T* const xs = x.first + n * x.image;
    const T* const dys = dy.first + n * dy.image;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const double g = value(dys[(int64_t{oy} * ow + ox) * dy.step]);
        sums[r_count * s_count] += g;
        for (int r = 0; r < r_count; ++r) {
          const int iy = oy * s.stride - s.padding + r;
          if (iy < 0 || iy >= s.in_h) continue;
          const T* const row = xs + int64_t{iy} * s.in_w * x.step;
          for (int t = 0; t < s_count; ++t) {
            const int ix = ox * s.stride - s.padding + t;
            if (ix >= 0 && ix < s.in_w) sums[r * s_count + t] += g * value(row[int64_t{ix} * x.step]);
          }
        }
      }
  }
}

template <class T>
void filter_gradient(const Conv2dShape& s, const void* x, const void* dy, float* dw, float* dbias, int threads) {
  const int64_t in_plane = int64_t{s.in_h} * s.in_w, out_plane = int64_t{s.out_h()} * s.out_w();
  const int64_t weights = int64_t{s.kernel_h} * s.kernel_w;
  for_each_thread_run(threads, s.filters, [&](int64_t begin, int64_t end, int) {
    std::vector<double> taps;
    for (int64_t c = begin; c < end; ++c) {
      channel_sums(s, channel_planes<T>(x, s.in_channels, in_plane, s.in_block, c),
                   channel_planes<T>(dy, s.filters, out_plane, s.out_block, c), taps);
      for (int64_t k = 0; k < weights; ++k) dw[c * weights + k] += static_cast<float>(taps[static_cast<size_t>(k)]);
      if (dbias) dbias[c] += static_cast<float>(taps.back());
    }
  });
}

}  // namespace

bool depthwise_filter_gradient_takes(const Conv2dShape& s) {
  return (s.data == ElementType::f32 || s.data == ElementType::bf16) && s.groups > 1 && s.groups == s.in_channels &&
         s.groups == s.filters;
}

void depthwise_filter_gradient(const Conv2dShape& s, const void* x, const void* dy, float* dw, float* dbias,
                               int threads) {
  if (s.data == ElementType::bf16) return filter_gradient<uint16_t>(s, x, dy, dw, dbias, threads);
  filter_gradient<float>(s, x, dy, dw, dbias, threads);
}

}  // namespace ringtrain::kernels::cpu
