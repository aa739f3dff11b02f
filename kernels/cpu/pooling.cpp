// Owns max and average pooling on the CPU. The model's 2x2 stride-2 max pool has its own forward and backward
// loops (no window bounds to clip, windows that tile the plane); every other geometry goes through the clipped
// general loops.
#include "kernels/cpu/pooling.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstddef>

#include "common/error.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ringtrain::kernels::cpu {
namespace {

// Window rows/cols of output o that fall inside an input of `extent`: [lo, hi).
struct Span {
  int lo, hi;
};
Span window_span(int o, const PoolShape& s, int extent) {
  const int start = o * s.stride - s.padding;
  return {std::max(start, 0), std::min(start + s.window, extent)};
}

// One 2x2 window's maximum and the offset of its winner within the plane: a tournament (top pair, bottom pair,
// then the two winners) with the offset built by arithmetic on the comparison flags. A chain of ifs, or selects on
// the flags, compiled to data-dependent branches in the scalar tail, mispredicted half the time; with 7-output
// rows that tail is the whole row. Strict > with the earlier candidate kept on ties gives the first maximum in
// scan order, as the general loop does. a, b: the window's top row; c, d: its bottom row; `at`: a's offset.
struct WindowMax {
  float value;
  int32_t at;
};
inline WindowMax window_max(float a, float b, float c, float d, int32_t at, int w) {
  const int32_t right_top = b > a, right_bottom = d > c;
  const float top = b > a ? b : a, bottom = d > c ? d : c;
  const int32_t lower = bottom > top;
  return {bottom > top ? bottom : top, at + lower * w + right_top + lower * (right_bottom - right_top)};
}

// The tournament of maxpool_2x2_plane on B lanes at once (one vector per input position).
template <int B>
void maxpool_2x2_block_of(int w, int oh, int ow, const float* __restrict x, float* __restrict y, PooledStrides y_at,
                          int32_t* __restrict argmax, std::ptrdiff_t argmax_stride) {
  for (int i = 0; i < oh; ++i) {
    const int32_t row_base = 2 * i * w;
    for (int j = 0; j < ow; ++j) {
      const float* r0 = x + (std::ptrdiff_t{2 * i} * w + 2 * j) * B;
      const float* r1 = r0 + std::ptrdiff_t{w} * B;
      float best[B];
      int32_t won[B];
      for (int l = 0; l < B; ++l) {
        const WindowMax m = window_max(r0[l], r0[B + l], r1[l], r1[B + l], row_base + 2 * j, w);
        best[l] = m.value, won[l] = m.at;
      }
      const std::ptrdiff_t o = std::ptrdiff_t{i} * ow + j;
      if (y_at.lane == 1) {  // blocked: one vector
        for (int l = 0; l < B; ++l) y[o * y_at.position + l] = best[l];
      } else {
        for (int l = 0; l < B; ++l) y[l * y_at.lane + o * y_at.position] = best[l];
      }
      for (int l = 0; l < B; ++l) argmax[l * argmax_stride + o] = won[l];
    }
  }
}

}  // namespace

void maxpool_2x2_block(int w, int oh, int ow, int block, const float* x, float* y, PooledStrides y_at,
                       int32_t* argmax, std::ptrdiff_t argmax_stride) {
  switch (block) {
    case 8:
      return maxpool_2x2_block_of<8>(w, oh, ow, x, y, y_at, argmax, argmax_stride);
    case 16:
      return maxpool_2x2_block_of<16>(w, oh, ow, x, y, y_at, argmax, argmax_stride);
    case 32:
      return maxpool_2x2_block_of<32>(w, oh, ow, x, y, y_at, argmax, argmax_stride);
    case 64:
      return maxpool_2x2_block_of<64>(w, oh, ow, x, y, y_at, argmax, argmax_stride);
    default:
      throw Error(ExitCode::internal, fmt::format("no 2x2 max pool kernel for blocks of {} channels", block));
  }
}

#if defined(__AVX512F__)
// Rows of 8 to 16 windows (inputs up to 32 wide: conv1's 28 x 28) as one 16-lane vector per output row, the
// window's four candidates gathered from the two input rows by even/odd lane permutes. The same tournament and
// comparisons as window_max (ordered >, so a NaN never wins a comparison), hence the same maxima and winners; it
// runs the Fashion-MNIST model's first pool ~3x faster than the scalar loop (perf/results/2026-11-26-cpu-conv1-
// direct.md).
bool vector_rows(int ow) { return ow >= 8 && ow <= 16; }

__mmask16 first_lanes(int n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1u); }

