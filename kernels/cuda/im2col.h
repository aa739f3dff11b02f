// Owns the rearrangements that turn a convolution on NHWC activations into one matrix product (im2col), for the
// convolutions cuDNN runs slowly: few input channels (a stem on 3 colour channels), which its tensor-core kernels
// read only padded to 8 channels, multiplying the work by up to 8/3. Column (c x R + r) x S + s of an output
// position's row is the input at the window's (r, s) and channel c: the order of the fp32 KCRS weights, so the
// weight matrix is their 16-bit copy with each filter's row padded. All run asynchronously on `stream`.
#pragma once
#include "kernels/cuda/stream.h"
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cuda {

// The widest row im2col writes (columns), so that its column table fits in a block's shared memory.
inline constexpr int kMaxIm2colColumns = 4096;

// The columns of s's im2col rows: C x R x S rounded up to a multiple of 8 (what the GEMM's tensor cores read).
int im2col_columns(const Conv2dShape& s);

// rows (s.batch x OH x OW rows of im2col_columns(s) values, s.data, 16-bit) from x (s.batch images, NHWC, s.in_channels
// channels): zero where the window leaves the image and past C x R x S. Bits are copied, not rounded.
void im2col(const Conv2dShape& s, const void* x, void* rows, Stream stream);
// dx (NHWC, s.data) = at each input position and channel, the sum over the windows that read it of the rows' values
// there: the data gradient from the rows' gradient. Each value is gathered in a fixed order in fp32 and rounded once:
// deterministic, no atomics.
void col2im(const Conv2dShape& s, const void* rows, void* dx, Stream stream);

}  // namespace ringtrain::kernels::cuda
