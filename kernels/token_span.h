// Owns how the token operations (a ViT's class token, position embedding and class-token readout) address an
// activation of tokens: Shape {n, D, T, 1}, D features of each of T tokens, as kernels/activation_layout.h's Planes
// {n, c = D, hw = T}. Token t's feature d lies at d * T + t within a sample stored NCHW, at t * D + d stored NHWC;
// the learned tables are fp32 and token-major (row t holds token t's D features, torch's (1, T, D) bytes) whatever
// the activations' layout. The CPU and CUDA kernels both walk a span through token_element and token_offset.
#pragma once
#include <cstdint>

#include "kernels/activation_layout.h"
#include "kernels/host_device.h"

namespace ringtrain::kernels {

// The tokens [first, first + count) of every sample of a tensor of `tokens` planes.
struct TokenSpan {
  Planes tokens;  // n samples, c = D features, hw = T tokens, stored as type
  int64_t first = 0, count = 0;
  int64_t elements() const { return tokens.n * count * tokens.c; }
};

// count tokens of every sample, from tokens [from_first, ...) of a tensor of `from` planes to tokens [to_first, ...)
// of one of `to` planes (the same samples, features and element type).
struct TokenCopy {
  Planes from, to;
  int64_t from_first = 0, to_first = 0, count = 0;
  int64_t elements() const { return from.n * count * from.c; }
};

// Element i of a span walked feature fastest, then token, then sample; token counts from the span's first.
struct TokenElement {
  int64_t sample, token, feature;
};
RT_HOST_DEVICE inline TokenElement token_element(int64_t i, int64_t count, int64_t features) {
  const int64_t row = i / features;
  return {row / count, row % count, i % features};
}

// Where feature e.feature of token `token` of sample e.sample lies in a tensor of `tokens` per sample and `features`
// per token, stored with strides st (kernels::plane_strides).
RT_HOST_DEVICE inline int64_t token_offset(const TokenElement& e, int64_t token, int64_t features, int64_t tokens,
                                           PlaneStrides st) {
  return e.sample * features * tokens + e.feature * st.channel + token * st.position;
}

}  // namespace ringtrain::kernels