// Input row r (2 * ow floats) split into its windows' left and right candidates, lanes 0..ow-1.
struct WindowPairs {
  __m512 left, right;
};
WindowPairs window_pairs(const float* r, int ow) {
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(2 * ow), r);
  const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(std::max(0, 2 * ow - 16)), r + 16);
  return {_mm512_permutex2var_ps(lo, evens, hi), _mm512_permutex2var_ps(lo, odds, hi)};
}

void maxpool_2x2_plane_vector(int w, int oh, int ow, const float* x, float* y, int32_t* argmax) {
  const __mmask16 lanes = first_lanes(ow);
  const __m512i column = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i one = _mm512_set1_epi32(1), width = _mm512_set1_epi32(w);
  for (int i = 0; i < oh; ++i) {
    const WindowPairs top_row = window_pairs(x + std::ptrdiff_t{2 * i} * w, ow);
    const WindowPairs bottom_row = window_pairs(x + std::ptrdiff_t{2 * i + 1} * w, ow);
    const __mmask16 right_top = _mm512_cmp_ps_mask(top_row.right, top_row.left, _CMP_GT_OQ);
    const __mmask16 right_bottom = _mm512_cmp_ps_mask(bottom_row.right, bottom_row.left, _CMP_GT_OQ);
    const __m512 top = _mm512_mask_blend_ps(right_top, top_row.left, top_row.right);
    const __m512 bottom = _mm512_mask_blend_ps(right_bottom, bottom_row.left, bottom_row.right);
    const __mmask16 lower = _mm512_cmp_ps_mask(bottom, top, _CMP_GT_OQ);
    // at = 2i * w + 2j, + 1 where the right candidate of the winning row won, + w where the bottom row won.
    __m512i at = _mm512_add_epi32(_mm512_set1_epi32(2 * i * w), column);
    const __mmask16 right = static_cast<__mmask16>((lower & right_bottom) | (~lower & right_top));
    at = _mm512_mask_add_epi32(at, right, at, one);
    at = _mm512_mask_add_epi32(at, lower, at, width);
    _mm512_mask_storeu_ps(y + std::ptrdiff_t{i} * ow, lanes, _mm512_mask_blend_ps(lower, top, bottom));
    _mm512_mask_storeu_epi32(argmax + std::ptrdiff_t{i} * ow, lanes, at);
  }
}

// The tiled backward on such rows: each window's gradient at its winner, zero (+0) at the other three, written
// as two interleaved rows of 2 * ow.
void maxpool_2x2_backward_rows_vector(int w, int oh, int ow, const float* dy, const int32_t* argmax, float* dx) {
  const __mmask16 lanes = first_lanes(ow), low_half = first_lanes(2 * ow),
                  high_half = first_lanes(std::max(0, 2 * ow - 16));
  const __m512i column = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i interleave_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i interleave_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i one = _mm512_set1_epi32(1), width = _mm512_set1_epi32(w), width_one = _mm512_set1_epi32(w + 1);
  for (int i = 0; i < oh; ++i) {
    const __m512 g = _mm512_maskz_loadu_ps(lanes, dy + std::ptrdiff_t{i} * ow);
    const __m512i at = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(lanes, argmax + std::ptrdiff_t{i} * ow),
                                        _mm512_add_epi32(_mm512_set1_epi32(2 * i * w), column));
    const __m512 top_left = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, _mm512_setzero_si512()), g);
    const __m512 top_right = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, one), g);
    const __m512 bottom_left = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, width), g);
    const __m512 bottom_right = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, width_one), g);
    float* const d0 = dx + std::ptrdiff_t{2 * i} * w;
    float* const d1 = d0 + w;
    _mm512_mask_storeu_ps(d0, low_half, _mm512_permutex2var_ps(top_left, interleave_lo, top_right));
    _mm512_mask_storeu_ps(d0 + 16, high_half, _mm512_permutex2var_ps(top_left, interleave_hi, top_right));
    _mm512_mask_storeu_ps(d1, low_half, _mm512_permutex2var_ps(bottom_left, interleave_lo, bottom_right));
    _mm512_mask_storeu_ps(d1 + 16, high_half, _mm512_permutex2var_ps(bottom_left, interleave_hi, bottom_right));
    if (w > 2 * ow) d0[w - 1] = 0.0f, d1[w - 1] = 0.0f;
  }
}
#endif

