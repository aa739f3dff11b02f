// DROPPED (kept as the record of what was measured): a direct one-channel convolution for conv1 (5x5, 1 -> 32 on
// 28 x 28), wired into kernels/cpu/conv2d.cpp for in_channels == 1 and compiled with -ffp-contract=fast. Correct
// (the conv kernel tests' finite differences and the layer tests passed) but not faster: alternated with head's
// im2col + OpenBLAS on one core (BM_ConvOurs/conv1_*), forward 794-822 us against 764-821, filter gradient
// 1406-1464 us against 895-945. See perf/results/2026-11-26-cpu-nhwc.md.
// Owns the direct one-channel convolution declared in conv2d_single_channel.h. Vectors are GCC's 16-float vector
// type (one AVX-512 register, two AVX2 ones); this file is compiled with -ffp-contract=fast so a multiply-add is one
// fused instruction (kernels/CMakeLists.txt).
#include "kernels/cpu/conv2d_single_channel.h"

#include <algorithm>
#include <cstring>

namespace ringtrain::kernels::cpu {
namespace {

constexpr int kLanes = 16, kFilterGroup = 8;
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The padded image: row i holds input row i - padding at columns padding.., zeros around; each row is `stride`
// floats, enough for a vector load at any tap of any output vector.
struct Padded {
  int vectors = 0;          // output vectors per row
  std::ptrdiff_t stride = 0;
  int rows = 0;
};
Padded padded_geometry(const Conv2dShape& s) {
  const int vectors = (s.out_w() + kLanes - 1) / kLanes;
  return {vectors, std::ptrdiff_t{vectors} * kLanes + s.kernel_w - 1, s.out_h() + s.kernel_h - 1};
}

void pad_image(const Conv2dShape& s, const Padded& p, const float* x, std::vector<float>& out) {
  out.assign(static_cast<std::size_t>(p.rows * p.stride), 0.0f);
  for (int i = 0; i < s.in_h; ++i)
    std::copy_n(x + std::ptrdiff_t{i} * s.in_w, s.in_w, out.data() + (i + s.padding) * p.stride + s.padding);
}

template <int R>
void forward_rows(const Conv2dShape& s, const Padded& p, const float* xp, const float* w, const float* bias,
                  float* y) {
  const int ow = s.out_w();
  const std::ptrdiff_t plane = std::ptrdiff_t{s.out_h()} * ow;
  for (int k0 = 0; k0 < s.filters; k0 += kFilterGroup)
    for (int oh = 0; oh < s.out_h(); ++oh)
      for (int v = 0; v < p.vectors; ++v) {
        Vec acc[kFilterGroup];
        for (int j = 0; j < kFilterGroup; ++j) acc[j] = Vec{} + (bias ? bias[k0 + j] : 0.0f);
        for (int kh = 0; kh < R; ++kh)
          for (int kw = 0; kw < R; ++kw) {
            const Vec xv = load(xp + (oh + kh) * p.stride + v * kLanes + kw);
            for (int j = 0; j < kFilterGroup; ++j) acc[j] += w[((k0 + j) * R + kh) * R + kw] * xv;
          }
        const int lanes = std::min(kLanes, ow - v * kLanes);
        for (int j = 0; j < kFilterGroup; ++j)
          std::memcpy(y + (k0 + j) * plane + std::ptrdiff_t{oh} * ow + v * kLanes, &acc[j], lanes * sizeof(float));
      }
}

// Each output-gradient row of filter k copied into whole vectors, zero past the row's end, then every tap's
// products with the padded image added into its lane sums, partials[(k * R * R + tap) * kLanes + lane].
template <int R>
void filter_rows(const Conv2dShape& s, const Padded& p, const float* xp, const float* dy, std::vector<float>& rows,
                 float* partials) {
  const int ow = s.out_w();
  const std::ptrdiff_t plane = std::ptrdiff_t{s.out_h()} * ow, row_floats = std::ptrdiff_t{p.vectors} * kLanes;
  rows.assign(static_cast<std::size_t>(s.out_h() * row_floats), 0.0f);
  for (int k = 0; k < s.filters; ++k) {
    for (int oh = 0; oh < s.out_h(); ++oh) std::copy_n(dy + k * plane + oh * ow, ow, rows.data() + oh * row_floats);
    Vec acc[R * R] = {};
    for (int oh = 0; oh < s.out_h(); ++oh)
      for (int v = 0; v < p.vectors; ++v) {
        const Vec g = load(rows.data() + oh * row_floats + v * kLanes);
        for (int kh = 0; kh < R; ++kh)
          for (int kw = 0; kw < R; ++kw) acc[kh * R + kw] += g * load(xp + (oh + kh) * p.stride + v * kLanes + kw);
      }
    float* const sums = partials + std::ptrdiff_t{k} * R * R * kLanes;
    for (int t = 0; t < R * R; ++t) {
      Vec total = load(sums + t * kLanes) + acc[t];
      std::memcpy(sums + t * kLanes, &total, sizeof total);
    }
  }
}

}  // namespace

bool runs_single_channel_direct(const Conv2dShape& s) {
  return s.in_channels == 1 && s.stride == 1 && s.kernel_h == s.kernel_w && (s.kernel_h == 3 || s.kernel_h == 5) &&
         s.filters % kFilterGroup == 0 && s.out_h() > 0 && s.out_w() > 0;
}

void single_channel_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y,
                            SingleChannelScratch& scratch) {
  const Padded p = padded_geometry(s);
  pad_image(s, p, x, scratch.image);
  if (s.kernel_h == 3) return forward_rows<3>(s, p, scratch.image.data(), w, bias, y);
  forward_rows<5>(s, p, scratch.image.data(), w, bias, y);
}

SingleChannelFilterGradient::SingleChannelFilterGradient(const Conv2dShape& s, SingleChannelScratch& scratch)
    : s_(s), scratch_(scratch) {
  scratch_.partials.assign(static_cast<std::size_t>(s.filters * s.kernel_h * s.kernel_w * kLanes), 0.0f);
}

void SingleChannelFilterGradient::add(const float* x, const float* dy) {
  const Padded p = padded_geometry(s_);
  pad_image(s_, p, x, scratch_.image);
  if (s_.kernel_h == 3) return filter_rows<3>(s_, p, scratch_.image.data(), dy, scratch_.rows, scratch_.partials.data());
  filter_rows<5>(s_, p, scratch_.image.data(), dy, scratch_.rows, scratch_.partials.data());
}

void SingleChannelFilterGradient::finish(float* dw) const {
  const std::ptrdiff_t taps = std::ptrdiff_t{s_.filters} * s_.kernel_h * s_.kernel_w;
  for (std::ptrdiff_t t = 0; t < taps; ++t) {
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += scratch_.partials[static_cast<std::size_t>(t * kLanes + l)];
    dw[t] += sum;
  }
}

}  // namespace ringtrain::kernels::cpu
