// Owns the CPU twin's attention core on oneDNN's matmul for bf16 tokens: kernels/attention.h's products as the CUDA
// backend runs them on cuBLAS, one batched matmul per head and product over all the batch's samples (a head's matrices
// lie at one offset in every sample, a sample's stride apart, which is the batch dimension's stride), read and written
// in the tensors as stored, in either layout; and the row-wise softmax between them (attention_rows.h) on our threads,
// each row one thread's. As on the GPU, the scores and their gradient are fp32 in scratch of our own, one head at a
// time, and what the softmax writes (the kept probabilities, and backward's scores gradient) is bf16, the operand type
// of the products after. Which shapes take this route, rather than attention.h's tiles, is DnnlOps' rule.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/activation_layout.h"
#include "kernels/cpu/dnnl_context.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

class DnnlAttention {
 public:
  // s.data must be bf16.
  DnnlAttention(DnnlContext& ctx, const AttentionShape& s, ActivationLayout layout);
  // As attention.h's attention_forward and attention_backward.
  void forward(DnnlContext& ctx, const void* qkv, void* y, void* probabilities);
  void backward(DnnlContext& ctx, const void* qkv, const void* probabilities, const void* dy, void* dqkv);
  // oneDNN's name for each product's implementation, the first one's where they agree ("gemm:jit:bf16").
  const std::string& implementation() const { return implementation_; }
  std::size_t working_bytes() const;

 private:
  AttentionShape shape_;
  ActivationLayout layout_;
  std::string implementation_;
  // One head's T x T matrices of every sample: the fp32 scores forward, their fp32 gradient backward.
  std::vector<float> scores_;
  std::vector<uint16_t> scores_gradient_;  // dS, rounded to bf16 for the two products that read it
  std::vector<float> probability_rows_;    // each thread's row of kept probabilities, widened (backward)
  // The products of one head, shared by all heads (a head moves only the tensors' offsets).
  std::optional<PlainPrimitive> scores_product_, output_product_, value_gradient_product_,
      probability_gradient_product_, query_gradient_product_, key_gradient_product_;
};

}  // namespace ringtrain::kernels::cpu
