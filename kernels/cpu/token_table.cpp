// Owns the CPU token operations declared in token_table.h: single loops on the calling thread, as the other
// element-wise kernels run; copies and the table's sum move contiguous runs of stored values.
#include "kernels/cpu/token_table.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/cpu/element_conversion.h"

namespace ringtrain::kernels::cpu {
namespace {

// The values in one of for_each_token_run's runs.
int64_t run_length(const TokenSpan& s, ActivationLayout layout) {
  return layout == ActivationLayout::nhwc ? s.tokens.c : s.count;
}
// The span's runs that lie contiguous in the tensor: stored NHWC, a token's features (the table's row, contiguous
// too); NCHW, a feature's `count` tokens (the table's column, a row apart). Calls run(byte offset in the tensor,
// first table index, table stride) for each, sample by sample.
template <class Run>
void for_each_token_run(const TokenSpan& s, ActivationLayout layout, Run&& run) {
  const PlaneStrides st = plane_strides(s.tokens, layout);
  const int64_t features = s.tokens.c;
  const bool nhwc = layout == ActivationLayout::nhwc;
  const auto bytes = static_cast<std::ptrdiff_t>(element_bytes(s.tokens.type));
  for (int64_t n = 0; n < s.tokens.n; ++n)
    for (int64_t r = 0; r < (nhwc ? s.count : features); ++r) {
      const TokenElement e = nhwc ? TokenElement{n, r, 0} : TokenElement{n, 0, r};
      run(token_offset(e, s.first + e.token, features, s.tokens.hw, st) * bytes, e.token * features + e.feature,
          nhwc ? int64_t{1} : features);
    }
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

// Each run widened, added to and rounded back once.
void add_token_table(const TokenSpan& s, ActivationLayout layout, const void* x, const float* table, void* y) {
  const Elements values{run_length(s, layout), s.tokens.type};
  std::vector<float> sums(static_cast<std::size_t>(values.n));
  for_each_token_run(s, layout, [&](std::ptrdiff_t at, int64_t first, int64_t stride) {
    if (x)
      widen(values, static_cast<const std::byte*>(x) + at, sums.data());
    else
      std::fill(sums.begin(), sums.end(), 0.0f);
    for (int64_t j = 0; j < values.n; ++j) sums[static_cast<std::size_t>(j)] += table[first + j * stride];
    narrow(sums.data(), values, static_cast<std::byte*>(y) + at);
  });
}

// Each run widened once and added into the table's double sums, which take the samples in order.
void token_table_gradient(const TokenSpan& s, ActivationLayout layout, const void* dy, float* dtable) {
  const Elements values{run_length(s, layout), s.tokens.type};
  std::vector<float> wide(static_cast<std::size_t>(values.n));
  std::vector<double> sums(static_cast<std::size_t>(s.count * s.tokens.c));
  for_each_token_run(s, layout, [&](std::ptrdiff_t at, int64_t first, int64_t stride) {
    widen(values, static_cast<const std::byte*>(dy) + at, wide.data());
    for (int64_t j = 0; j < values.n; ++j)
      sums[static_cast<std::size_t>(first + j * stride)] += wide[static_cast<std::size_t>(j)];
  });
  for (std::size_t i = 0; i < sums.size(); ++i) dtable[i] += static_cast<float>(sums[i]);
}

}  // namespace ringtrain::kernels::cpu
