// Owns the direct few-channel convolution declared in conv2d_direct.h. Register blocking, measured on the
// Fashion-MNIST conv1 (one core): the forward keeps 2 output vectors x 8 filters in 16 accumulators (3 x 8, 4 x 4,
// 6 x 4 and 2 x 16 were no faster or slower); the filter gradient keeps a kernel row's 5 taps x 4 filters (3 taps
// x 8 filters for 3x3) across the whole plane and adds them into per-lane sums once per image.
#include "kernels/cpu/conv2d_direct.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "common/error.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ringtrain::kernels::cpu {
namespace {

constexpr int kLanes = 16;
constexpr int kForwardFilters = kDirectFilterMultiple;  // filters per forward block

// Sizes of one image's passes, derived once per call.
struct DirectGeometry {
  int channels, filters, kh, kw, pad, h, w, oh, ow;
  std::ptrdiff_t plane;     // OH x OW outputs per filter
  int full_vectors;         // whole vectors of 16 outputs in a plane
  int tail;                 // outputs in the last, partial vector (0: none)
  int copy_rows;            // OH + KH - 1: the rows a kernel column's taps read
  std::ptrdiff_t copy;      // floats per shifted copy, with a vector of slack so a tail load stays inside
  int taps;                 // C x KH x KW

  explicit DirectGeometry(const Conv2dShape& s)
      : channels(s.in_channels), filters(s.filters), kh(s.kernel_h), kw(s.kernel_w), pad(s.padding), h(s.in_h),
        w(s.in_w), oh(s.out_h()), ow(s.out_w()) {
    plane = std::ptrdiff_t{oh} * ow;
    full_vectors = static_cast<int>(plane / kLanes);
    tail = static_cast<int>(plane % kLanes);
    copy_rows = oh + kh - 1;
    copy = std::ptrdiff_t{copy_rows} * ow + kLanes;
    taps = channels * kh * kw;
  }
  // The copy of input channel c shifted by kernel column j.
  std::ptrdiff_t copy_at(int c, int j) const { return (std::ptrdiff_t{c} * kw + j) * copy; }
};

// copies[c][j][i][o] = x[c][i - pad][o + j - pad], zero outside the image, for rows i < copy_rows and o < OW.
void shift_image(const DirectGeometry& g, const float* x, float* copies) {
  std::fill(copies, copies + g.copy_at(g.channels, 0), 0.0f);
  for (int c = 0; c < g.channels; ++c)
    for (int j = 0; j < g.kw; ++j) {
      float* const dst = copies + g.copy_at(c, j);
      const int lo = std::clamp(g.pad - j, 0, g.ow), hi = std::clamp(g.w + g.pad - j, lo, g.ow);
      for (int i = 0; i < g.copy_rows; ++i) {
        const int row = i - g.pad;
        if (row < 0 || row >= g.h || lo >= hi) continue;
        std::memcpy(dst + std::ptrdiff_t{i} * g.ow + lo, x + (std::ptrdiff_t{c} * g.h + row) * g.w + lo + j - g.pad,
                    sizeof(float) * static_cast<std::size_t>(hi - lo));
      }
    }
}

#if defined(__AVX512F__)

__mmask16 lanes_mask(int lanes) { return static_cast<__mmask16>((1u << lanes) - 1u); }

// The forward's per-tap reads: tap t of output positions p.. is at copies + offsets[t] + p; filter block b's weight
// for tap t and filter k0 + f at weights[(b * taps + t) * 8 + f] (broadcast one after another).
constexpr int kMaxTaps = 4 * 5 * 5;
struct TapReads {
  std::array<std::ptrdiff_t, kMaxTaps> offsets{};
  const float* weights = nullptr;
};

// NV output vectors from position v0 of filters k0..k0+7; Masked: the last of them only `mask`'s lanes (a masked
// load costs more than a plain one: the filter gradient ran 15 % slower with every load masked).
template <int NV, bool Masked>
void forward_block(const DirectGeometry& g, const TapReads& reads, const float* copies, const float* bias, int k0,
                   int v0, __mmask16 mask, float* y) {
  __m512 acc[kForwardFilters][NV];
#pragma GCC unroll 8
  for (auto& filter : acc)
#pragma GCC unroll 2
    for (auto& a : filter) a = _mm512_setzero_ps();
  const std::ptrdiff_t at = std::ptrdiff_t{v0} * kLanes;
  const float* wt = reads.weights + std::ptrdiff_t{k0} * g.taps;
  for (int t = 0; t < g.taps; ++t, wt += kForwardFilters) {
    const float* const src = copies + reads.offsets[static_cast<std::size_t>(t)] + at;
    __m512 xv[NV];
#pragma GCC unroll 2
    for (int v = 0; v + 1 < NV; ++v) xv[v] = _mm512_loadu_ps(src + v * kLanes);
    const float* const last = src + (NV - 1) * kLanes;
    xv[NV - 1] = Masked ? _mm512_maskz_loadu_ps(mask, last) : _mm512_loadu_ps(last);
#pragma GCC unroll 8
    for (int f = 0; f < kForwardFilters; ++f) {
      const __m512 wv = _mm512_set1_ps(wt[f]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[f][v] = _mm512_fmadd_ps(wv, xv[v], acc[f][v]);
    }
  }
#pragma GCC unroll 8
  for (int f = 0; f < kForwardFilters; ++f) {
    float* const dst = y + (k0 + f) * g.plane + at;
    const __m512 b = _mm512_set1_ps(bias ? bias[k0 + f] : 0.0f);
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 out = bias ? _mm512_add_ps(acc[f][v], b) : acc[f][v];
      if (Masked && v + 1 == NV)
        _mm512_mask_storeu_ps(dst + v * kLanes, mask, out);
      else
        _mm512_storeu_ps(dst + v * kLanes, out);
    }
  }
}

// One kernel row r of input channel c, filters k0..k0+NF-1: each tap's products over the whole plane, kept in
// lanes, added into lane_sums[((k * taps) + tap) * 16 + lane].
template <int NF, int KW>
void filter_row(const DirectGeometry& g, const float* copies, const float* dy, int k0, int c, int r,
                float* lane_sums) {
  __m512 acc[NF][KW];
#pragma GCC unroll 8
  for (auto& filter : acc)
#pragma GCC unroll 5
    for (auto& a : filter) a = _mm512_setzero_ps();
  const float* src[KW];
#pragma GCC unroll 5
  for (int j = 0; j < KW; ++j) src[j] = copies + g.copy_at(c, j) + std::ptrdiff_t{r} * g.ow;
  const float* dys[NF];
#pragma GCC unroll 8
  for (int f = 0; f < NF; ++f) dys[f] = dy + (k0 + f) * g.plane;
  const auto add = [&](std::ptrdiff_t at, __mmask16 mask, auto masked) {
    __m512 xv[KW];
#pragma GCC unroll 5
    for (int j = 0; j < KW; ++j)
      xv[j] = masked ? _mm512_maskz_loadu_ps(mask, src[j] + at) : _mm512_loadu_ps(src[j] + at);
#pragma GCC unroll 8
    for (int f = 0; f < NF; ++f) {
      const __m512 gv = masked ? _mm512_maskz_loadu_ps(mask, dys[f] + at) : _mm512_loadu_ps(dys[f] + at);
#pragma GCC unroll 5
      for (int j = 0; j < KW; ++j) acc[f][j] = _mm512_fmadd_ps(gv, xv[j], acc[f][j]);
    }
  };
  for (int v = 0; v < g.full_vectors; ++v) add(std::ptrdiff_t{v} * kLanes, 0xFFFF, std::false_type{});
  if (g.tail) add(std::ptrdiff_t{g.full_vectors} * kLanes, lanes_mask(g.tail), std::true_type{});
  const int first_tap = (c * g.kh + r) * KW;
#pragma GCC unroll 8
  for (int f = 0; f < NF; ++f)
#pragma GCC unroll 5
    for (int j = 0; j < KW; ++j) {
      float* const sums = lane_sums + ((std::ptrdiff_t{k0} + f) * g.taps + first_tap + j) * kLanes;
      _mm512_storeu_ps(sums, _mm512_add_ps(_mm512_loadu_ps(sums), acc[f][j]));
    }
}

template <int NF, int KW>
void filter_image(const DirectGeometry& g, const float* copies, const float* dy, float* lane_sums, FilterRange f) {
  for (int k0 = f.first; k0 < f.end; k0 += NF)
    for (int c = 0; c < g.channels; ++c)
      for (int r = 0; r < g.kh; ++r) filter_row<NF, KW>(g, copies, dy, k0, c, r, lane_sums);
}

#endif

}  // namespace

