// The bf16 copies of layers' weights: each a oneDNN reorder from the fp32 weights, in place, into memory of its own.
#include "kernels/cpu/bf16_weight_copies.h"

#include "kernels/cpu/dnnl_check.h"

namespace ringtrain::kernels::cpu {
namespace {
using dnnl::memory;
}  // namespace

Bf16WeightCopies::Copy::Copy(DnnlContext& ctx, int rows, int cols)
    : fp32_(DNNL_CALL(memory(memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab), ctx.engine(),
                             DNNL_MEMORY_NONE))),
      bf16_(DNNL_CALL(memory(memory::desc({rows, cols}, memory::data_type::bf16, memory::format_tag::ab),
                             ctx.engine()))),
      cast_(DNNL_CALL(dnnl::reorder(fp32_, bf16_))) {}

void* Bf16WeightCopies::Copy::convert(DnnlContext& ctx, const float* w) {
  DNNL_CALL(fp32_.set_data_handle(const_cast<float*>(w)));
  ctx.execute(cast_, {{DNNL_ARG_FROM, fp32_}, {DNNL_ARG_TO, bf16_}});
  filled_ = true;
  return bf16_.get_data_handle();
}

void* Bf16WeightCopies::Copy::converted(DnnlContext& ctx, const float* w) {
  return filled_ ? bf16_.get_data_handle() : convert(ctx, w);
}

std::size_t Bf16WeightCopies::Copy::bytes() const { return bf16_.get_desc().get_size(); }

Bf16WeightCopies::Copy& Bf16WeightCopies::copy_of(DnnlContext& ctx, const float* w, int rows, int cols) {
  const auto key = std::make_tuple(w, rows, cols);
  auto it = copies_.find(key);
  return it != copies_.end() ? it->second : copies_.try_emplace(key, ctx, rows, cols).first->second;
}

void* Bf16WeightCopies::convert(DnnlContext& ctx, const float* w, int rows, int cols) {
  return copy_of(ctx, w, rows, cols).convert(ctx, w);
}

void* Bf16WeightCopies::converted(DnnlContext& ctx, const float* w, int rows, int cols) {
  return copy_of(ctx, w, rows, cols).converted(ctx, w);
}

std::size_t Bf16WeightCopies::bytes() const {
  std::size_t total = 0;
  for (const auto& [key, copy] : copies_) total += copy.bytes();
  return total;
}

}  // namespace ringtrain::kernels::cpu
