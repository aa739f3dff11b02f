// Owns the row resize declared in resize_rows.h.
#include "kernels/cpu/resize_rows.h"

#include <algorithm>
#include <cstring>

namespace ringtrain::kernels::cpu {

void resize_rows(const ResizedRows& r, const void* x, void* y) {
  const std::size_t bytes = element_bytes(r.type);
  const std::size_t kept = static_cast<std::size_t>(std::min(r.from, r.to)) * bytes;
  const std::size_t in_row = static_cast<std::size_t>(r.from) * bytes, out_row = static_cast<std::size_t>(r.to) * bytes;
  const auto* in = static_cast<const std::byte*>(x);
  auto* out = static_cast<std::byte*>(y);
  for (int64_t i = 0; i < r.rows; ++i) {
    std::byte* row = out + static_cast<std::size_t>(i) * out_row;
    std::memcpy(row, in + static_cast<std::size_t>(i) * in_row, kept);
    std::memset(row + kept, 0, out_row - kept);  // zero bits: +0 in every element type
  }
}

}  // namespace ringtrain::kernels::cpu
