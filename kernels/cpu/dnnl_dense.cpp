// Owns the oneDNN products of one dense shape: the forward on the matmul primitive; in bf16 the two gradients on
// matmuls too, in fp32 both on oneDNN's SGEMM (on the BLAS where the product is shallow).
// Every operand is in our layout, so in fp32 nothing is reordered: the transpose is a stride (format "ba"),
// which oneDNN's matmul reads directly. In bf16 the two inputs are converted into staging memory in the same
// layout; the output stays fp32.
#include "kernels/cpu/dnnl_dense.h"

#include <algorithm>
#include <cstddef>

#include "kernels/cpu/dense.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/dnnl_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;
constexpr auto bf16 = memory::data_type::bf16;
constexpr int kShallowProduct = 64;  // fp32 gradients of products fewer outputs deep than this run on OpenBLAS
constexpr int kTransposedForwardRows = 64;  // fp32 forwards of at most this many rows may run transposed

// A matrix of ours: rows x cols values of `type`, row-major ("ab") or read transposed ("ba").
struct Matrix {
  int rows = 0, cols = 0;
  tag layout = tag::ab;
  memory::data_type type = f32;
  memory::desc plain() const { return memory::desc({rows, cols}, type, layout); }
  memory::desc as(memory::data_type read_as) const { return memory::desc({rows, cols}, read_as, layout); }
};

// How a matmul writes c: c = a b (+ bias), or c += a b (a sum post-op: c is read in place, never staged).
enum class Write { overwrite, add };

// c = a b (+ bias), every operand plain; a and b read in the context's operand type.
PlainPrimitive make_matmul(DnnlContext& ctx, const Matrix& a, const Matrix& b, bool bias, const Matrix& c,
                           Write write = Write::overwrite) {
  const memory::desc a_in = a.as(ctx.operand_type()), b_in = b.as(ctx.operand_type()), c_out = c.plain();
  const memory::desc bias_row = memory::desc({1, c.cols}, f32, tag::ab);
  dnnl::primitive_attr attr = ctx.attributes();
  if (write == Write::add) {
    dnnl::post_ops sum;
    DNNL_CALL(sum.append_sum(1.0f));
    DNNL_CALL(attr.set_post_ops(sum));
  }
  const auto pd = DNNL_CALL(bias ? dnnl::matmul::primitive_desc(ctx.engine(), a_in, b_in, bias_row, c_out, attr)
                                 : dnnl::matmul::primitive_desc(ctx.engine(), a_in, b_in, c_out, attr));
  std::vector<PlainArg> args = {{DNNL_ARG_SRC, a.plain(), a_in, Flow::in},
                                {DNNL_ARG_WEIGHTS, b.plain(), b_in, Flow::in},
                                {DNNL_ARG_DST, c_out, c_out, Flow::out}};
  if (bias) args.push_back({DNNL_ARG_BIAS, bias_row, bias_row, Flow::in});
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::matmul(pd)), pd.scratchpad_desc(), args);
}

// y (rows x cols) = t^T (+ bias per column), t being cols x rows: in 16 x 16 tiles, so both sides stay in cache lines.
void transpose_add_bias(int rows, int cols, const float* t, const float* bias, float* y) {
  constexpr int kTile = 16;
  for (int r0 = 0; r0 < rows; r0 += kTile) {
    for (int c0 = 0; c0 < cols; c0 += kTile) {
      for (int r = r0; r < std::min(r0 + kTile, rows); ++r) {
        float* row = y + std::ptrdiff_t{r} * cols;
        for (int c = c0; c < std::min(c0 + kTile, cols); ++c)
          row[c] = bias ? t[std::ptrdiff_t{c} * rows + r] + bias[c] : t[std::ptrdiff_t{c} * rows + r];
      }
    }
  }
}

}  // namespace

std::size_t DnnlDense::working_bytes() const {
  return sizeof(float) * y_transposed_.capacity();
}

DnnlDense::DnnlDense(DnnlContext& ctx, const DenseShape& s, Bf16WeightCopies& weight_copies)
    : shape_(s), activations_(ctx.activation_type(s.data)) {
  // fp32 forward of a layer with more outputs than samples, and few samples: oneDNN's matmul ran y^T = W x^T (W as
  // the wide left operand) in 2.50-2.52 ms against 3.16-3.36 for y = x W^T on the Fashion-MNIST model's 64 x 3136 ->
  // 1024 (one core, perf/results/2026-11-25-cpu-spr-3.md); the bias column that form would need sends oneDNN 2.6 to
  // its reference kernel, so the transpose back adds it. From 128 rows the two forms are even or the direct one wins:
  // 2.95 ms against 4.21 on ViT-S/16's 544 tokens 384 -> 1536, 3.49 against 3.40 on 128 x 3136 -> 1024 (two threads,
  // perf/results/2026-12-02-vit-fp32-cpu-emr.md).
  if (ctx.operand_type() == memory::data_type::f32 && s.out > s.batch && s.batch <= kTransposedForwardRows) {
    forward_transposed_.emplace(make_matmul(ctx, {s.out, s.in}, {s.in, s.batch, tag::ba}, false, {s.out, s.batch}));
    y_transposed_.resize(static_cast<std::size_t>(s.out) * static_cast<std::size_t>(s.batch));
  }
  if (ctx.operand_type() != bf16) return;  // fp32 gradients: see backward()
  // The forward and the data gradient read W in bf16, each layer's copy converted by its forward (see forward()).
  weight_copies_ = &weight_copies;
  const memory::data_type a = activations_;
  // dx (batch x in) = dy (batch x out) W (out x in)
  backward_data_.emplace(make_matmul(ctx, {s.batch, s.out, tag::ab, a}, {s.out, s.in, tag::ab, bf16}, false,
                                     {s.batch, s.in, tag::ab, a}));
  // dW (out x in) += dy^T (out x batch, dy read transposed) x (batch x in)
  backward_weights_.emplace(make_matmul(ctx, {s.out, s.batch, tag::ba, a}, {s.batch, s.in, tag::ab, a}, false,
                                        {s.out, s.in}, Write::add));
}