bool conv2d_direct_takes(const Conv2dShape& s) {
#if defined(__AVX512F__)
  const bool square_3_or_5 = s.kernel_h == s.kernel_w && (s.kernel_h == 3 || s.kernel_h == 5);
  return s.groups == 1 && s.stride == 1 && s.in_channels >= 1 && s.in_channels <= 4 && square_3_or_5 &&
         s.padding >= 0 && s.padding < s.kernel_h && s.filters > 0 && s.filters % kForwardFilters == 0 &&
         s.out_h() > 0 && s.out_w() > 0 && s.in_block == 1 && s.out_block == 1;
#else
  (void)s;
  return false;
#endif
}

std::size_t conv2d_direct_copy_floats(const Conv2dShape& s) {
  const DirectGeometry g(s);
  return static_cast<std::size_t>(g.copy_at(g.channels, 0));
}

std::size_t conv2d_direct_lane_sum_floats(const Conv2dShape& s) {
  return static_cast<std::size_t>(s.weight_elements()) * kLanes;
}

void conv2d_direct_prepare_weights(const Conv2dShape& s, const float* w, float* weights) {
  const DirectGeometry g(s);
  for (int k0 = 0; k0 < g.filters; k0 += kForwardFilters)
    for (int t = 0; t < g.taps; ++t)
      for (int f = 0; f < kForwardFilters; ++f)
        weights[(std::ptrdiff_t{k0} * g.taps + std::ptrdiff_t{t} * kForwardFilters) + f] =
            w[std::ptrdiff_t{k0 + f} * g.taps + t];
}

