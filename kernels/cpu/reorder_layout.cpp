// Owns the NCHW <-> NHWC reorder declared in reorder_layout.h: per sample, a c x hw matrix transposed, in tiles so
// both sides stream through the cache.
#include "kernels/cpu/reorder_layout.h"

#include <algorithm>
#include <cstring>

namespace ringtrain::kernels::cpu {
namespace {

constexpr int64_t kTile = 32;

// y (cols x rows) = x (rows x cols) transposed, `bytes` per value.
void transpose(const std::byte* x, int64_t rows, int64_t cols, std::size_t bytes, std::byte* y) {
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
          std::memcpy(y + static_cast<std::size_t>(c * rows + r) * bytes,
                      x + static_cast<std::size_t>(r * cols + c) * bytes, bytes);
}

}  // namespace

void reorder_layout(const Planes& p, ActivationLayout to, const void* x, void* y) {
  const std::size_t bytes = element_bytes(p.type);
  const auto per_sample = static_cast<std::size_t>(p.c * p.hw) * bytes;
  const auto* in = static_cast<const std::byte*>(x);
  auto* out = static_cast<std::byte*>(y);
  for (int64_t n = 0; n < p.n; ++n) {
    const std::size_t at = static_cast<std::size_t>(n) * per_sample;
    if (to == ActivationLayout::nhwc) transpose(in + at, p.c, p.hw, bytes, out + at);   // c x hw -> hw x c
    else transpose(in + at, p.hw, p.c, bytes, out + at);                              // hw x c -> c x hw
  }
}

}  // namespace ringtrain::kernels::cpu
