// Owns the row-wise softmax between multi-head attention's products on the GPU (kernels/attention.h; the products
// themselves are cuBLAS's, src/backend/cuda/attention_ops.cpp): forward from one head's fp32 scores to the kept
// probabilities in the element type, and backward from those probabilities and the fp32 gradient of them to the
// scores' gradient in the element type, the operand of the next products. One block per row, fp32 arithmetic, the
// block's reductions in a fixed tree order (deterministic). The CPU twin is kernels/cpu/attention.h.
#pragma once
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// The rows of one head of every sample: `samples` x T rows of T values. Row i of sample n lies at
// n * square.sample_stride + square.offset + i * square.ld in the tensor `square` views.
struct SquareRows {
  int samples = 0, tokens = 0;
  MatrixView square;
  int64_t rows() const { return int64_t{samples} * tokens; }
};

// probabilities (in `probabilities`' rows, of `type`) = softmax of each row of scores (fp32, in `scores`' rows).
void softmax_rows(const SquareRows& scores, const float* score_data, const SquareRows& probabilities, ElementType type,
                  void* probability_data, Stream stream);
// d_scores (of `type`, in `gradients`' rows) = p (dp - sum(p dp)) per row, p of `type` in `probabilities`' rows,
// dp fp32 in `gradients`' rows of dp_data.
void softmax_backward_rows(const SquareRows& probabilities, ElementType type, const void* probability_data,
                           const SquareRows& gradients, const float* dp_data, void* d_score_data, Stream stream);

}  // namespace ringtrain::kernels::cuda
