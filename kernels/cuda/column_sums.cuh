// Owns the per-channel sums over all positions of a tensor whose channels are contiguous per position (NHWC, or one
// position per sample): a matrix of `rows` positions by `columns` channels, row-major. A warp reads 32 neighbouring
// channels of a row (coalesced, where one block per channel striding by C is not): blocks over (32 channels, a chunk
// of rows) write each chunk's sums into scratch, then one thread per channel adds the chunks in order into fp32
// outputs (+=, as parameter gradients accumulate). Chunks depend on the shape alone and nothing is added atomically,
// so results are bit-reproducible. Internal to kernels/cuda: only .cu files include it.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda::detail {

constexpr int kColumnWidth = 32, kColumnLanes = 8;
// At most this many chunks, so that the final pass adds a few hundred partial sums per channel; chunks of at least
// kMinChunkRows rows, so that a small tensor is not spread over more blocks than it has work for.
constexpr int64_t kMaxColumnChunks = 512, kMinChunkRows = 256;

struct ColumnChunks {
  int64_t rows_per_chunk = 1, chunks = 0;
};
inline ColumnChunks column_chunks(int64_t rows) {
  const int64_t per = std::max(kMinChunkRows, (rows + kMaxColumnChunks - 1) / kMaxColumnChunks);
  return {per, (rows + per - 1) / per};
}
// The scratch the sums of a rows x columns matrix need.
inline std::size_t column_sums_scratch_bytes(int64_t rows, int64_t columns) {
  return static_cast<std::size_t>(column_chunks(rows).chunks * columns) * sizeof(PairSum);
}

// `term(row, column, sums)` adds that value's terms into sums.a and sums.b.
template <class Term>
__global__ void column_partials_kernel(int64_t rows, int64_t columns, int64_t rows_per_chunk, Term term,
                                       PairSum* partials) {
  __shared__ double a[kColumnLanes][kColumnWidth], b[kColumnLanes][kColumnWidth];
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kColumnWidth + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = min(rows, first + rows_per_chunk);
  PairSum mine;
  if (column < columns)
    for (int64_t row = first + threadIdx.y; row < end; row += kColumnLanes) term(row, column, mine);
  a[threadIdx.y][threadIdx.x] = mine.a, b[threadIdx.y][threadIdx.x] = mine.b;
  __syncthreads();
  if (threadIdx.y != 0 || column >= columns) return;
  PairSum chunk;
  for (int lane = 0; lane < kColumnLanes; ++lane) chunk.a += a[lane][threadIdx.x], chunk.b += b[lane][threadIdx.x];
  partials[static_cast<int64_t>(blockIdx.y) * columns + column] = chunk;
}

// b_out null: only the a sums are wanted. (A template, as every kernel in this header, so that each .cu file that
// includes it may instantiate it.)
template <class Partial>
__global__ void column_totals_kernel(int64_t chunks, int64_t columns, const Partial* partials, float* a_out,
                                     float* b_out) {
  for (int64_t column = global_index(); column < columns; column += grid_stride()) {
    PairSum total;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const Partial part = partials[chunk * columns + column];
      total.a += part.a, total.b += part.b;
    }
    a_out[column] += static_cast<float>(total.a);
    if (b_out) b_out[column] += static_cast<float>(total.b);
  }
}

// a_out[c] += the sum over rows of term's a, b_out[c] (where not null) += of its b; `scratch` holds
// column_sums_scratch_bytes(rows, columns).
template <class Term>
void column_sums(int64_t rows, int64_t columns, Term term, void* scratch, float* a_out, float* b_out,
                 Stream stream) {
  if (rows <= 0 || columns <= 0) return;
  const ColumnChunks c = column_chunks(rows);
  auto* partials = static_cast<PairSum*>(scratch);
  const dim3 grid(static_cast<unsigned>((columns + kColumnWidth - 1) / kColumnWidth), static_cast<unsigned>(c.chunks));
  column_partials_kernel<<<grid, dim3(kColumnWidth, kColumnLanes), 0, stream>>>(rows, columns, c.rows_per_chunk, term,
                                                                                 partials);
  RT_CHECK_LAUNCH();
  column_totals_kernel<<<blocks_for(columns), kThreads, 0, stream>>>(c.chunks, columns, partials, a_out, b_out);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda::detail
