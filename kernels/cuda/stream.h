// Owns the one CUDA type the kernel headers expose: a stream handle. Forward-declared (it is the same type as
// cudaStream_t) so host code that calls our kernels needs no CUDA header.
#pragma once

struct CUstream_st;

namespace ringtrain::kernels::cuda {

using Stream = CUstream_st*;  // == cudaStream_t

}  // namespace ringtrain::kernels::cuda
