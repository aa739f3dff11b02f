// Owns the LARS and LAMB kernels declared in layerwise.h. Launch shape: blockIdx.y walks the tensors, blockIdx.x
// the chunks of one tensor. A tensor is cut into kChunks interleaved chunks (chunk c holds the elements whose
// block-sized tile index is c modulo kChunks), so every chunk of a large tensor does a similar share.
#include <cmath>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layerwise.h"
#include "kernels/cuda/update_scalars.cuh"

namespace ringtrain::kernels::cuda {
namespace {

constexpr int kChunks = 32, kThreads = 256;

struct SquareSums {
  double a, b;  // LARS: |w|^2, |g|^2; LAMB: |w|^2, |direction|^2
};

// The block's sums, reduced in a fixed order; the result is valid in thread 0.
__device__ SquareSums block_sum(SquareSums mine) {
  __shared__ double a[kThreads], b[kThreads];
  a[threadIdx.x] = mine.a, b[threadIdx.x] = mine.b;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) a[threadIdx.x] += a[threadIdx.x + half], b[threadIdx.x] += b[threadIdx.x + half];
    __syncthreads();
  }
  return {a[0], b[0]};
}

// Calls f(i) for the elements of chunk `chunk` of a tensor of `count` elements, i relative to the tensor.
template <class F>
__device__ void for_chunk(int64_t count, int chunk, F&& f) {
  const int64_t stride = static_cast<int64_t>(kChunks) * kThreads;
  for (int64_t i = static_cast<int64_t>(chunk) * kThreads + threadIdx.x; i < count; i += stride) f(i);
}

// A tensor's sums: its chunks' partial sums added in chunk order.
__device__ SquareSums tensor_sums(const SquareSums* partials, int tensor) {
  SquareSums s{0, 0};
  for (int c = 0; c < kChunks; ++c) s.a += partials[tensor * kChunks + c].a, s.b += partials[tensor * kChunks + c].b;
  return s;
}

__device__ float lamb_direction(float m, float v, float w, float step_scale, float inv_sqrt_c2, float epsilon,
                                float weight_decay) {
  return step_scale * m / (sqrtf(v) * inv_sqrt_c2 + epsilon) + weight_decay * w;
}

__global__ void lars_norms_kernel(int tensors, const TensorRange* ranges, const float* grad, const float* param,
                                  SquareSums* partials) {
  for (int t = static_cast<int>(blockIdx.y); t < tensors; t += static_cast<int>(gridDim.y)) {
    const TensorRange r = ranges[t];
    SquareSums mine{0, 0};
    if (r.adapt)
      for_chunk(r.count, static_cast<int>(blockIdx.x), [&](int64_t i) {
        const double w = param[r.begin + i], g = grad[r.begin + i];
        mine.a += w * w, mine.b += g * g;
      });
    const SquareSums sums = block_sum(mine);
    if (threadIdx.x == 0) partials[t * kChunks + blockIdx.x] = sums;
    __syncthreads();
  }
}

template <class Scalars>
__global__ void lars_apply_kernel(int tensors, const TensorRange* ranges, LarsStep step, Scalars scalars,
                                  float* grad, float* velocity, float* param, const SquareSums* partials) {
  const float lr = scalars.get().lr;
  for (int t = static_cast<int>(blockIdx.y); t < tensors; t += static_cast<int>(gridDim.y)) {
    const TensorRange r = ranges[t];
    float scaled_lr = lr, decay = 0.0f;
    if (r.adapt) {
      const SquareSums s = tensor_sums(partials, t);
      const double wn = sqrt(s.a), gn = sqrt(s.b);
      const float trust = wn > 0 && gn > 0 ? static_cast<float>(step.trust_coefficient * wn /
                                                                (gn + step.weight_decay * wn + step.epsilon))
                                           : 1.0f;
      scaled_lr = lr * trust, decay = step.weight_decay;
    }
    for_chunk(r.count, static_cast<int>(blockIdx.x), [&](int64_t i) {
      const int64_t k = r.begin + i;
      const float change = scaled_lr * (grad[k] + decay * param[k]);
      const float v = step.momentum * velocity[k] + change;
      velocity[k] = v;
      param[k] -= step.nesterov ? step.momentum * v + change : v;
      grad[k] = 0.0f;
    });
  }
}

template <class Scalars>
__global__ void lamb_moments_kernel(int tensors, const TensorRange* ranges, AdamStep step, Scalars scalars,
                                    float* grad, float* m, float* v, const float* param, SquareSums* partials) {
  const UpdateScalars u = scalars.get();
  const float inv_c1 = u.inv_c1, inv_sqrt_c2 = u.inv_sqrt_c2;
  for (int t = static_cast<int>(blockIdx.y); t < tensors; t += static_cast<int>(gridDim.y)) {
    const TensorRange r = ranges[t];
    const float decay = r.adapt ? step.weight_decay : 0.0f;
    SquareSums mine{0, 0};
    for_chunk(r.count, static_cast<int>(blockIdx.x), [&](int64_t i) {
      const int64_t k = r.begin + i;
      const float g = grad[k];
      grad[k] = 0.0f;
      const float mk = step.beta1 * m[k] + step.gradient_weight1 * g;
      const float vk = step.beta2 * v[k] + step.gradient_weight2 * g * g;
      m[k] = mk, v[k] = vk;
      const float d = lamb_direction(mk, vk, param[k], inv_c1, inv_sqrt_c2, step.epsilon, decay);
      mine.a += static_cast<double>(param[k]) * param[k], mine.b += static_cast<double>(d) * d;
    });
    const SquareSums sums = block_sum(mine);
    if (threadIdx.x == 0) partials[t * kChunks + blockIdx.x] = sums;
    __syncthreads();
  }
}

