// Owns the row-wise softmax between attention's products on the CPU, forward and backward, over one row of fp32
// values in place: what both CPU routes of the core run (attention.cpp's tiles and dnnl_attention.cpp's batched
// products), with kernels/attention.h's formulas, a chunk of 16 values at a time (float_lanes.h; e^x there within
// 2 ulp of expf). A row's sums are taken in lanes and then across them, the same order for a row of the same length
// wherever it lies, so either route gives the same bits in either layout and on any thread count.
#pragma once
#include <cmath>

#include "kernels/cpu/float_lanes.h"

namespace ringtrain::kernels::cpu {

// row (t values) = its softmax: p_j = e^(s_j - max) / sum_i e^(s_i - max).
inline void softmax_row(float* row, int t) {
  const int whole = t / kFloatLanes * kFloatLanes, rest = t - whole;
  FloatLanes most = FloatLanes{} - INFINITY;
  for (int j = 0; j < whole; j += kFloatLanes) {
    const FloatLanes v = load_lanes(row + j);
    most = v > most ? v : most;
  }
  if (rest > 0) {
    const FloatLanes v = load_part(row + whole, rest, -INFINITY);
    most = v > most ? v : most;
  }
  const float row_max = max_lanes(most);
  FloatLanes sums{};
  for (int j = 0; j < whole; j += kFloatLanes) {
    const FloatLanes e = exp_lanes(load_lanes(row + j) - row_max);
    sums += e;
    store_lanes(e, row + j);
  }
  if (rest > 0) {
    const FloatLanes e = exp_lanes(load_part(row + whole, rest, -INFINITY) - row_max);  // the padding's e is 0
    sums += e;
    store_part(e, rest, row + whole);
  }
  const float sum = sum_lanes(sums);
  for (int j = 0; j < whole; j += kFloatLanes) store_lanes(load_lanes(row + j) / sum, row + j);
  if (rest > 0) store_part(load_part(row + whole, rest, 0) / sum, rest, row + whole);
}

// dp (t values) = the softmax's backward of dp, given its output p: ds_j = p_j (dp_j - sum_i p_i dp_i).
inline void softmax_backward_row(const float* p, float* dp, int t) {
  const int whole = t / kFloatLanes * kFloatLanes, rest = t - whole;
  FloatLanes dots{};
  for (int j = 0; j < whole; j += kFloatLanes) dots += load_lanes(p + j) * load_lanes(dp + j);
  if (rest > 0) dots += load_part(p + whole, rest, 0) * load_part(dp + whole, rest, 0);
  const float dot = sum_lanes(dots);
  for (int j = 0; j < whole; j += kFloatLanes) {
    const FloatLanes pj = load_lanes(p + j);
    store_lanes(pj * (load_lanes(dp + j) - dot), dp + j);
  }
  if (rest > 0) {
    const FloatLanes pj = load_part(p + whole, rest, 0);
    store_part(pj * (load_part(dp + whole, rest, 0) - dot), rest, dp + whole);
  }
}

}  // namespace ringtrain::kernels::cpu