PlainPrimitive& DnnlDense::forward_primitive(DnnlContext& ctx, bool bias) {
  auto& slot = forward_[bias ? 1 : 0];
  if (!slot) {
    // y (batch x out) = x (batch x in) W^T (in x out, W read transposed) + b (1 x out)
    const memory::data_type w = weight_copies_ ? bf16 : f32;
    slot.emplace(make_matmul(ctx, {shape_.batch, shape_.in, tag::ab, activations_}, {shape_.in, shape_.out, tag::ba, w},
                             bias, {shape_.batch, shape_.out, tag::ab, activations_}));
  }
  return *slot;
}

void DnnlDense::forward(DnnlContext& ctx, const void* x, const float* w, const float* bias, void* y) {
  if (forward_transposed_) {  // fp32
    void* const tensors[] = {const_cast<float*>(w), const_cast<void*>(x), y_transposed_.data()};
    forward_transposed_->run(ctx, tensors);
    transpose_add_bias(shape_.batch, shape_.out, y_transposed_.data(), bias, static_cast<float*>(y));
    return;
  }
  void* const weights =
      weight_copies_ ? weight_copies_->convert(ctx, w, shape_.out, shape_.in) : const_cast<float*>(w);
  void* const tensors[] = {const_cast<void*>(x), weights, y, const_cast<float*>(bias)};
  forward_primitive(ctx, bias != nullptr).run(ctx, std::span(tensors, bias ? 4 : 3));
}

void DnnlDense::backward(DnnlContext& ctx, const void* x, const float* w, const void* dy, void* dx, float* dw,
                         float* dbias) {
  if (backward_data_) {  // bf16: the matmuls read their inputs rounded
    if (dx) {
      void* const tensors[] = {const_cast<void*>(dy), weight_copies_->converted(ctx, w, shape_.out, shape_.in), dx};
      backward_data_->run(ctx, tensors);
    }
    void* const tensors[] = {const_cast<void*>(dy), const_cast<void*>(x), dw};
    backward_weights_->run(ctx, tensors);
  } else {
    // fp32: both products on oneDNN's SGEMM (dx = dy W: 2.5 ms against the matmul primitive's 4.0 and OpenBLAS's
    // 3.3 on one core of a Sapphire Rapids host, perf/results/2026-11-25-cpu-spr-2.md; dW += dy^T x: OpenBLAS's took
    // 9-11 ms a step inside ViT-S/16's 2-thread step on 32 x 1000 x 384, though 0.45 ms timed alone, oneDNN's 0.7),
    // but for a product only a few dozen outputs deep (the classifier's, 10 outputs), which runs on OpenBLAS:
    // oneDNN's SGEMM took 0.2 ms a step on 64 x 10 x 1024 inside the training step, though 13 us when timed alone
    // (perf/results/2026-11-26-cpu-conv1-direct.md, perf/results/2026-11-29-vit-cpu.md).
    const auto* dy32 = static_cast<const float*>(dy);
    const auto* x32 = static_cast<const float*>(x);
    auto* dx32 = static_cast<float*>(dx);
    if (shape_.out < kShallowProduct) {
      if (dx)
        sgemm(Transpose::no, Transpose::no, shape_.batch, shape_.in, shape_.out, 1.0f, dy32, shape_.out, w,
              shape_.in, 0.0f, dx32, shape_.in);
      sgemm(Transpose::yes, Transpose::no, shape_.out, shape_.in, shape_.batch, 1.0f, dy32, shape_.out, x32,
            shape_.in, 1.0f, dw, shape_.in);
    } else {
      if (dx) ctx.sgemm(Transpose::no, Transpose::no, shape_.batch, shape_.in, shape_.out, dy32, w, 0.0f, dx32);
      ctx.sgemm(Transpose::yes, Transpose::no, shape_.out, shape_.in, shape_.batch, dy32, x32, 1.0f, dw);
    }
  }
  // dy is bf16 where the products run on bf16 operands, fp32 otherwise (an fp16 network's tensors reach oneDNN widened).
  if (dbias)
    dense_bias_gradient(shape_.batch, shape_.out, activations_ == f32 ? ElementType::f32 : ElementType::bf16, dy, dbias);
}

}  // namespace ringtrain::kernels::cpu
