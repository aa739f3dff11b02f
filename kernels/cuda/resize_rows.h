// Owns the row resize (kernels/resized_rows.h) on the GPU, the CUDA twin of kernels/cpu/resize_rows.h.
#pragma once
#include "kernels/cuda/stream.h"
#include "kernels/resized_rows.h"

namespace ringtrain::kernels::cuda {

// y (r.rows x r.to) = x (r.rows x r.from) resized: copied bit for bit, zero past r.from, in stream order.
void resize_rows(const ResizedRows& r, const void* x, void* y, Stream stream);

}  // namespace ringtrain::kernels::cuda
