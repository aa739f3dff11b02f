// The bf16 copies of layers' weights, each in memory of its own, rounded from the fp32 weights on the compute threads
// (narrow_on_threads: over ViT-S/16's weights 10-15 % faster than a oneDNN reorder per layer on one thread of a Zen 4
// VM, and on two faster in three runs of four, BM_WeightCopies; perf/results/2026-12-02-vit-bf16-lanes-cpu.md).
#include "kernels/cpu/bf16_weight_copies.h"

#include "kernels/cpu/dnnl_check.h"
#include "kernels/cpu/element_conversion.h"

namespace ringtrain::kernels::cpu {
namespace {
using dnnl::memory;
}  // namespace

Bf16WeightCopies::Copy::Copy(DnnlContext& ctx, int rows, int cols)
    : bf16(DNNL_CALL(memory(memory::desc({rows, cols}, memory::data_type::bf16, memory::format_tag::ab),
                            ctx.engine()))) {}

Bf16WeightCopies::Copy& Bf16WeightCopies::copy_of(DnnlContext& ctx, const float* w, int rows, int cols) {
  const auto key = std::make_tuple(w, rows, cols);
  auto it = copies_.find(key);
  return it != copies_.end() ? it->second : copies_.try_emplace(key, ctx, rows, cols).first->second;
}

void* Bf16WeightCopies::convert(DnnlContext& ctx, const float* w, int rows, int cols) {
  Copy& copy = copy_of(ctx, w, rows, cols);
  narrow_on_threads(w, {int64_t{rows} * cols, ElementType::bf16}, copy.bf16.get_data_handle());
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
