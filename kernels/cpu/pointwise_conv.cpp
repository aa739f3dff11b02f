// Owns the batch-wide GEMM form of pointwise convolutions; see pointwise_conv.h.
#include "kernels/cpu/pointwise_conv.h"

#include <cstring>

#include "kernels/cpu/gemm.h"

namespace ringtrain::kernels::cpu {

namespace {

struct Extent {
  int images, channels, positions;
  std::size_t floats() const {
    return static_cast<std::size_t>(images) * static_cast<std::size_t>(channels) * static_cast<std::size_t>(positions);
  }
  int columns() const { return images * positions; }
};

// N x C x P (NCHW) to C x (N x P): image n's plane c becomes columns [n P, (n + 1) P) of row c.
void gather(const float* nchw, const Extent& e, float* rows) {
  const auto p = static_cast<std::size_t>(e.positions);
  for (int n = 0; n < e.images; ++n)
    for (int c = 0; c < e.channels; ++c)
      std::memcpy(rows + (static_cast<std::size_t>(c) * static_cast<std::size_t>(e.images) + static_cast<std::size_t>(n)) * p,
                  nchw + (static_cast<std::size_t>(n) * static_cast<std::size_t>(e.channels) + static_cast<std::size_t>(c)) * p,
                  p * sizeof(float));
}

// The inverse of gather, adding bias[c] to each value when bias is given.
void scatter(const float* rows, const Extent& e, const float* bias, float* nchw) {
  const auto p = static_cast<std::size_t>(e.positions);
  for (int n = 0; n < e.images; ++n)
    for (int c = 0; c < e.channels; ++c) {
      const float* from =
          rows + (static_cast<std::size_t>(c) * static_cast<std::size_t>(e.images) + static_cast<std::size_t>(n)) * p;
      float* to = nchw + (static_cast<std::size_t>(n) * static_cast<std::size_t>(e.channels) + static_cast<std::size_t>(c)) * p;
      const float b = bias ? bias[c] : 0.0f;
      for (std::size_t i = 0; i < p; ++i) to[i] = from[i] + b;
    }
}

Extent input_extent(const Conv2dShape& s) { return {s.batch, s.in_channels, s.in_h * s.in_w}; }
Extent output_extent(const Conv2dShape& s) { return {s.batch, s.filters, s.in_h * s.in_w}; }

}  // namespace

bool conv2d_runs_pointwise_gemm(const Conv2dShape& s) {
  return s.data == ElementType::f32 && s.kernel_h == 1 && s.kernel_w == 1 && s.stride == 1 && s.padding == 0 &&
         s.groups == 1 && s.in_block == 1 && s.out_block == 1 && s.batch > 1 &&
         s.in_h * s.in_w <= kPointwiseGemmMaxPositions;
}

void pointwise_conv_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y,
                            ConvWorkspace& ws) {
  const Extent in = input_extent(s), out = output_extent(s);
  float* x_rows = ws.get(in.floats(), ConvWorkspace::kColumns);
  float* y_rows = ws.get(out.floats(), ConvWorkspace::kOutputImage);
  gather(x, in, x_rows);
  const int columns = in.columns();
  sgemm(Transpose::no, Transpose::no, s.filters, columns, s.in_channels, 1.0f, w, s.in_channels, x_rows, columns, 0.0f,
        y_rows, columns);
  scatter(y_rows, out, bias, y);
}

void pointwise_conv_backward(const Conv2dShape& s, const float* x, const float* dy, const float* w, float* dx, float* dw,
                             float* dbias, ConvWorkspace& ws) {
  const Extent in = input_extent(s), out = output_extent(s);
  float* x_rows = ws.get(in.floats(), ConvWorkspace::kColumns);
  float* dy_rows = ws.get(out.floats(), ConvWorkspace::kOutputImage);
  gather(x, in, x_rows);
  gather(dy, out, dy_rows);
  const int columns = in.columns();
  sgemm(Transpose::no, Transpose::yes, s.filters, s.in_channels, columns, 1.0f, dy_rows, columns, x_rows, columns, 1.0f,
        dw, s.in_channels);
  if (dbias)
    for (int k = 0; k < s.filters; ++k) {
      const float* row = dy_rows + static_cast<std::size_t>(k) * static_cast<std::size_t>(columns);
      double sum = 0;
      for (int i = 0; i < columns; ++i) sum += row[i];
      dbias[k] += static_cast<float>(sum);
    }
  if (!dx) return;
  float* dx_rows = ws.get(in.floats(), ConvWorkspace::kInputImage);
  sgemm(Transpose::yes, Transpose::no, s.in_channels, columns, s.filters, 1.0f, w, s.in_channels, dy_rows, columns, 0.0f,
        dx_rows, columns);
  scatter(dx_rows, in, nullptr, dx);
}

}  // namespace ringtrain::kernels::cpu
