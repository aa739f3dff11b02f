// Owns the CPU twin of the row resize (kernels/resized_rows.h), the reference the CUDA kernel is tested against.
#pragma once
#include "kernels/resized_rows.h"

namespace ringtrain::kernels::cpu {

// y (r.rows x r.to) = x (r.rows x r.from) resized: copied bit for bit, zero past r.from. x and y do not overlap.
void resize_rows(const ResizedRows& r, const void* x, void* y);

}  // namespace ringtrain::kernels::cpu