void maxpool_2x2_plane(int w, int oh, int ow, const float* __restrict x, float* __restrict y,
                       int32_t* __restrict argmax) {
#if defined(__AVX512F__)
  if (vector_rows(ow)) return maxpool_2x2_plane_vector(w, oh, ow, x, y, argmax);
#endif
  for (int i = 0; i < oh; ++i) {
    const float* r0 = x + std::ptrdiff_t{2 * i} * w;
    const float* r1 = r0 + w;
    float* yr = y + std::ptrdiff_t{i} * ow;
    int32_t* ar = argmax + std::ptrdiff_t{i} * ow;
    const int32_t row_base = 2 * i * w;
    for (int j = 0; j < ow; ++j) {
      const WindowMax m = window_max(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1], row_base + 2 * j, w);
      yr[j] = m.value, ar[j] = m.at;
    }
  }
}

// Backward of the 2x2/2 pool, one plane: the windows tile the plane, so on rows wide enough every covered dx element
// is written exactly once (the gradient where the argmax points, zero elsewhere) in one sequential pass, with no
// separate zero fill and no scattered read-modify-write. An odd last row or column belongs to no window and is
// zeroed.
void maxpool_2x2_backward_plane(int h, int w, int oh, int ow, const float* __restrict dy,
                                const int32_t* __restrict argmax, float* __restrict dx) {
  // The tiled pass wins when a row holds at least one 8-wide vector of outputs (28x28 -> 14x14 in the model:
  // 0.61 ms against 0.88 per step); on 7-output rows it runs entirely in the scalar tail and loses to
  // fill + scatter (0.57 ms against 0.45), so those take that (maxpool_2x2_winner_gradient says which).
  if (ow < 8) {
    std::fill(dx, dx + std::ptrdiff_t{h} * w, 0.0f);
    for (std::ptrdiff_t o = 0; o < std::ptrdiff_t{oh} * ow; ++o) dx[argmax[o]] += dy[o];
    return;
  }
#if defined(__AVX512F__)
  if (vector_rows(ow)) {
    maxpool_2x2_backward_rows_vector(w, oh, ow, dy, argmax, dx);
    if (h > 2 * oh) std::fill(dx + std::ptrdiff_t{h - 1} * w, dx + std::ptrdiff_t{h} * w, 0.0f);
    return;
  }
#endif
  for (int i = 0; i < oh; ++i) {
    float* __restrict d0 = dx + std::ptrdiff_t{2 * i} * w;
    float* __restrict d1 = d0 + w;
    const float* g = dy + std::ptrdiff_t{i} * ow;
    const int32_t* a = argmax + std::ptrdiff_t{i} * ow;
    const int32_t row_base = 2 * i * w;
    for (int j = 0; j < ow; ++j) {
      // Selection by bit masks: GCC compiled `at == 0 ? g : 0` into branches in the scalar tail, which
      // mispredict on every other output.
      const int32_t at = a[j] - row_base - 2 * j;  // 0, 1, w or w + 1
      const uint32_t bits = std::bit_cast<uint32_t>(g[j]);
      d0[2 * j] = std::bit_cast<float>(bits & -static_cast<uint32_t>(at == 0));
      d0[2 * j + 1] = std::bit_cast<float>(bits & -static_cast<uint32_t>(at == 1));
      d1[2 * j] = std::bit_cast<float>(bits & -static_cast<uint32_t>(at == w));
      d1[2 * j + 1] = std::bit_cast<float>(bits & -static_cast<uint32_t>(at == w + 1));
    }
    if (w > 2 * ow) d0[w - 1] = 0.0f, d1[w - 1] = 0.0f;
  }
  if (h > 2 * oh) std::fill(dx + std::ptrdiff_t{h - 1} * w, dx + std::ptrdiff_t{h} * w, 0.0f);
}

