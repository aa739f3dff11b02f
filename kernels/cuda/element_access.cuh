// Owns how our kernels read and write activations stored in fp32, bf16 or fp16 (kernels/element_type.h): every
// value is loaded as fp32 and stored rounded to nearest even, so a kernel's arithmetic is fp32 whatever the storage,
// as on the CPU twin; packs of them moved by one instruction. And the one dispatch from an ElementType to the kernel
// instantiated for its C++ type.
// Internal to kernels/cuda: only .cu files include it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/element_type.h"

namespace ringtrain::kernels::cuda::detail {

__device__ inline float load(const float* p) { return *p; }
__device__ inline float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ inline float load(const __half* p) { return __half2float(*p); }
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ inline void store(__half* p, float v) { *p = __float2half_rn(v); }

// V consecutive values of T, aligned so that one instruction loads or stores them all (V * sizeof(T) <= 16 bytes).
template <int V, class T>
struct alignas(V * sizeof(T)) Pack {
  T v[V];
};

// The V values at p (aligned to V * sizeof(T)) as they are stored: a kernel that loads several packs before it
// converts any keeps them in flight together at the stored width.
template <int V, class T>
__device__ inline Pack<V, T> pack_at(const T* p) {
  return *reinterpret_cast<const Pack<V, T>*>(p);
}
template <int V, class T>
__device__ inline void unpack(const Pack<V, T>& pack, float (&out)[V]) {
#pragma unroll
  for (int r = 0; r < V; ++r) out[r] = load(&pack.v[r]);
}

// The V values at p (aligned to V * sizeof(T)) as fp32, and back rounded to nearest even.
template <int V, class T>
__device__ inline void load_pack(const T* p, float (&out)[V]) {
  unpack(pack_at<V>(p), out);
}
template <int V, class T>
__device__ inline void store_pack(T* p, const float (&in)[V]) {
  Pack<V, T> pack;
#pragma unroll
  for (int r = 0; r < V; ++r) store(&pack.v[r], in[r]);
  *reinterpret_cast<Pack<V, T>*>(p) = pack;
}

// The widest pack of `type` values, up to 16 bytes, whose width every buffer's address is aligned to.
inline int pack_width(ElementType type, std::initializer_list<const void*> buffers) {
  int vec = static_cast<int>(16 / element_bytes(type));
  for (const void* b : buffers)
    while (b && reinterpret_cast<std::uintptr_t>(b) % (static_cast<std::uintptr_t>(vec) * element_bytes(type))) vec /= 2;
  return vec;
}

// Calls body(std::integral_constant<int, V>{}) for V = vec (8, 4, 2 or 1).
template <class Body>
void with_pack_width(int vec, Body body) {
  switch (vec) {
    case 8: return body(std::integral_constant<int, 8>{});
    case 4: return body(std::integral_constant<int, 4>{});
    case 2: return body(std::integral_constant<int, 2>{});
    default: return body(std::integral_constant<int, 1>{});
  }
}

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
