// Owns the conversion kernel declared in cast.h, one instantiation per pair of element types.
#include "kernels/cuda/cast.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

// Through fp32, which holds every bf16 and fp16 value exactly, so a 16-bit to 16-bit cast rounds once.
template <class From, class To>
__global__ void cast_kernel(int64_t n, const From* x, To* y) {
  for (int64_t i = detail::global_index(); i < n; i += detail::grid_stride()) detail::store(y + i, detail::load(x + i));
}

}  // namespace

void cast(Elements from, const void* x, ElementType to, void* y, Stream stream) {
  if (from.n <= 0) return;
  detail::with_element(from.type, [&](auto f) {
    detail::with_element(to, [&](auto t) {
      using From = decltype(f);
      using To = decltype(t);
      cast_kernel<<<detail::blocks_for(from.n), detail::kThreads, 0, stream>>>(from.n, static_cast<const From*>(x),
                                                                                static_cast<To*>(y));
    });
  });
  RT_CHECK_LAUNCH();
}

void float_to_bf16(int64_t n, const float* x, uint16_t* y, Stream stream) {
  cast({n, ElementType::f32}, x, ElementType::bf16, y, stream);
}

void bf16_to_float(int64_t n, const uint16_t* x, float* y, Stream stream) {
  cast({n, ElementType::bf16}, x, ElementType::f32, y, stream);
}

}  // namespace ringtrain::kernels::cuda
