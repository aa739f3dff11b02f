// Owns fully connected layers on the CPU: y = x W^T + b with W stored out x in (PyTorch's layout).
#pragma once

namespace ringtrain::kernels::cpu {

void dense_forward(int batch, int in, int out, const float* x, const float* w, const float* bias, float* y);
// dx (may be null for the first layer) is overwritten; dw and dbias accumulate (see conv2d.h).
void dense_backward(int batch, int in, int out, const float* x, const float* w, const float* dy, float* dx,
                    float* dw, float* dbias);
// dbias += the column sums of dy (batch x out), row by row.
void dense_bias_gradient(int batch, int out, const float* dy, float* dbias);

}  // namespace ringtrain::kernels::cpu
