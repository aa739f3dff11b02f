// Owns the 16-bit NHWC convolutions on few input channels (a network's stem: 7x7 on 3 colour channels) as im2col
// (kernels/cuda/im2col.h) and cuBLAS GEMMs. cuDNN's tensor-core kernels read such an input only padded to 8
// channels: 8/3 of the work, and on an H200 the ResNet-50 stem at ~46 TFLOP/s took 3.5 ms forward of a 47 ms step.
// The rows of a chunk of images are made in scratch (CudaOptions::im2col_bytes bounds them, so the memory plan's
// largest scratch stays small) and multiplied by the filters, each filter's C x R x S weights a row padded to the
// rows' columns:
//   forward          y (positions x K)         = rows (positions x columns) * W^T (columns x K)
//   weight gradient  dW (K x columns, fp32)   += dy^T (K x positions) * rows (positions x columns)
//   data gradient    drows (positions x columns) = dy (positions x K) * W (K x columns), then col2im into dx
// The weight gradient is summed in fp32 over the chunks in order (deterministic) and added into the fp32 gradient.
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/cuda_backend_state.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/im2col.h"
#include "kernels/cuda/resize_rows.h"

namespace ringtrain::backend {

namespace kc = kernels::cuda;
using kernels::ElementType;

namespace {

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Where each part of a GEMM convolution's scratch lies (byte offsets), and how the batch is cut.
struct GemmConvLayout {
  int columns = 0, weights_per_filter = 0;  // im2col_columns(s); C x R x S
  int chunk = 1;                            // images a chunk's rows hold
  // The padded 16-bit filters, a chunk's rows, then for backward the fp32 weight gradient, its cropped copy and the
  // bias gradient's partial sums.
  std::size_t weights = 0, rows = 0, gradient = 0, cropped = 0, partials = 0;
  std::size_t forward_bytes = 0, backward_bytes = 0;
};

GemmConvLayout layout_of(const model::Conv2dShape& s, std::size_t rows_budget) {
  GemmConvLayout l;
  l.columns = kc::im2col_columns(s);
  l.weights_per_filter = s.in_channels * s.kernel_h * s.kernel_w;
  const std::size_t half = 2, filters = static_cast<std::size_t>(s.filters);
  const std::size_t image_rows = half * static_cast<std::size_t>(s.out_h()) * s.out_w() * l.columns;
  l.chunk = static_cast<int>(std::clamp<std::size_t>(rows_budget / image_rows, 1, std::max(s.batch, 1)));
  l.rows = aligned(half * filters * l.columns);
  l.forward_bytes = l.rows + aligned(image_rows * static_cast<std::size_t>(l.chunk));
  l.gradient = l.forward_bytes;
  l.cropped = l.gradient + aligned(sizeof(float) * filters * l.columns);
  l.partials = l.cropped + aligned(sizeof(float) * filters * l.weights_per_filter);
  const int positions = s.batch * s.out_h() * s.out_w();
  l.backward_bytes = l.partials + aligned(sizeof(float) * kc::bias_grad_tall_partials(positions, s.filters));
  return l;
}

// Calls f(part, first) for each chunk of images: part is s over `chunk` images (fewer in the last) from `first`.
template <class F>
void for_chunks(const model::Conv2dShape& s, int chunk, F&& f) {
  for (int first = 0; first < s.batch; first += chunk) {
    model::Conv2dShape part = s;
    part.batch = std::min(chunk, s.batch - first);
    f(part, first);
  }
}

const std::byte* at_image(const void* base, int image, int64_t values_per_image) {
  return static_cast<const std::byte*>(base) + 2 * values_per_image * image;
}
std::byte* at_image(void* base, int image, int64_t values_per_image) {
  return static_cast<std::byte*>(base) + 2 * values_per_image * image;
}

}  // namespace

bool CudaBackend::gemm_conv(const model::Conv2dShape& s) const {
  const int64_t weights_per_filter = int64_t{s.in_channels} * s.kernel_h * s.kernel_w;
  return state_->options.few_channel_gemm && s.groups == 1 && nhwc(s.data) && s.in_channels % 8 != 0 &&
         weights_per_filter <= kc::kMaxIm2colColumns && s.kernel_h < 256 && s.kernel_w < 256;
}

model::ScratchBytes CudaBackend::gemm_conv_scratch_bytes(const model::Conv2dShape& s) const {
  const GemmConvLayout l = layout_of(s, state_->options.im2col_bytes);
  return {l.forward_bytes, l.backward_bytes};
}

std::string CudaBackend::gemm_conv_method(const model::Conv2dShape& s) const {
  const GemmConvLayout l = layout_of(s, state_->options.im2col_bytes);
  return fmt::format("im2col + cuBLAS GEMM, {} columns (C x R x S = {}), {} images a chunk", l.columns,
                     l.weights_per_filter, l.chunk);
}

// The 16-bit filters (K x C x R x S, as the fp32 weights) with each filter's row padded to the im2col columns.
void* CudaBackend::gemm_conv_filters(const model::Conv2dShape& s, const float* w, bool convert, int columns,
                                     std::byte* into) {
  const void* filters = weights_in(s.data, w, s.weight_elements(), convert);
  const int64_t per_filter = int64_t{s.in_channels} * s.kernel_h * s.kernel_w;
  kc::resize_rows({s.filters, per_filter, columns, s.data}, filters, into, stream());
  return into;
}

void CudaBackend::gemm_conv_forward(const model::Conv2dShape& s, const void* x, const float* w, const float* bias,
                                    void* y, model::Scratch scratch) {
  const GemmConvLayout l = layout_of(s, state_->options.im2col_bytes);
  std::byte* memory = planned_or_own(scratch, l.forward_bytes, state_->gemm_conv_scratch, stream());
  const void* filters = gemm_conv_filters(s, w, true, l.columns, memory + l.weights);
  void* rows = memory + l.rows;
  const int64_t in_image = int64_t{s.in_h} * s.in_w * s.in_channels, out_image = int64_t{s.out_h()} * s.out_w();
  for_chunks(s, l.chunk, [&](const model::Conv2dShape& part, int first) {
    kc::im2col(part, at_image(x, first, in_image), rows, stream());
    const int positions = part.batch * static_cast<int>(out_image);
    blas().gemm(Transpose::no, Transpose::yes, positions, s.filters, l.columns, 1.0f, s.data, rows, l.columns,
                filters, l.columns, 0.0f, s.data, at_image(y, first, out_image * s.filters), s.filters);
  });
  if (bias) kc::add_bias_rows(s.batch * static_cast<int>(out_image), s.filters, bias, s.data, y, stream());
}

void CudaBackend::gemm_conv_backward(const model::Conv2dShape& s, const void* x, const void* dy, const float* w,
                                     void* dx, float* dw, float* dbias, model::Scratch scratch) {
  const GemmConvLayout l = layout_of(s, state_->options.im2col_bytes);
  std::byte* memory = planned_or_own(scratch, l.backward_bytes, state_->gemm_conv_scratch, stream());
  const void* filters = dx ? gemm_conv_filters(s, w, false, l.columns, memory + l.weights) : nullptr;
  void* rows = memory + l.rows;
  auto* gradient = reinterpret_cast<float*>(memory + l.gradient);
  const int64_t in_image = int64_t{s.in_h} * s.in_w * s.in_channels, out_image = int64_t{s.out_h()} * s.out_w();
  for_chunks(s, l.chunk, [&](const model::Conv2dShape& part, int first) {
    kc::im2col(part, at_image(x, first, in_image), rows, stream());
    const int positions = part.batch * static_cast<int>(out_image);
    const void* dy_part = at_image(dy, first, out_image * s.filters);
    blas().gemm(Transpose::yes, Transpose::no, s.filters, l.columns, positions, 1.0f, s.data, dy_part, s.filters,
                rows, l.columns, first == 0 ? 0.0f : 1.0f, ElementType::f32, gradient, l.columns);
    if (!dx) return;
    // The rows were read by the weight gradient above (stream order): they now take the rows' gradient.
    blas().gemm(Transpose::no, Transpose::no, positions, l.columns, s.filters, 1.0f, s.data, dy_part, s.filters,
                filters, l.columns, 0.0f, s.data, rows, l.columns);
    kc::col2im(part, rows, at_image(dx, first, in_image), stream());
  });
  auto* cropped = reinterpret_cast<float*>(memory + l.cropped);
  kc::resize_rows({s.filters, l.columns, l.weights_per_filter, ElementType::f32}, gradient, cropped, stream());
  kc::accumulate_into_fp32({int64_t{s.filters} * l.weights_per_filter, ElementType::f32}, cropped, dw, stream());
  if (dbias)
    kc::bias_grad_tall_rows(s.batch * static_cast<int>(out_image), s.filters, s.data, dy,
                            reinterpret_cast<float*>(memory + l.partials), dbias, stream());
}

}  // namespace ringtrain::backend
