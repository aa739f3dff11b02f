// Owns spatial batch normalisation on the CPU (per channel over N x H x W), training and inference forms.
#pragma once
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// Training: normalises with batch statistics, saves mean and 1/sqrt(var+eps) for backward, and updates the
// running statistics as running = (1-momentum)*running + momentum*batch (unbiased variance for running_var).
// relu: y = relu(batch norm), in the same pass and with the same arithmetic as relu_forward after it (fusion).
void batchnorm_forward_train(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var, float* y,
                             float* saved_mean, float* saved_inv_std, bool relu = false);
void batchnorm_forward_infer(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float eps, float* y,
                             bool relu = false);
// dx overwritten; dgamma and dbeta accumulate. relu_y: the fused forward's output, whose zeros mask dy as
// relu_backward would (null: no ReLU); the result is bit-identical to relu_backward followed by this.
void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy, const float* gamma,
                        const float* saved_mean, const float* saved_inv_std, float* dx, float* dgamma, float* dbeta,
                        const float* relu_y = nullptr);

}  // namespace ringtrain::kernels::cpu