void conv2d_direct_forward_image(const Conv2dShape& s, const float* x, const float* weights, const float* bias,
                                 float* y, float* copies) {
#if defined(__AVX512F__)
  const DirectGeometry g(s);
  shift_image(g, x, copies);
  TapReads reads;
  reads.weights = weights;
  int t = 0;
  for (int c = 0; c < g.channels; ++c)
    for (int r = 0; r < g.kh; ++r)
      for (int j = 0; j < g.kw; ++j) reads.offsets[static_cast<std::size_t>(t++)] = g.copy_at(c, j) + r * g.ow;
  const int vectors = g.full_vectors + (g.tail ? 1 : 0);
  const __mmask16 last = g.tail ? lanes_mask(g.tail) : __mmask16{0xFFFF};
  for (int k0 = 0; k0 < g.filters; k0 += kForwardFilters) {
    int v = 0;
    for (; v + 2 < vectors; v += 2) forward_block<2, false>(g, reads, copies, bias, k0, v, 0xFFFF, y);
    if (vectors - v == 2) forward_block<2, true>(g, reads, copies, bias, k0, v, last, y);
    if (vectors - v == 1) forward_block<1, true>(g, reads, copies, bias, k0, v, last, y);
  }
#else
  (void)x, (void)weights, (void)bias, (void)y, (void)copies;
  throw Error(ExitCode::internal, fmt::format("direct convolution called for {} input channels in a build "
                                              "without AVX-512", s.in_channels));
#endif
}

void conv2d_direct_filter_start(const Conv2dShape& s, float* lane_sums) {
  std::fill(lane_sums, lane_sums + conv2d_direct_lane_sum_floats(s), 0.0f);
}

void conv2d_direct_filter_add_image(const Conv2dShape& s, const float* x, const float* dy, float* copies,
                                    float* lane_sums, FilterRange filters) {
#if defined(__AVX512F__)
  const DirectGeometry g(s);
  shift_image(g, x, copies);
  if (g.kw == 5) return filter_image<4, 5>(g, copies, dy, lane_sums, filters);
  filter_image<8, 3>(g, copies, dy, lane_sums, filters);
#else
  (void)x, (void)dy, (void)copies, (void)lane_sums, (void)filters;
  throw Error(ExitCode::internal, fmt::format("direct convolution called for {} input channels in a build "
                                              "without AVX-512", s.in_channels));
#endif
}

void conv2d_direct_filter_finish(const Conv2dShape& s, const float* lane_sums, float* dw) {
  const int64_t weights = s.weight_elements();
  for (int64_t t = 0; t < weights; ++t) {
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += lane_sums[t * kLanes + l];
    dw[t] += sum;
  }
}

}  // namespace ringtrain::kernels::cpu
