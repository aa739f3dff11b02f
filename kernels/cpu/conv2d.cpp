// Owns CPU convolution: im2col / col2im lowering onto the tuned sgemm, one image at a time, and the routing of
// few-channel stride-1 layers to the direct kernels (conv2d_direct.h) where those measured faster. A grouped
// convolution is G such products per image, each over its group's channels and filters (the weights of group i are
// rows i*K/G.. of the K x C/G*R*S matrix).
//
// Per-image GEMMs rather than one whole-batch GEMM: for the Fashion-MNIST shapes OpenBLAS (1 thread, this
// EPYC) already ran the per-image products at 79-83 GFLOP/s (64x196x800 forward, 64x800x196 filter gradient)
// and 66-71 (800x196x64 data gradient) against 90 for 1024^3, and the whole-batch forms were no faster
// (64x12544x800: 65-76; 64x800x12544: 71-78; 800x12544x64: 64-72) while needing a 40 MB column buffer and a
// scatter back to NCHW. The per-image column buffer (627 KB for the second conv) stays in L2/L3 between
// im2col and the GEMM that reads it. perf/bench_kernels_cpu.cpp (BM_SgemmModel) re-measures both forms.
#include "kernels/cpu/conv2d.h"

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/conv2d_direct.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

// Derived sizes of one convolution, computed once per call; c, k and crs are one group's.
struct Geometry {
  int c, h, w, k, r, s, stride, pad, oh, ow, groups, filters;
  std::ptrdiff_t in_plane, out_plane, in_image, out_image, crs, group_in, group_out;
  bool pointwise;  // 1x1, stride 1, no padding: the input image already is the column matrix
  bool same_width; // stride 1 and ow == w: an im2col row is the input plane shifted by a constant offset

  explicit Geometry(const Conv2dShape& sh)
      : c(sh.group_channels()), h(sh.in_h), w(sh.in_w), k(sh.group_filters()), r(sh.kernel_h), s(sh.kernel_w),
        stride(sh.stride), pad(sh.padding), oh(sh.out_h()), ow(sh.out_w()), groups(sh.groups), filters(sh.filters) {
    in_plane = std::ptrdiff_t{h} * w;
    out_plane = std::ptrdiff_t{oh} * ow;
    group_in = in_plane * c;
    group_out = out_plane * k;
    in_image = group_in * groups;
    out_image = out_plane * filters;
    crs = std::ptrdiff_t{c} * r * s;
    pointwise = r == 1 && s == 1 && stride == 1 && pad == 0;
    same_width = stride == 1 && ow == w;
  }
};

// Smallest o >= 0 with o * stride + offset >= 0 (offset = kernel tap - padding).
int first_valid(int offset, int stride) { return offset >= 0 ? 0 : (-offset + stride - 1) / stride; }
// Smallest o with o * stride + offset >= extent, i.e. one past the last output that reads inside the input.
int end_valid(int offset, int extent, int stride, int outputs) {
  const int e = extent - offset <= 0 ? 0 : (extent - offset + stride - 1) / stride;
  return std::clamp(e, 0, outputs);
}

// Zeroes columns [0, ow_lo) and [ow_hi, ow) of rows [oh_lo, oh_hi) of one im2col row. Column-major on
// purpose: there are at most a few such columns, and per-row fills of 1-2 floats became memset calls that
// cost more than the whole contiguous copy.
void clear_wrapped_columns(const Geometry& g, int oh_lo, int oh_hi, int ow_lo, int ow_hi, float* col) {
  for (int q = 0; q < ow_lo; ++q)
    for (int o = oh_lo; o < oh_hi; ++o) col[std::ptrdiff_t{o} * g.ow + q] = 0.0f;
  for (int q = ow_hi; q < g.ow; ++q)
    for (int o = oh_lo; o < oh_hi; ++o) col[std::ptrdiff_t{o} * g.ow + q] = 0.0f;
}