template <class Scalars>
__global__ void lamb_apply_kernel(int tensors, const TensorRange* ranges, AdamStep step, Scalars scalars,
                                  const float* m, const float* v, float* param, const SquareSums* partials) {
  const UpdateScalars u = scalars.get();
  const float inv_c1 = u.inv_c1, inv_sqrt_c2 = u.inv_sqrt_c2;
  for (int t = static_cast<int>(blockIdx.y); t < tensors; t += static_cast<int>(gridDim.y)) {
    const TensorRange r = ranges[t];
    const float decay = r.adapt ? step.weight_decay : 0.0f;
    const SquareSums s = tensor_sums(partials, t);
    const double wn = sqrt(s.a), dn = sqrt(s.b);
    const float trust = r.adapt && wn > 0 && dn > 0 ? static_cast<float>(wn / dn) : 1.0f;
    const float scaled_lr = u.lr * trust;
    for_chunk(r.count, static_cast<int>(blockIdx.x), [&](int64_t i) {
      const int64_t k = r.begin + i;
      param[k] -= scaled_lr * lamb_direction(m[k], v[k], param[k], inv_c1, inv_sqrt_c2, step.epsilon, decay);
    });
  }
}

dim3 grid_for(int tensors) { return dim3(kChunks, static_cast<unsigned>(tensors < 65535 ? tensors : 65535)); }

template <class Scalars>
void launch_lars(int tensors, const TensorRange* ranges, const LarsStep& step, Scalars scalars, float* grad,
                 float* velocity, float* param, void* scratch, Stream stream) {
  if (tensors <= 0) return;
  auto* partials = static_cast<SquareSums*>(scratch);
  lars_norms_kernel<<<grid_for(tensors), kThreads, 0, stream>>>(tensors, ranges, grad, param, partials);
  RT_CHECK_LAUNCH();
  lars_apply_kernel<<<grid_for(tensors), kThreads, 0, stream>>>(tensors, ranges, step, scalars, grad, velocity, param,
                                                                partials);
  RT_CHECK_LAUNCH();
}

template <class Scalars>
void launch_lamb(int tensors, const TensorRange* ranges, const AdamStep& step, Scalars scalars, float* grad, float* m,
                 float* v, float* param, void* scratch, Stream stream) {
  if (tensors <= 0) return;
  auto* partials = static_cast<SquareSums*>(scratch);
  lamb_moments_kernel<<<grid_for(tensors), kThreads, 0, stream>>>(tensors, ranges, step, scalars, grad, m, v, param,
                                                                  partials);
  RT_CHECK_LAUNCH();
  lamb_apply_kernel<<<grid_for(tensors), kThreads, 0, stream>>>(tensors, ranges, step, scalars, m, v, param,
                                                                partials);
  RT_CHECK_LAUNCH();
}

}  // namespace

std::size_t layerwise_scratch_bytes(int tensors) {
  return sizeof(SquareSums) * kChunks * static_cast<std::size_t>(tensors > 0 ? tensors : 1);
}

void lars_update(int tensors, const TensorRange* ranges, const LarsStep& step, float* grad, float* velocity,
                 float* param, void* scratch, Stream stream) {
  launch_lars(tensors, ranges, step, detail::ScalarsByValue{update_scalars(step)}, grad, velocity, param, scratch,
              stream);
}

void lars_update(int tensors, const TensorRange* ranges, const LarsStep& step, const UpdateScalars* scalars,
                 float* grad, float* velocity, float* param, void* scratch, Stream stream) {
  launch_lars(tensors, ranges, step, detail::ScalarsOnDevice{scalars}, grad, velocity, param, scratch, stream);
}

void lamb_update(int tensors, const TensorRange* ranges, const AdamStep& step, float* grad, float* m, float* v,
                 float* param, void* scratch, Stream stream) {
  launch_lamb(tensors, ranges, step, detail::ScalarsByValue{update_scalars(step)}, grad, m, v, param, scratch,
              stream);
}

void lamb_update(int tensors, const TensorRange* ranges, const AdamStep& step, const UpdateScalars* scalars,
                 float* grad, float* m, float* v, float* param, void* scratch, Stream stream) {
  launch_lamb(tensors, ranges, step, detail::ScalarsOnDevice{scalars}, grad, m, v, param, scratch, stream);
}

}  // namespace ringtrain::kernels::cuda
