// Owns the CPU twin's multi-head self-attention: kernels/attention.h's products one sample and head at a time, the
// (sample, head) pairs shared among the compute threads (each pair one thread's, so the same bits on any count), with
// the row-wise softmax between them in fp32. The tensors (qkv, y, their gradients) are read and written as stored, in
// the shape's element type and either layout: each pair's matrices are widened into fp32 tiles of the thread's own
// and its outputs narrowed from them (round to nearest even), as a GPU kernel over 16-bit tensors computes in fp32.
// The kept probabilities are in the element type too, rounded as a GPU keeps them; the product with V and the backward
// pass read the rounded values. The CUDA version: src/backend/cuda/attention_ops.cpp (cuBLAS) with
// kernels/cuda/attention.h (the softmax). Long bf16 sequences on a CPU with AMX take dnnl_attention.h instead.
#pragma once
#include <cstddef>
#include <vector>

#include "kernels/activation_layout.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// Each compute thread's fp32 tiles of one (sample, head) pair, reused from call to call.
struct AttentionWorkspace {
  std::vector<float> tiles;
  std::size_t bytes() const { return tiles.capacity() * sizeof(float); }
};

// y = per head softmax(Q K^T / sqrt(head_dim)) V; probabilities = the softmax's output. Every tensor in s.data; no
// output may overlap an input (here and in backward).
void attention_forward(const AttentionShape& s, ActivationLayout layout, const void* qkv, void* y,
                       void* probabilities, AttentionWorkspace& ws);
// dqkv (overwritten) = the gradient of qkv given dy.
void attention_backward(const AttentionShape& s, ActivationLayout layout, const void* qkv, const void* probabilities,
                        const void* dy, void* dqkv, AttentionWorkspace& ws);

}  // namespace ringtrain::kernels::cpu
