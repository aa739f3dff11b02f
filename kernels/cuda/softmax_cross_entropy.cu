// Owns the loss kernels declared in softmax_cross_entropy.h, hard labels and soft targets: one warp per sample (max,
// log-sum-exp, gradient), then one block that sums the per-sample results in a fixed order.
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

// A row's maximum and its first index, known to every lane: each lane scans its strided columns in increasing
// order, then the warp keeps the larger value, or the smaller index on a tie.
struct RowMax {
  float value;
  int at;
};

__device__ RowMax warp_row_max(const float* v, int classes, int lane) {
  RowMax m{-FLT_MAX, classes};
  for (int j = lane; j < classes; j += 32)
    if (v[j] > m.value || m.at == classes) m = {v[j], j};
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, m.value, offset);
    const int other_at = __shfl_xor_sync(kFullMask, m.at, offset);
    if (other > m.value || (other == m.value && other_at < m.at)) m = {other, other_at};
  }
  return m;
}

// The warp's sum of each lane's `x`, known to every lane; the butterfly's order is fixed, so it is deterministic.
__device__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

// sum(exp(z - max)) over a row.
__device__ float warp_exp_sum(const float* z, int classes, float max, int lane) {
  float sum = 0.0f;
  for (int j = lane; j < classes; j += 32) sum += expf(z[j] - max);
  return warp_sum(sum);
}

__global__ void loss_rows_kernel(int batch, int classes, const float* logits, const int32_t* labels, float grad_scale,
                                 float smoothing, float* dlogits, RowResult* rows) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x) / 32;
  if (row >= batch) return;  // whole warps leave together, so the shuffles below see full warps
  const float* z = logits + static_cast<int64_t>(row) * classes;

  const RowMax top = warp_row_max(z, classes, lane);
  const float best = top.value;
  const int best_at = top.at;
  const float sum = warp_exp_sum(z, classes, best, lane);

  // Smoothed, the loss also takes the mean over the classes of -log softmax(z), which needs sum(z - max).
  float shifted_sum = 0.0f;
  if (smoothing != 0.0f) {
    for (int j = lane; j < classes; j += 32) shifted_sum += z[j] - best;
    shifted_sum = warp_sum(shifted_sum);
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

// Soft targets (kernels/cpu/softmax_cross_entropy.h): one warp per row as above. t is the row's target
// distribution, or zeros where the row has none; smoothed, (1 - e) t + e x mass / classes.
__global__ void soft_loss_rows_kernel(int batch, int classes, const float* logits, const float* targets,
                                      float grad_scale, float smoothing, float* dlogits, RowResult* rows) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x) / 32;
  if (row >= batch) return;  // whole warps leave together, so the shuffles below see full warps
  const float* z = logits + static_cast<int64_t>(row) * classes;
  const float* t = targets + static_cast<int64_t>(row) * classes;

  const RowMax top = warp_row_max(z, classes, lane);
  const RowMax dominant = warp_row_max(t, classes, lane);
  const float sum = warp_exp_sum(z, classes, top.value, lane);
  float mass = 0.0f;
  for (int j = lane; j < classes; j += 32) mass += t[j];
  mass = warp_sum(mass);
  const bool valid = mass > 0.0f;
  const float everywhere = smoothing * mass / static_cast<float>(classes);
  const float log_sum = logf(sum);

  float loss = 0.0f;
  for (int j = lane; j < classes; j += 32)
    loss += ((1.0f - smoothing) * t[j] + everywhere) * (log_sum - (z[j] - top.value));
  loss = warp_sum(loss);
  if (dlogits) {
    float* d = dlogits + static_cast<int64_t>(row) * classes;
    const float inv_sum = 1.0f / sum;
    for (int j = lane; j < classes; j += 32) {
      const float target = valid ? (1.0f - smoothing) * t[j] + everywhere : 0.0f;
      d[j] = (expf(z[j] - top.value) * inv_sum - target) * grad_scale;
    }
  }
  if (lane == 0) rows[row] = {valid ? loss : 0.0f, valid && top.at == dominant.at ? 1 : 0, valid ? 0 : 1};
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

namespace {

// Runs `rows_kernel` (one warp per row, results in `workspace`) and then adds the rows to `totals`.
template <class RowsKernel, class Targets>
void launch_loss(RowsKernel rows_kernel, int batch, int classes, const float* logits, Targets targets,
                 const LossSettings& settings, float* dlogits, void* workspace, LossTotals* totals, Stream stream) {
  auto* rows = static_cast<RowResult*>(workspace);
  if (batch > 0 && classes > 0) {
    const unsigned blocks = static_cast<unsigned>((batch + kWarpsPerBlock - 1) / kWarpsPerBlock);
    rows_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(batch, classes, logits, targets, settings.grad_scale,
                                                            settings.label_smoothing, dlogits, rows);
    RT_CHECK_LAUNCH();
  }
  loss_totals_kernel<<<1, kReduceThreads, 0, stream>>>(batch > 0 && classes > 0 ? batch : 0, rows, totals);
  RT_CHECK_LAUNCH();
}

}  // namespace

void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                           const LossSettings& settings, float* dlogits, void* workspace, LossTotals* totals,
                           Stream stream) {
  launch_loss(loss_rows_kernel, batch, classes, logits, labels, settings, dlogits, workspace, totals, stream);
}

void soft_target_cross_entropy(int batch, int classes, const float* logits, const float* targets,
                               const LossSettings& settings, float* dlogits, void* workspace, LossTotals* totals,
                               Stream stream) {
  launch_loss(soft_loss_rows_kernel, batch, classes, logits, targets, settings, dlogits, workspace, totals, stream);
}

}  // namespace ringtrain::kernels::cuda
