// Owns fully connected layers on the CPU: y = x W^T + b with W stored out x in (PyTorch's layout).
#pragma once
#include "kernels/element_type.h"

namespace ringtrain::kernels::cpu {

void dense_forward(int batch, int in, int out, const float* x, const float* w, const float* bias, float* y);
// dx (may be null for the first layer) is overwritten; dw and dbias accumulate (see conv2d.h).
void dense_backward(int batch, int in, int out, const float* x, const float* w, const float* dy, float* dx,
                    float* dw, float* dbias);
// dbias += the column sums of dy (batch x out, stored as `type`), each column summed row by row from its value in
// dbias, each 16-bit value widened as it is read (the sums in registers, stored_lanes.h); the compute threads take
// runs of columns, so the bits are one thread's.
void dense_bias_gradient(int batch, int out, ElementType type, const void* dy, float* dbias);

}  // namespace ringtrain::kernels::cpu
