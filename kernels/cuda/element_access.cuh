// Owns how our kernels read and write activations stored in fp32, bf16 or fp16 (kernels/element_type.h): every
// value is loaded as fp32 and stored rounded to nearest even, so a kernel's arithmetic is fp32 whatever the storage,
// as on the CPU twin. And the one dispatch from an ElementType to the kernel instantiated for its C++ type.
// Internal to kernels/cuda: only .cu files include it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/element_type.h"

namespace ringtrain::kernels::cuda::detail {

__device__ inline float load(const float* p) { return *p; }
__device__ inline float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ inline float load(const __half* p) { return __half2float(*p); }
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ inline void store(__half* p, float v) { *p = __float2half_rn(v); }

// Calls body(T{}) with T the C++ type of `type`: body is a generic lambda that launches its kernel for T.
template <class Body>
void with_element(ElementType type, Body body) {
  switch (type) {
    case ElementType::bf16: return body(__nv_bfloat16{});
    case ElementType::f16: return body(__half{});
    default: return body(float{});
  }
}

}  // namespace ringtrain::kernels::cuda::detail
