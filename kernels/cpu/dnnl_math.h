// Owns the choice of the type oneDNN's convolutions and matmuls read their operands in, apart from oneDNN's
// headers so the backend and its tests can name it.
#pragma once

namespace ringtrain::kernels::cpu {

// bf16: a product's inputs are rounded to bf16 when they are reordered into staging memory; its outputs, its
// accumulation and every tensor of ours stay fp32 (the master weights are fp32).
enum class DnnlMath { fp32, bf16 };

}  // namespace ringtrain::kernels::cpu