// col[(c*R + r)*S + s][oh*OW + ow] = x[c][oh*stride + r - pad][ow*stride + s - pad], zero outside the image; x is
// one group's channels.
void im2col(const Geometry& g, const float* x, float* col) {
  for (int c = 0; c < g.c; ++c) {
    const float* plane = x + c * g.in_plane;
    for (int r = 0; r < g.r; ++r) {
      const int dh = r - g.pad;
      const int oh_lo = std::min(first_valid(dh, g.stride), g.oh), oh_hi = std::max(end_valid(dh, g.h, g.stride, g.oh), oh_lo);
      for (int s = 0; s < g.s; ++s, col += g.out_plane) {
        const int dw = s - g.pad;
        const int ow_lo = std::min(first_valid(dw, g.stride), g.ow), ow_hi = std::max(end_valid(dw, g.w, g.stride, g.ow), ow_lo);
        if (oh_lo >= oh_hi || ow_lo >= ow_hi) {  // this tap reads only padding
          std::fill(col, col + g.out_plane, 0.0f);
          continue;
        }
        if (oh_lo > 0) std::fill(col, col + std::ptrdiff_t{oh_lo} * g.ow, 0.0f);
        if (oh_hi < g.oh) std::fill(col + std::ptrdiff_t{oh_hi} * g.ow, col + g.out_plane, 0.0f);
        if (g.same_width) {
          // One long contiguous copy of the shifted plane instead of oh short rows (rows are only 14 or 28
          // floats in the model, too short to amortise a loop each), then clear the columns that wrapped
          // around from the neighbouring row. The copy runs from the first in-image tap to the last, so the
          // wrapped reads in between stay inside this plane.
          const std::ptrdiff_t begin = std::ptrdiff_t{oh_lo} * g.ow + ow_lo;
          const std::ptrdiff_t end = std::ptrdiff_t{oh_hi - 1} * g.ow + ow_hi;
          const std::ptrdiff_t shift = std::ptrdiff_t{dh} * g.w + dw;
          float* __restrict dst = col;
          const float* __restrict src = plane;
          for (std::ptrdiff_t i = begin; i < end; ++i) dst[i] = src[i + shift];
          clear_wrapped_columns(g, oh_lo, oh_hi, ow_lo, ow_hi, col);
          continue;
        }
        for (int o = oh_lo; o < oh_hi; ++o) {
          float* __restrict dst = col + std::ptrdiff_t{o} * g.ow;
          const float* __restrict src = plane + std::ptrdiff_t{o * g.stride + dh} * g.w;
          std::fill(dst, dst + ow_lo, 0.0f);
          if (g.stride == 1)
            for (int q = ow_lo; q < ow_hi; ++q) dst[q] = src[q + dw];
          else
            for (int q = ow_lo; q < ow_hi; ++q) dst[q] = src[q * g.stride + dw];
          std::fill(dst + ow_hi, dst + g.ow, 0.0f);
        }
      }
    }
  }
}

// x[c][ih][iw] = sum of the col entries that im2col copied from it, x one group's channels. Overwrites x; may
// clobber col (the same-width path clears wrapped columns in place so the accumulation can run as one contiguous
// loop).
void col2im(const Geometry& g, float* col, float* x) {
  std::fill(x, x + g.group_in, 0.0f);
  for (int c = 0; c < g.c; ++c) {
    float* plane = x + c * g.in_plane;
    for (int r = 0; r < g.r; ++r) {
      const int dh = r - g.pad;
      const int oh_lo = std::min(first_valid(dh, g.stride), g.oh), oh_hi = std::max(end_valid(dh, g.h, g.stride, g.oh), oh_lo);
      for (int s = 0; s < g.s; ++s, col += g.out_plane) {
        const int dw = s - g.pad;
        const int ow_lo = std::min(first_valid(dw, g.stride), g.ow), ow_hi = std::max(end_valid(dw, g.w, g.stride, g.ow), ow_lo);
        if (oh_lo >= oh_hi || ow_lo >= ow_hi) continue;
        if (g.same_width) {
          clear_wrapped_columns(g, oh_lo, oh_hi, ow_lo, ow_hi, col);
          const std::ptrdiff_t begin = std::ptrdiff_t{oh_lo} * g.ow + ow_lo;
          const std::ptrdiff_t end = std::ptrdiff_t{oh_hi - 1} * g.ow + ow_hi;
          const std::ptrdiff_t shift = std::ptrdiff_t{dh} * g.w + dw;
          float* __restrict dst = plane;
          const float* __restrict src = col;
          // Columns cleared above land on in-plane neighbours (the range starts at the first in-image tap and
          // ends at the last); adding zero there is harmless and keeps this one vectorised loop.
          for (std::ptrdiff_t i = begin; i < end; ++i) dst[i + shift] += src[i];
          continue;
        }
        for (int o = oh_lo; o < oh_hi; ++o) {
          const float* __restrict src = col + std::ptrdiff_t{o} * g.ow;
          float* __restrict dst = plane + std::ptrdiff_t{o * g.stride + dh} * g.w;
          if (g.stride == 1)
            for (int q = ow_lo; q < ow_hi; ++q) dst[q + dw] += src[q];
          else
            for (int q = ow_lo; q < ow_hi; ++q) dst[q * g.stride + dw] += src[q];
        }
      }
    }
  }
}

