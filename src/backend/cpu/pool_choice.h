// Owns which implementation runs a max pooling whose windows do not overlap (window = stride, no padding: the
// models' 2x2/2) on this machine: our kernels or oneDNN's, whichever ran a forward and backward pass of the shape
// faster when first asked. Which is faster depends on the machine (oneDNN's plain-layout pooling was 2-3x ours on
// a Zen 5 core and ours 2-4x oneDNN's on a Sapphire Rapids one, perf/results/), and there both give the same
// bits (tests/kernels/test_dnnl_ops.cpp), so the choice changes the speed and never a number. Other pooling
// stays on oneDNN.
#pragma once
#include <cstddef>
#include <map>

#include "kernels/cpu/dnnl_ops.h"
#include "kernels/op_shapes.h"

namespace ringtrain::backend {

enum class PoolKernel { dnnl, ours };

class PoolChoice {
 public:
  // Bytes a max pooling's forward keeps for backward, enough for either implementation.
  static std::size_t saved_bytes(const kernels::PoolShape& s, std::size_t dnnl_bytes);
  static bool choosable(const kernels::PoolShape& s, kernels::PoolMode mode);
  // The faster for this shape, timed on first asking (a few passes on scratch buffers) and kept.
  PoolKernel kernel(const kernels::PoolShape& s, kernels::cpu::DnnlOps& dnnl);

 private:
  std::map<kernels::PoolShape, PoolKernel> chosen_;
};

}  // namespace ringtrain::backend
