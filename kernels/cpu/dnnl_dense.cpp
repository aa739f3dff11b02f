// Owns the oneDNN matmuls of one dense shape (forward and data gradient; the weight gradient is the BLAS's).
// Every operand is in our layout, so nothing is reordered: the transpose is a stride (format "ba"), which
// oneDNN's matmul reads directly.
#include "kernels/cpu/dnnl_dense.h"

#include "kernels/cpu/dense.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/dnnl_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

memory::desc matrix(int rows, int cols, tag layout) { return memory::desc({rows, cols}, f32, layout); }

// c = a b (+ bias), every operand plain.
PlainPrimitive make_matmul(DnnlContext& ctx, const memory::desc& a, const memory::desc& b, const memory::desc* bias,
                           const memory::desc& c) {
  const auto d = bias ? dnnl::matmul::desc(a, b, *bias, c) : dnnl::matmul::desc(a, b, c);
  const auto pd = DNNL_CALL(dnnl::matmul::primitive_desc(d, DnnlContext::attributes(), ctx.engine()));
  std::vector<PlainArg> args = {{DNNL_ARG_SRC, a, a, Flow::in}, {DNNL_ARG_WEIGHTS, b, b, Flow::in},
                                {DNNL_ARG_DST, c, c, Flow::out}};
  if (bias) args.push_back({DNNL_ARG_BIAS, *bias, *bias, Flow::in});
  return PlainPrimitive(ctx, DNNL_CALL(dnnl::matmul(pd)), pd.scratchpad_desc(), args);
}

}  // namespace

DnnlDense::DnnlDense(DnnlContext& ctx, const DenseShape& s)
    : shape_(s),
      // dx (batch x in) = dy (batch x out) W (out x in)
      backward_data_(make_matmul(ctx, matrix(s.batch, s.out, tag::ab), matrix(s.out, s.in, tag::ab), nullptr,
                                 matrix(s.batch, s.in, tag::ab))) {}

PlainPrimitive& DnnlDense::forward_primitive(DnnlContext& ctx, bool bias) {
  auto& slot = forward_[bias ? 1 : 0];
  if (!slot) {
    // y (batch x out) = x (batch x in) W^T (in x out, W read transposed) + b (1 x out)
    const memory::desc b = matrix(1, shape_.out, tag::ab);
    slot.emplace(make_matmul(ctx, matrix(shape_.batch, shape_.in, tag::ab), matrix(shape_.in, shape_.out, tag::ba),
                             bias ? &b : nullptr, matrix(shape_.batch, shape_.out, tag::ab)));
  }
  return *slot;
}

void DnnlDense::forward(DnnlContext& ctx, const float* x, const float* w, const float* bias, float* y) {
  void* const tensors[] = {const_cast<float*>(x), const_cast<float*>(w), y, const_cast<float*>(bias)};
  forward_primitive(ctx, bias != nullptr).run(ctx, std::span(tensors, bias ? 4 : 3));
}

void DnnlDense::backward(DnnlContext& ctx, const float* x, const float* w, const float* dy, float* dx, float* dw,
                         float* dbias) {
  if (dx) {
    void* const tensors[] = {const_cast<float*>(dy), const_cast<float*>(w), dx};
    backward_data_.run(ctx, tensors);
  }
  // dW (out x in) += dy^T x: the BLAS, which ran this batch-deep product at 93 GFLOP/s on the model's shape
  // where oneDNN's matmul ran it at 79 (perf/results/2026-11-24-onednn-cpu.md).
  sgemm(Transpose::yes, Transpose::no, shape_.out, shape_.in, shape_.batch, 1.0f, dy, shape_.out, x, shape_.in,
        1.0f, dw, shape_.in);
  if (dbias) dense_bias_gradient(shape_.batch, shape_.out, dy, dbias);
}

}  // namespace ringtrain::kernels::cpu
