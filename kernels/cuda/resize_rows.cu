// Owns the row resize declared in resize_rows.h: one thread per output value, a grid-stride loop; the rows are
// short (3 to a few hundred values), so consecutive threads walk consecutive rows' values and the writes coalesce.
#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/resize_rows.h"

namespace ringtrain::kernels::cuda {
namespace {

template <class T>
__global__ void resize_rows_kernel(int64_t rows, int64_t from, int64_t to, const T* x, T* y) {
  const int64_t total = rows * to;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / to, col = i % to;
    y[i] = col < from ? x[row * from + col] : T{0};
  }
}

}  // namespace

void resize_rows(const ResizedRows& r, const void* x, void* y, Stream stream) {
  const int64_t total = r.rows * r.to;
  if (total <= 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535 * 8));
  if (element_bytes(r.type) == 2)
    resize_rows_kernel<<<blocks, kThreads, 0, stream>>>(r.rows, r.from, r.to, static_cast<const uint16_t*>(x),
                                                        static_cast<uint16_t*>(y));
  else
    resize_rows_kernel<<<blocks, kThreads, 0, stream>>>(r.rows, r.from, r.to, static_cast<const uint32_t*>(x),
                                                        static_cast<uint32_t*>(y));
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