void maxpool_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  const int oh = s.out_h(), ow = s.out_w();
  const std::ptrdiff_t in_plane = std::ptrdiff_t{s.in_h} * s.in_w, out_plane = std::ptrdiff_t{oh} * ow;
  const std::ptrdiff_t planes = std::ptrdiff_t{s.batch} * s.channels;
  const bool fast = s.window == 2 && s.stride == 2 && s.padding == 0;
  for (std::ptrdiff_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in_plane;
    float* yp = y + p * out_plane;
    int32_t* ap = argmax + p * out_plane;
    if (fast) {
      maxpool_2x2_plane(s.in_w, oh, ow, xp, yp, ap);
      continue;
    }
    for (int i = 0; i < oh; ++i) {
      const Span rows = window_span(i, s, s.in_h);
      for (int j = 0; j < ow; ++j) {
        const Span cols = window_span(j, s, s.in_w);
        if (rows.lo >= rows.hi || cols.lo >= cols.hi) {  // a window of padding only
          yp[std::ptrdiff_t{i} * ow + j] = 0.0f;
          ap[std::ptrdiff_t{i} * ow + j] = -1;
          continue;
        }
        // Start from the window's first element and keep the running maximum with selects, not branches:
        // "is this one larger" is a coin toss on real data, and as a branch it cost ResNet's 3x3/2 pool as
        // much time as a 3x3 convolution over the same plane. Strict > keeps the first maximum in scan order.
        int32_t at = rows.lo * s.in_w + cols.lo;
        float best = xp[at];
        for (int r = rows.lo; r < rows.hi; ++r)
          for (int c = cols.lo; c < cols.hi; ++c) {
            const int32_t here = r * s.in_w + c;
            const float v = xp[here];
            const bool larger = v > best;
            best = larger ? v : best;
            at = larger ? here : at;
          }
        yp[std::ptrdiff_t{i} * ow + j] = best;
        ap[std::ptrdiff_t{i} * ow + j] = at;
      }
    }
  }
}

void maxpool_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx) {
  const std::ptrdiff_t in_plane = std::ptrdiff_t{s.in_h} * s.in_w, out_plane = std::ptrdiff_t{s.out_h()} * s.out_w();
  const std::ptrdiff_t planes = std::ptrdiff_t{s.batch} * s.channels;
  if (s.window == 2 && s.stride == 2 && s.padding == 0) {
    for (std::ptrdiff_t p = 0; p < planes; ++p)
      maxpool_2x2_backward_plane(s.in_h, s.in_w, s.out_h(), s.out_w(), dy + p * out_plane, argmax + p * out_plane,
                                 dx + p * in_plane);
    return;
  }
  std::fill(dx, dx + planes * in_plane, 0.0f);
  for (std::ptrdiff_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * in_plane;
    const float* dyp = dy + p * out_plane;
    const int32_t* ap = argmax + p * out_plane;
    // += because overlapping windows (stride < window) can pick the same input twice.
    for (std::ptrdiff_t o = 0; o < out_plane; ++o)
      if (ap[o] >= 0) dxp[ap[o]] += dyp[o];
  }
}

void avgpool_forward(const PoolShape& s, const float* x, float* y) {
  const int oh = s.out_h(), ow = s.out_w();
  const std::ptrdiff_t in_plane = std::ptrdiff_t{s.in_h} * s.in_w, out_plane = std::ptrdiff_t{oh} * ow;
  const std::ptrdiff_t planes = std::ptrdiff_t{s.batch} * s.channels;
  const float inv_area = 1.0f / static_cast<float>(s.window * s.window);  // padding counts (see header)
  for (std::ptrdiff_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in_plane;
    float* yp = y + p * out_plane;
    for (int i = 0; i < oh; ++i) {
      const Span rows = window_span(i, s, s.in_h);
      for (int j = 0; j < ow; ++j) {
        const Span cols = window_span(j, s, s.in_w);
        float sum = 0.0f;
        for (int r = rows.lo; r < rows.hi; ++r) {
          const float* row = xp + std::ptrdiff_t{r} * s.in_w;
          for (int c = cols.lo; c < cols.hi; ++c) sum += row[c];
        }
        yp[std::ptrdiff_t{i} * ow + j] = sum * inv_area;
      }
    }
  }
}

void avgpool_backward(const PoolShape& s, const float* dy, float* dx) {
  const int oh = s.out_h(), ow = s.out_w();
  const std::ptrdiff_t in_plane = std::ptrdiff_t{s.in_h} * s.in_w, out_plane = std::ptrdiff_t{oh} * ow;
  const std::ptrdiff_t planes = std::ptrdiff_t{s.batch} * s.channels;
  const float inv_area = 1.0f / static_cast<float>(s.window * s.window);
  std::fill(dx, dx + planes * in_plane, 0.0f);
  for (std::ptrdiff_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * in_plane;
    const float* dyp = dy + p * out_plane;
    for (int i = 0; i < oh; ++i) {
      const Span rows = window_span(i, s, s.in_h);
      for (int j = 0; j < ow; ++j) {
        const Span cols = window_span(j, s, s.in_w);
        const float g = dyp[std::ptrdiff_t{i} * ow + j] * inv_area;
        for (int r = rows.lo; r < rows.hi; ++r) {
          float* row = dxp + std::ptrdiff_t{r} * s.in_w;
          for (int c = cols.lo; c < cols.hi; ++c) row[c] += g;
        }
      }
    }
  }
}

}  // namespace ringtrain::kernels::cpu
