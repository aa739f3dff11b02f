// Owns the CPU twin's multi-head self-attention: kernels/attention.h's products one sample and head at a time, the
// samples shared among the compute threads (each sample one thread's, so the same bits on any count), with the
// row-wise softmax between them in fp32. The token tensors (qkv, y and their gradients) are fp32 in
// either layout; the kept probabilities are in the shape's element type, rounded as a GPU keeps them, and the product
// with V and the backward pass read the rounded values. The CUDA version: src/backend/cuda/attention_ops.cpp
// (cuBLAS) with kernels/cuda/attention.h (the softmax).
#pragma once
#include <cstddef>
#include <vector>

#include "kernels/activation_layout.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// Each compute thread's T x T scores and their gradient, reused from call to call.
struct AttentionWorkspace {
  std::vector<float> square, gradient;
  std::size_t bytes() const { return (square.capacity() + gradient.capacity()) * sizeof(float); }
};

// y = per head softmax(Q K^T / sqrt(head_dim)) V; probabilities (s.data) = the softmax's output.
void attention_forward(const AttentionShape& s, ActivationLayout layout, const float* qkv, float* y,
                       void* probabilities, AttentionWorkspace& ws);
// dqkv (overwritten) = the gradient of qkv given dy.
void attention_backward(const AttentionShape& s, ActivationLayout layout, const float* qkv, const void* probabilities,
                        const float* dy, float* dqkv, AttentionWorkspace& ws);

}  // namespace ringtrain::kernels::cpu