// Sum of one output plane for the bias gradient (not on the model's path: its convolutions have no bias).
// Four double chains hide the add latency and keep the sum exact to float precision.
double sum_plane(const float* p, std::ptrdiff_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::ptrdiff_t i = 0;
  for (; i + 4 <= n; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
  for (; i < n; ++i) s0 += p[i];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

float* ConvWorkspace::get(std::size_t floats, Slot slot) {
  std::vector<float>& buffer = buffers_[slot];
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

std::size_t ConvWorkspace::bytes() const {
  std::size_t total = 0;
  for (const auto& buffer : buffers_) total += buffer.capacity() * sizeof(float);
  return total;
}

namespace {

// Image n of an activation tensor in `type` whose images hold `values` each, as the fp32 passes read and write it:
// the image itself for fp32; else widened into, or written to and then narrowed from, an image of the workspace.
class Images {
 public:
  Images(ElementType type, int64_t values, ConvWorkspace& ws, ConvWorkspace::Slot slot)
      : type_(type),
        values_(values),
        buffer_(type == ElementType::f32 ? nullptr : ws.get(static_cast<std::size_t>(values), slot)) {}
  const float* read(const void* base, int n) const {
    if (!buffer_) return static_cast<const float*>(base) + n * values_;
    widen({values_, type_}, static_cast<const std::byte*>(base) + offset(n), buffer_);
    return buffer_;
  }
  float* write(void* base, int n) const { return buffer_ ? buffer_ : static_cast<float*>(base) + n * values_; }
  void store(void* base, int n) const {
    if (buffer_) narrow(buffer_, {values_, type_}, static_cast<std::byte*>(base) + offset(n));
  }

 private:
  std::ptrdiff_t offset(int n) const { return static_cast<std::ptrdiff_t>(element_bytes(type_)) * n * values_; }
  ElementType type_;
  int64_t values_;
  float* buffer_;
};

void add_bias_gradient(const Geometry& g, const float* dyn, float* dbias) {
  for (int k = 0; k < g.filters; ++k) dbias[k] += static_cast<float>(sum_plane(dyn + k * g.out_plane, g.out_plane));
}

// The direct kernels' scratch and threads: the process's compute threads on fp32 activations, each image (forward)
// or range of filters (filter gradient) one thread's (thread_runs.h), so every output is computed by one thread in
// the same order and the bits do not depend on the thread count; one thread on 16-bit ones, which go an image at a
// time through one widening buffer. Each thread shifts its images into copies of its own; `direct` holds the
// forward's regrouped weights or the filter gradient's lane sums.
struct DirectScratch {
  int threads;
  std::size_t copy_floats;
  float* copies;
  float* direct;
  DirectScratch(const Conv2dShape& s, ConvWorkspace& ws)
      : threads(s.data == ElementType::f32 ? compute_threads() : 1),
        copy_floats(conv2d_direct_copy_floats(s)),
        copies(ws.get(copy_floats * static_cast<std::size_t>(threads))),
        direct(ws.get(conv2d_direct_lane_sum_floats(s), ConvWorkspace::kDirect)) {}
  float* copies_of(int thread) const { return copies + copy_floats * static_cast<std::size_t>(thread); }
};

void direct_forward(const Conv2dShape& sh, const void* x, const float* w, const float* bias, void* y,
                    ConvWorkspace& ws) {
  const Geometry g(sh);
  const DirectScratch scratch(sh, ws);
  conv2d_direct_prepare_weights(sh, w, scratch.direct);
  if (scratch.threads > 1) {
    const auto* xf = static_cast<const float*>(x);
    auto* yf = static_cast<float*>(y);
    return for_each_thread_run(scratch.threads, sh.batch, [&](int64_t first, int64_t end, int t) {
      for (int64_t n = first; n < end; ++n)
        conv2d_direct_forward_image(sh, xf + n * g.in_image, scratch.direct, bias, yf + n * g.out_image,
                                    scratch.copies_of(t));
    });
  }
  const Images inputs(sh.data, g.in_image, ws, ConvWorkspace::kInputImage),
      outputs(sh.data, g.out_image, ws, ConvWorkspace::kOutputImage);
  for (int n = 0; n < sh.batch; ++n) {
    conv2d_direct_forward_image(sh, inputs.read(x, n), scratch.direct, bias, outputs.write(y, n), scratch.copies);
    outputs.store(y, n);
  }
}

void direct_backward_filter(const Conv2dShape& sh, const void* x, const void* dy, float* dw, float* dbias,
                            ConvWorkspace& ws) {
  const Geometry g(sh);
  const DirectScratch scratch(sh, ws);
  float* const lane_sums = scratch.direct;
  conv2d_direct_filter_start(sh, lane_sums);
  if (scratch.threads > 1) {
    const auto* xf = static_cast<const float*>(x);
    const auto* dyf = static_cast<const float*>(dy);
    constexpr int unit = kDirectFilterMultiple;
    for_each_thread_run(scratch.threads, sh.filters / unit, [&](int64_t first, int64_t end, int t) {
      const FilterRange mine{static_cast<int>(first) * unit, static_cast<int>(end) * unit};
      for (int n = 0; n < sh.batch; ++n)
        conv2d_direct_filter_add_image(sh, xf + n * g.in_image, dyf + n * g.out_image, scratch.copies_of(t),
                                       lane_sums, mine);
    });
    for (int n = 0; dbias && n < sh.batch; ++n) add_bias_gradient(g, dyf + n * g.out_image, dbias);
    return conv2d_direct_filter_finish(sh, lane_sums, dw);
  }
  const Images inputs(sh.data, g.in_image, ws, ConvWorkspace::kInputImage),
      gradients(sh.data, g.out_image, ws, ConvWorkspace::kOutputImage);
  for (int n = 0; n < sh.batch; ++n) {
    const float* dyn = gradients.read(dy, n);
    conv2d_direct_filter_add_image(sh, inputs.read(x, n), dyn, scratch.copies, lane_sums, {0, sh.filters});
    if (dbias) add_bias_gradient(g, dyn, dbias);
  }
  conv2d_direct_filter_finish(sh, lane_sums, dw);
}

// One group's share of one image: x and dx its C/G input planes, y and dy its K/G output planes, w its K/G filters.
// y = w * im2col(x), accumulated onto y (the bias already there) when `accumulate`.
void forward_group(const Geometry& g, const float* x, const float* w, bool accumulate, float* col, float* y) {
  const float* b = x;
  if (!g.pointwise) {
    im2col(g, x, col);
    b = col;
  }
  sgemm(Transpose::no, Transpose::no, g.k, static_cast<int>(g.out_plane), static_cast<int>(g.crs), 1.0f, w,
        static_cast<int>(g.crs), b, static_cast<int>(g.out_plane), accumulate ? 1.0f : 0.0f, y,
        static_cast<int>(g.out_plane));
}
// dx = col2im(w^T * dy), overwritten.
void backward_data_group(const Geometry& g, const float* dy, const float* w, float* col, float* dx) {
  float* target = g.pointwise ? dx : col;
  sgemm(Transpose::yes, Transpose::no, static_cast<int>(g.crs), static_cast<int>(g.out_plane), g.k, 1.0f, w,
        static_cast<int>(g.crs), dy, static_cast<int>(g.out_plane), 0.0f, target, static_cast<int>(g.out_plane));
  if (!g.pointwise) col2im(g, col, dx);
}
// dw += dy * im2col(x)^T.
void backward_filter_group(const Geometry& g, const float* x, const float* dy, float* col, float* dw) {
  const float* b = x;
  if (!g.pointwise) {
    im2col(g, x, col);
    b = col;
  }
  sgemm(Transpose::no, Transpose::yes, g.k, static_cast<int>(g.crs), static_cast<int>(g.out_plane), 1.0f, dy,
        static_cast<int>(g.out_plane), b, static_cast<int>(g.out_plane), 1.0f, dw, static_cast<int>(g.crs));
}

}  // namespace

bool conv2d_runs_direct(const Conv2dShape& s) {
  return conv2d_direct_takes(s) && (s.data == ElementType::f32 || compute_threads() == 1);
}

void conv2d_forward(const Conv2dShape& sh, const void* x, const float* w, const float* bias, void* y,
                    ConvWorkspace& ws) {
  const Geometry g(sh);
  if (sh.batch <= 0 || g.out_plane <= 0) return;
  if (conv2d_runs_direct(sh)) return direct_forward(sh, x, w, bias, y, ws);
  float* col = g.pointwise ? nullptr : ws.get(static_cast<std::size_t>(g.crs * g.out_plane));
  const Images inputs(sh.data, g.in_image, ws, ConvWorkspace::kInputImage),
      outputs(sh.data, g.out_image, ws, ConvWorkspace::kOutputImage);
  for (int n = 0; n < sh.batch; ++n) {
    const float* xn = inputs.read(x, n);
    float* yn = outputs.write(y, n);
    // Writing the bias first and letting the GEMM accumulate (beta = 1) costs no extra pass over y.
    if (bias)
      for (int k = 0; k < g.filters; ++k) std::fill(yn + k * g.out_plane, yn + (k + 1) * g.out_plane, bias[k]);
    for (int i = 0; i < g.groups; ++i)
      forward_group(g, xn + i * g.group_in, w + i * g.k * g.crs, bias != nullptr, col, yn + i * g.group_out);
    outputs.store(y, n);
  }
}

void conv2d_backward_data(const Conv2dShape& sh, const void* dy, const float* w, void* dx, ConvWorkspace& ws) {
  const Geometry g(sh);
  if (sh.batch <= 0) return;
  const Images gradients_out(sh.data, g.out_image, ws, ConvWorkspace::kOutputImage),
      gradients_in(sh.data, g.in_image, ws, ConvWorkspace::kInputImage);
  if (g.out_plane <= 0) {
    for (int n = 0; n < sh.batch; ++n) {
      float* dxn = gradients_in.write(dx, n);
      std::fill(dxn, dxn + g.in_image, 0.0f);
      gradients_in.store(dx, n);
    }
    return;
  }
  float* col = g.pointwise ? nullptr : ws.get(static_cast<std::size_t>(g.crs * g.out_plane));
  for (int n = 0; n < sh.batch; ++n) {
    const float* dyn = gradients_out.read(dy, n);
    float* dxn = gradients_in.write(dx, n);
    for (int i = 0; i < g.groups; ++i)
      backward_data_group(g, dyn + i * g.group_out, w + i * g.k * g.crs, col, dxn + i * g.group_in);
    gradients_in.store(dx, n);
  }
}

void conv2d_backward_filter(const Conv2dShape& sh, const void* x, const void* dy, float* dw, float* dbias,
                            ConvWorkspace& ws) {
  const Geometry g(sh);
  if (sh.batch <= 0 || g.out_plane <= 0) return;
  if (conv2d_runs_direct(sh)) return direct_backward_filter(sh, x, dy, dw, dbias, ws);
  float* col = g.pointwise ? nullptr : ws.get(static_cast<std::size_t>(g.crs * g.out_plane));
  const Images inputs(sh.data, g.in_image, ws, ConvWorkspace::kInputImage),
      gradients(sh.data, g.out_image, ws, ConvWorkspace::kOutputImage);
  for (int n = 0; n < sh.batch; ++n) {
    const float* xn = inputs.read(x, n);
    const float* dyn = gradients.read(dy, n);
    for (int i = 0; i < g.groups; ++i)
      backward_filter_group(g, xn + i * g.group_in, dyn + i * g.group_out, col, dw + i * g.k * g.crs);
    if (dbias) add_bias_gradient(g, dyn, dbias);
  }
}

}  // namespace ringtrain::kernels::cpu
