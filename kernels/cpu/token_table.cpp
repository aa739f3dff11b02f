// Owns the CPU token operations declared in token_table.h: single loops on the calling thread, as the other
// element-wise kernels run; copies move contiguous runs of stored values.
#include "kernels/cpu/token_table.h"

#include <cstddef>
#include <cstring>

#include "kernels/cpu/element_conversion.h"

namespace ringtrain::kernels::cpu {
namespace {

// One stored value of `type` at element i of base, widened or rounded.
float load(const void* base, ElementType type, int64_t i) {
  if (type == ElementType::f32) return static_cast<const float*>(base)[i];
  float v;
  widen({1, type}, static_cast<const std::byte*>(base) + static_cast<std::ptrdiff_t>(element_bytes(type)) * i, &v);
  return v;
}
void store(void* base, ElementType type, int64_t i, float v) {
  if (type == ElementType::f32) {
    static_cast<float*>(base)[i] = v;
    return;
  }
  narrow(&v, {1, type}, static_cast<std::byte*>(base) + static_cast<std::ptrdiff_t>(element_bytes(type)) * i);
}

}  // namespace

// In runs that lie contiguous in both tensors: stored NCHW, each feature's `count` tokens; NHWC, the `count` tokens'
// features together.
void copy_tokens(const TokenCopy& c, ActivationLayout layout, const void* x, void* y) {
  const PlaneStrides from = plane_strides(c.from, layout), to = plane_strides(c.to, layout);
  const bool nhwc = layout == ActivationLayout::nhwc;
  const int64_t runs = nhwc ? 1 : c.from.c, run = nhwc ? c.count * c.from.c : c.count;
  const auto bytes = static_cast<std::ptrdiff_t>(element_bytes(c.from.type));
  const auto* in = static_cast<const std::byte*>(x);
  auto* out = static_cast<std::byte*>(y);
  for (int64_t n = 0; n < c.from.n; ++n)
    for (int64_t r = 0; r < runs; ++r) {
      const TokenElement e{n, 0, nhwc ? 0 : r};
      const int64_t src = token_offset(e, c.from_first, c.from.c, c.from.hw, from);
      const int64_t dst = token_offset(e, c.to_first, c.to.c, c.to.hw, to);
      std::memcpy(out + dst * bytes, in + src * bytes, static_cast<std::size_t>(run * bytes));
    }
}

void add_token_table(const TokenSpan& s, ActivationLayout layout, const void* x, const float* table, void* y) {
  const PlaneStrides st = plane_strides(s.tokens, layout);
  const int64_t features = s.tokens.c;
  for (int64_t i = 0; i < s.elements(); ++i) {
    const TokenElement e = token_element(i, s.count, features);
    const int64_t at = token_offset(e, s.first + e.token, features, s.tokens.hw, st);
    const float base = x ? load(x, s.tokens.type, at) : 0.0f;
    store(y, s.tokens.type, at, base + table[e.token * features + e.feature]);
  }
}

void token_table_gradient(const TokenSpan& s, ActivationLayout layout, const void* dy, float* dtable) {
  const PlaneStrides st = plane_strides(s.tokens, layout);
  const int64_t features = s.tokens.c;
  for (int64_t t = 0; t < s.count; ++t)
    for (int64_t d = 0; d < features; ++d) {
      double sum = 0;
      for (int64_t n = 0; n < s.tokens.n; ++n)
        sum += load(dy, s.tokens.type, token_offset({n, t, d}, s.first + t, features, s.tokens.hw, st));
      dtable[t * features + d] += static_cast<float>(sum);
    }
}

}  // namespace ringtrain::kernels::cpu
