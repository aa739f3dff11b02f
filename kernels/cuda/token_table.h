// Owns the token operations on the GPU (kernels/token_span.h): copying a range of tokens between tensors, adding an
// fp32 token-major table to a range of tokens, and that table's gradient, in either layout, activations in their
// stored type with fp32 arithmetic (element_access.cuh). The CPU twins are in kernels/cpu/token_table.h. All run
// asynchronously on `stream`.
#pragma once
#include "kernels/activation_layout.h"
#include "kernels/cuda/stream.h"
#include "kernels/token_span.h"

namespace ringtrain::kernels::cuda {

// y's tokens [c.to_first, c.to_first + c.count) = x's tokens [c.from_first, ...), in each sample.
void copy_tokens(const TokenCopy& c, ActivationLayout layout, const void* x, void* y, Stream stream);
// y's tokens [s.first, s.first + s.count) = x's same tokens (0 where x is null) + table[t * D + d]; y may alias x.
void add_token_table(const TokenSpan& s, ActivationLayout layout, const void* x, const float* table, void* y,
                     Stream stream);
// dtable[t * D + d] += the sum over samples of dy's span token t, feature d. Deterministic: one thread per table
// value adds the samples in order, in double.
void token_table_gradient(const TokenSpan& s, ActivationLayout layout, const void* dy, float* dtable, Stream stream);

}  // namespace ringtrain::kernels::cuda
