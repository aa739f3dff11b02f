// Owns the token kernels declared in token_table.h, instantiated for the three element types.
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/token_table.h"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;
using detail::load;
using detail::store;

// The numbers a kernel needs of one tensor's tokens.
struct TokenTensor {
  int64_t features, tokens, first;
  PlaneStrides strides;
};
TokenTensor token_tensor(const Planes& p, int64_t first, ActivationLayout layout) {
  return {p.c, p.hw, first, plane_strides(p, layout)};
}

__device__ inline int64_t offset_in(const TokenTensor& t, const TokenElement& e) {
  return token_offset(e, t.first + e.token, t.features, t.tokens, t.strides);
}

template <class T>
__global__ void copy_tokens_kernel(int64_t n, int64_t count, TokenTensor from, TokenTensor to, const T* x, T* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const TokenElement e = token_element(i, count, from.features);
    y[offset_in(to, e)] = x[offset_in(from, e)];
  }
}

template <class T>
__global__ void add_token_table_kernel(int64_t n, int64_t count, TokenTensor s, const T* x, const float* table,
                                       T* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const TokenElement e = token_element(i, count, s.features);
    const int64_t at = offset_in(s, e);
    store(y + at, (x ? load(x + at) : 0.0f) + table[e.token * s.features + e.feature]);
  }
}

// One thread per table value (token t of the span, feature d): i = t * D + d.
template <class T>
__global__ void token_table_gradient_kernel(int64_t values, int64_t samples, TokenTensor s, const T* dy,
                                            float* dtable) {
  for (int64_t i = global_index(); i < values; i += grid_stride()) {
    TokenElement e = token_element(i, values / s.features, s.features);
    double sum = 0;
    for (e.sample = 0; e.sample < samples; ++e.sample) sum += load(dy + offset_in(s, e));
    dtable[i] += static_cast<float>(sum);
  }
}

}  // namespace

void copy_tokens(const TokenCopy& c, ActivationLayout layout, const void* x, void* y, Stream stream) {
  const int64_t n = c.elements();
  if (n <= 0) return;
  detail::with_element(c.from.type, [&](auto t) {
    using T = decltype(t);
    copy_tokens_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
        n, c.count, token_tensor(c.from, c.from_first, layout), token_tensor(c.to, c.to_first, layout),
        static_cast<const T*>(x), static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

void add_token_table(const TokenSpan& s, ActivationLayout layout, const void* x, const float* table, void* y,
                     Stream stream) {
  const int64_t n = s.elements();
  if (n <= 0) return;
  detail::with_element(s.tokens.type, [&](auto t) {
    using T = decltype(t);
    add_token_table_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(
        n, s.count, token_tensor(s.tokens, s.first, layout), static_cast<const T*>(x), table, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

void token_table_gradient(const TokenSpan& s, ActivationLayout layout, const void* dy, float* dtable,
                          Stream stream) {
  const int64_t values = s.count * s.tokens.c;
  if (values <= 0 || s.tokens.n <= 0) return;
  detail::with_element(s.tokens.type, [&](auto t) {
    using T = decltype(t);
    token_table_gradient_kernel<<<detail::blocks_for(values), detail::kThreads, 0, stream>>>(
        values, s.tokens.n, token_tensor(s.tokens, s.first, layout), static_cast<const T*>(dy), dtable);
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
