// Owns the bf16 copies of layers' fp32 weights that oneDNN's bf16 dense products read: one per layer's weights,
// by their address and their matrix's size, whatever the batch size of the product reading it. A forward converts
// its layer's copy; the data gradient after it reads that copy unchanged (the optimizer updates the weights only
// after backward), so the weights are converted once a step, not twice.
#pragma once
#include <cstddef>
#include <map>
#include <tuple>

#include "kernels/cpu/dnnl_context.h"

namespace ringtrain::kernels::cpu {

class Bf16WeightCopies {
 public:
  // The copy of w (rows x cols, row-major) converted now from w.
  void* convert(DnnlContext& ctx, const float* w, int rows, int cols);
  // The copy of w as its last conversion left it, converted now if none has been.
  void* converted(DnnlContext& ctx, const float* w, int rows, int cols);
  std::size_t bytes() const;

 private:
  struct Copy {
    Copy(DnnlContext& ctx, int rows, int cols);
    dnnl::memory bf16;
    bool filled = false;  // converted at least once
  };
  Copy& copy_of(DnnlContext& ctx, const float* w, int rows, int cols);

  // By the weights' address, which is a layer's own where oneDNN's math is bf16 (the CPU backend's rounded-operand
  // slots, one address for every layer, reach oneDNN only where its math is fp32, which keeps no copies).
  std::map<std::tuple<const float*, int, int>, Copy> copies_;
};

}  // namespace ringtrain::kernels::cpu
