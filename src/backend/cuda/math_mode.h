// Owns the choice of arithmetic for the CUDA backend's fp32 tensors: strict fp32 (FMA units, the CPU twin's
// arithmetic) or TF32 tensor cores (inputs rounded to a 10-bit mantissa, fp32 accumulation and storage; several
// times faster for convolutions and GEMMs on Ampere and newer). Parameters, gradients, the optimizer and the
// all-reduce stay fp32 either way. 16-bit activations (train.precision = "bf16" / "fp16") are CudaOptions::activations.
#pragma once

namespace ringtrain::backend {

enum class MathMode { fp32, tf32 };

inline const char* math_mode_name(MathMode m) { return m == MathMode::tf32 ? "tf32 tensor cores" : "strict fp32"; }

}  // namespace ringtrain::backend
