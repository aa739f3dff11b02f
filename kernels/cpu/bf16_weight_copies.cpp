// The bf16 copies of layers' weights: each a oneDNN reorder from the fp32 weights, in place, into memory of its own.
#include "kernels/cpu/bf16_weight_copies.h"

#include "kernels/cpu/dnnl_check.h"

namespace ringtrain::kernels::cpu {
namespace {
using dnnl::memory;
}  // namespace

Bf16WeightCopies::Copy::Copy(DnnlContext& ctx, int rows, int cols)
    : fp32(DNNL_CALL(memory(memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab), ctx.engine(),
                            DNNL_MEMORY_NONE))),
      bf16(DNNL_CALL(memory(memory::desc({rows, cols}, memory::data_type::bf16, memory::format_tag::ab),
                            ctx.engine()))),
      cast(DNNL_CALL(dnnl::reorder(fp32, bf16))) {}

Bf16WeightCopies::Copy& Bf16WeightCopies::copy_of(DnnlContext& ctx, const float* w, int rows, int cols) {
  const auto key = std::make_tuple(w, rows, cols);
  auto it = copies_.find(key);
  return it != copies_.end() ? it->second : copies_.try_emplace(key, ctx, rows, cols).first->second;
}

void* Bf16WeightCopies::convert(DnnlContext& ctx, const float* w, int rows, int cols) {
  Copy& copy = copy_of(ctx, w, rows, cols);
  DNNL_CALL(copy.fp32.set_data_handle(const_cast<float*>(w)));
  ctx.execute(copy.cast, {{DNNL_ARG_FROM, copy.fp32}, {DNNL_ARG_TO, copy.bf16}});
  copy.filled = true;
  return copy.bf16.get_data_handle();
}

void* Bf16WeightCopies::converted(DnnlContext& ctx, const float* w, int rows, int cols) {
  Copy& copy = copy_of(ctx, w, rows, cols);
  return copy.filled ? copy.bf16.get_data_handle() : convert(ctx, w, rows, cols);
}

std::size_t Bf16WeightCopies::bytes() const {
  std::size_t total = 0;
  for (const auto& [key, copy] : copies_) total += copy.bf16.get_desc().get_size();
  return total;
}

}  // namespace ringtrain::kernels::cpu
