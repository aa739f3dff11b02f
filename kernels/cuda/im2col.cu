// Owns im2col and col2im (im2col.h). im2col: a thread per 8 columns of a row (one 16-byte store), the columns'
// (c, r, s) from a table in shared memory, so no thread divides per value. col2im: a thread per input value walks
// the R x S window positions that can have read it.
#include <cstdint>
#include <string>

#include "common/error.h"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/im2col.h"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::blocks_for;
using detail::global_index;
using detail::grid_stride;

constexpr int kPack = 8;  // 16-bit values per 16-byte store

struct Geometry {
  int channels, in_h, in_w, kernel_h, kernel_w, stride, padding, out_h, out_w, columns;
  int64_t positions;  // output positions: images x OH x OW
};

Geometry geometry_of(const Conv2dShape& s) {
  return {s.in_channels, s.in_h, s.in_w, s.kernel_h, s.kernel_w, s.stride, s.padding, s.out_h(), s.out_w(),
          im2col_columns(s), int64_t{s.batch} * s.out_h() * s.out_w()};
}

// A column's channel and window offset, packed (c << 16 | r << 8 | s), or -1 past C x R x S.
__device__ int column_entry(const Geometry& g, int column) {
  const int window = g.kernel_h * g.kernel_w;
  if (column >= g.channels * window) return -1;
  const int c = column / window, rs = column % window;
  return c << 16 | (rs / g.kernel_w) << 8 | rs % g.kernel_w;
}

__global__ void im2col_kernel(Geometry g, const uint16_t* x, uint16_t* rows) {
  __shared__ int table[kMaxIm2colColumns];
  for (int j = static_cast<int>(threadIdx.x); j < g.columns; j += static_cast<int>(blockDim.x))
    table[j] = column_entry(g, j);
  __syncthreads();
  const int packs_per_row = g.columns / kPack;
  const int64_t packs = g.positions * packs_per_row;
  for (int64_t p = global_index(); p < packs; p += grid_stride()) {
    const int64_t position = p / packs_per_row;
    const int first = static_cast<int>(p - position * packs_per_row) * kPack;
    const int64_t image = position / (int64_t{g.out_h} * g.out_w);
    const int at = static_cast<int>(position - image * g.out_h * g.out_w);
    const int top = at / g.out_w * g.stride - g.padding, left = at % g.out_w * g.stride - g.padding;
    detail::Pack<kPack, uint16_t> out;
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      const int entry = table[first + k];
      const int h = top + (entry >> 8 & 0xff), w = left + (entry & 0xff);
      const bool inside = entry >= 0 && h >= 0 && h < g.in_h && w >= 0 && w < g.in_w;
      out.v[k] = inside ? x[((image * g.in_h + h) * g.in_w + w) * g.channels + (entry >> 16)] : uint16_t{0};
    }
    *reinterpret_cast<detail::Pack<kPack, uint16_t>*>(rows + p * kPack) = out;
  }
}

template <class T>
__global__ void col2im_kernel(Geometry g, int64_t values, const T* rows, T* dx) {
  for (int64_t i = global_index(); i < values; i += grid_stride()) {
    const int c = static_cast<int>(i % g.channels);
    const int64_t pixel = i / g.channels;
    const int w = static_cast<int>(pixel % g.in_w);
    const int64_t image_row = pixel / g.in_w;
    const int h = static_cast<int>(image_row % g.in_h);
    const int64_t image = image_row / g.in_h;
    float sum = 0.0f;
    for (int r = 0; r < g.kernel_h; ++r) {
      const int from_top = h + g.padding - r;
      if (from_top < 0 || from_top % g.stride) continue;
      const int oh = from_top / g.stride;
      if (oh >= g.out_h) continue;
      for (int s = 0; s < g.kernel_w; ++s) {
        const int from_left = w + g.padding - s;
        if (from_left < 0 || from_left % g.stride) continue;
        const int ow = from_left / g.stride;
        if (ow >= g.out_w) continue;
        const int64_t row = (image * g.out_h + oh) * g.out_w + ow;
        sum += detail::load(rows + row * g.columns + (c * g.kernel_h + r) * g.kernel_w + s);
      }
    }
    detail::store(dx + i, sum);
  }
}

void require_sixteen_bit(const Conv2dShape& s, const char* what) {
  if (element_bytes(s.data) != 2)
    throw Error(ExitCode::internal, std::string(what) + " asked of a convolution on fp32 activations");
}

}  // namespace

int im2col_columns(const Conv2dShape& s) {
  const int64_t columns = (int64_t{s.in_channels} * s.kernel_h * s.kernel_w + kPack - 1) / kPack * kPack;
  if (columns > kMaxIm2colColumns || s.kernel_h > 255 || s.kernel_w > 255)
    throw Error(ExitCode::internal, "im2col asked for " + std::to_string(columns) + " columns (at most " +
                                        std::to_string(kMaxIm2colColumns) + ", kernels under 256)");
  return static_cast<int>(columns);
}

void im2col(const Conv2dShape& s, const void* x, void* rows, Stream stream) {
  require_sixteen_bit(s, "im2col");
  const Geometry g = geometry_of(s);
  if (g.positions <= 0) return;
  im2col_kernel<<<blocks_for(g.positions * (g.columns / kPack)), detail::kThreads, 0, stream>>>(
      g, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(rows));
  RT_CHECK_LAUNCH();
}

void col2im(const Conv2dShape& s, const void* rows, void* dx, Stream stream) {
  require_sixteen_bit(s, "col2im");
  const Geometry g = geometry_of(s);
  const int64_t values = int64_t{s.batch} * s.in_h * s.in_w * s.in_channels;
  if (values <= 0) return;
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    col2im_kernel<<<blocks_for(values), detail::kThreads, 0, stream>>>(g, values, static_cast<const T*>(rows),
                                                                        static_cast<T*>(dx));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
