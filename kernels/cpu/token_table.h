// Owns the token operations on the CPU (kernels/token_span.h): copying a range of tokens between tensors, adding an
// fp32 token-major table to a range of tokens, and that table's gradient, the sum over samples. Activations in any
// stored element type and either layout; a copy moves stored values bit for bit, arithmetic is fp32 (each value
// widened and its result rounded to nearest even, as the GPU's kernels in kernels/cuda/token_table.h).
#pragma once
#include "kernels/activation_layout.h"
#include "kernels/token_span.h"

namespace ringtrain::kernels::cpu {

// y's tokens [c.to_first, c.to_first + c.count) = x's tokens [c.from_first, ...), in each sample.
void copy_tokens(const TokenCopy& c, ActivationLayout layout, const void* x, void* y);
// y's tokens [s.first, s.first + s.count) = x's same tokens (0 where x is null) + table[t * D + d] for span token t;
// y may alias x; y's other tokens are left as they are.
void add_token_table(const TokenSpan& s, ActivationLayout layout, const void* x, const float* table, void* y);
// dtable[t * D + d] += the sum over samples of dy's span token t, feature d (in sample order, in double).
void token_table_gradient(const TokenSpan& s, ActivationLayout layout, const void* dy, float* dtable);

}  // namespace ringtrain::kernels::cpu
