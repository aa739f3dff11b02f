// Owns the reorder declared in reorder_layout.h: per sample a rows x cols matrix transposed through 32 x 32 tiles in
// shared memory (one padding column keeps the tile's column reads free of bank conflicts), so both the reads and
// the writes are coalesced. Samples run along the grid's z.
#include <cstdint>
#include <string>

#include "common/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reorder_layout.h"

namespace ringtrain::kernels::cuda {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

// y (cols x rows) = x (rows x cols), per sample; T is the values' bits.
template <class T>
__global__ void transpose_kernel(int64_t rows, int64_t cols, const T* x, T* y) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t at = static_cast<int64_t>(blockIdx.z) * rows * cols;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile, c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int i = static_cast<int>(threadIdx.y); i < kTile; i += kRowsPerPass) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = x[at + r * cols + c];
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.y); i < kTile; i += kRowsPerPass) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (c < cols && r < rows) y[at + c * rows + r] = tile[threadIdx.x][i];
  }
}

}  // namespace

void reorder_layout(const Planes& p, ActivationLayout to, const void* x, void* y, Stream stream) {
  if (p.elements() <= 0) return;
  // To NHWC each sample's c x hw matrix is transposed; to NCHW its hw x c one.
  const int64_t rows = to == ActivationLayout::nhwc ? p.c : p.hw, cols = to == ActivationLayout::nhwc ? p.hw : p.c;
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  if (p.n > 65535 || row_tiles > 65535 || col_tiles > 2147483647)
    throw JobFileError("reordering " + std::to_string(p.n) + " x " + std::to_string(p.c) + " x " + std::to_string(p.hw) +
                       " values on the GPU: at most 65535 samples and 2 M rows per sample; lower train.batch_size");
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_tiles), static_cast<unsigned>(p.n));
  const dim3 block(kTile, kRowsPerPass);
  if (element_bytes(p.type) == 2)
    transpose_kernel<<<grid, block, 0, stream>>>(rows, cols, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y));
  else
    transpose_kernel<<<grid, block, 0, stream>>>(rows, cols, static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y));
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
