// Owns the loss kernels declared in softmax_cross_entropy.h: one warp per sample (max, log-sum-exp, gradient),
// then one block that sums the per-sample results in a fixed order.
#include <cfloat>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/softmax_cross_entropy.h"

namespace ringtrain::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr unsigned kFullMask = 0xffffffffu;

struct RowResult {
  float loss;
  int32_t correct;  // 1 or 0
  int32_t bad;      // 1 when the label is out of range
};

__global__ void loss_rows_kernel(int batch, int classes, const float* logits, const int32_t* labels, float grad_scale,
                                 float smoothing, float* dlogits, RowResult* rows) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x) / 32;
  if (row >= batch) return;  // whole warps leave together, so the shuffles below see full warps
  const float* z = logits + static_cast<int64_t>(row) * classes;

  // Maximum and its first index: each lane scans its strided columns in increasing order, then the warp keeps
  // the larger value, or the smaller index on a tie.
  float best = -FLT_MAX;
  int best_at = classes;
  for (int j = lane; j < classes; j += 32)
    if (z[j] > best || best_at == classes) best = z[j], best_at = j;
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, best, offset);
    const int other_at = __shfl_xor_sync(kFullMask, best_at, offset);
    if (other > best || (other == best && other_at < best_at)) best = other, best_at = other_at;
  }

  float sum = 0.0f;
  for (int j = lane; j < classes; j += 32) sum += expf(z[j] - best);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);

  // Smoothed, the loss also takes the mean over the classes of -log softmax(z), which needs sum(z - max).
  float shifted_sum = 0.0f;
  if (smoothing != 0.0f) {
    for (int j = lane; j < classes; j += 32) shifted_sum += z[j] - best;
    for (int offset = 16; offset > 0; offset /= 2) shifted_sum += __shfl_xor_sync(kFullMask, shifted_sum, offset);
  }

  const int label = labels[row];
  const bool valid = label >= 0 && label < classes;
  const float on_label = 1.0f - smoothing, everywhere = smoothing / static_cast<float>(classes);
  if (dlogits) {
    float* d = dlogits + static_cast<int64_t>(row) * classes;
    const float inv_sum = 1.0f / sum;
    for (int j = lane; j < classes; j += 32) {
      const float target = valid ? (j == label ? on_label : 0.0f) + everywhere : 0.0f;
      d[j] = (expf(z[j] - best) * inv_sum - target) * grad_scale;
    }
  }
  if (lane == 0) {
    // -log softmax(z)[label] = log(sum exp(z - max)) - (z[label] - max)
    float loss = 0.0f;
    if (valid) {
      const float label_term = logf(sum) - (z[label] - best);
      loss = smoothing == 0.0f
                 ? label_term
                 : on_label * label_term + smoothing * (logf(sum) - shifted_sum / static_cast<float>(classes));
    }
    rows[row] = {loss, valid && best_at == label ? 1 : 0, valid ? 0 : 1};
  }
}

constexpr int kReduceThreads = 256;

__global__ void loss_totals_kernel(int batch, const RowResult* rows, LossTotals* totals) {
  __shared__ double loss[kReduceThreads];
  __shared__ long long correct[kReduceThreads], bad[kReduceThreads];
  double l = 0;
  long long c = 0, b = 0;
  for (int i = static_cast<int>(threadIdx.x); i < batch; i += kReduceThreads) {
    l += rows[i].loss;
    c += rows[i].correct;
    b += rows[i].bad;
  }
  loss[threadIdx.x] = l, correct[threadIdx.x] = c, bad[threadIdx.x] = b;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      correct[threadIdx.x] += correct[threadIdx.x + half];
      bad[threadIdx.x] += bad[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals->loss_sum += loss[0];
    totals->correct += correct[0];
    totals->bad_labels += bad[0];
  }
}

}  // namespace

std::size_t softmax_cross_entropy_workspace_bytes(int batch) {
  return sizeof(RowResult) * static_cast<std::size_t>(batch > 0 ? batch : 1);
}

void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                           const LossSettings& settings, float* dlogits, void* workspace, LossTotals* totals,
                           Stream stream) {
  auto* rows = static_cast<RowResult*>(workspace);
  if (batch > 0 && classes > 0) {
    const unsigned blocks = static_cast<unsigned>((batch + kWarpsPerBlock - 1) / kWarpsPerBlock);
    loss_rows_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(batch, classes, logits, labels, settings.grad_scale,
                                                                 settings.label_smoothing, dlogits, rows);
    RT_CHECK_LAUNCH();
  }
  loss_totals_kernel<<<1, kReduceThreads, 0, stream>>>(batch > 0 && classes > 0 ? batch : 0, rows, totals);
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
