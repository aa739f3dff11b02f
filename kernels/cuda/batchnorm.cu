// Owns the batch-norm kernels declared in batchnorm.h: each block owns one channel, reads its values in
// detail::for_channel's order for the sums, and then writes them.
#include <cmath>

#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::for_channel;
using detail::load;
using detail::PairSum;
using detail::store;

struct Sizes {
  int batch, channels, spatial;
  __device__ double count() const { return static_cast<double>(batch) * spatial; }
};

Sizes sizes_of(const BatchNormShape& s) { return {s.batch, s.channels, s.spatial}; }

// y = x * scale + shift over channel c.
template <class T>
__device__ void affine_channel(Sizes z, int c, const T* x, float scale, float shift, T* y) {
  for_channel(z.batch, z.channels, z.spatial, c, [&](int64_t i) { store(y + i, fmaf(load(x + i), scale, shift)); });
}

template <class T>
__global__ void forward_train_kernel(Sizes z, const T* x, const float* gamma, const float* beta, double momentum,
                                     double epsilon, float* running_mean, float* running_var, T* y, float* saved_mean,
                                     float* saved_inv_std) {
  const int c = static_cast<int>(blockIdx.x);
  PairSum sum;
  for_channel(z.batch, z.channels, z.spatial, c, [&](int64_t i) { sum.a += load(x + i); });
  const double mean = detail::block_sum(sum).a / z.count();
  const float mean_f = static_cast<float>(mean);
  PairSum squares;
  for_channel(z.batch, z.channels, z.spatial, c, [&](int64_t i) {
    const double d = load(x + i) - mean_f;
    squares.a += d * d;
  });
  const double var = detail::block_sum(squares).a / z.count();
  const double inv_std = 1.0 / sqrt(var + epsilon);  // biased variance: what the batch is normalised with
  const double scale = gamma[c] * inv_std;
  if (threadIdx.x == 0) {
    saved_mean[c] = mean_f;
    saved_inv_std[c] = static_cast<float>(inv_std);
    const double unbiased = z.count() > 1 ? var * z.count() / (z.count() - 1) : var;
    running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
    running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * unbiased);
  }
  affine_channel(z, c, x, static_cast<float>(scale), static_cast<float>(beta[c] - mean * scale), y);
}

template <class T>
__global__ void forward_infer_kernel(Sizes z, const T* x, const float* gamma, const float* beta,
                                     const float* running_mean, const float* running_var, double epsilon, T* y) {
  const int c = static_cast<int>(blockIdx.x);
  const double scale = gamma[c] / sqrt(static_cast<double>(running_var[c]) + epsilon);
  affine_channel(z, c, x, static_cast<float>(scale), static_cast<float>(beta[c] - running_mean[c] * scale), y);
}

// dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)), as a dy + b (x - mean) + k.
template <class T>
__global__ void backward_kernel(Sizes z, const T* x, const T* dy, const float* gamma, const float* saved_mean,
                                const float* saved_inv_std, T* dx, float* dgamma, float* dbeta) {
  const int c = static_cast<int>(blockIdx.x);
  const float mean = saved_mean[c];
  PairSum mine;  // a: dy, b: dy * (x - mean)
  for_channel(z.batch, z.channels, z.spatial, c, [&](int64_t i) {
    const float g = load(dy + i);
    mine.a += g;
    mine.b += static_cast<double>(g) * (load(x + i) - mean);
  });
  const PairSum sums = detail::block_sum(mine);
  const double inv_std = saved_inv_std[c];
  const double sum_dy_xhat = sums.b * inv_std;
  if (threadIdx.x == 0) {
    dbeta[c] += static_cast<float>(sums.a);
    dgamma[c] += static_cast<float>(sum_dy_xhat);
  }
  const double a = gamma[c] * inv_std;
  const float fa = static_cast<float>(a), fb = static_cast<float>(-a * inv_std * sum_dy_xhat / z.count()),
              fk = static_cast<float>(-a * sums.a / z.count());
  for_channel(z.batch, z.channels, z.spatial, c,
              [&](int64_t i) { store(dx + i, fmaf(fa, load(dy + i), fmaf(fb, load(x + i) - mean, fk))); });
}

bool empty(const BatchNormShape& s) { return s.batch <= 0 || s.channels <= 0 || s.spatial <= 0; }

}  // namespace

void batchnorm_forward_train(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             double momentum, double epsilon, float* running_mean, float* running_var, void* y,
                             float* saved_mean, float* saved_inv_std, Stream stream) {
  if (empty(s)) return;
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    forward_train_kernel<<<s.channels, detail::kChannelThreads, 0, stream>>>(
        sizes_of(s), static_cast<const T*>(x), gamma, beta, momentum, epsilon, running_mean, running_var,
        static_cast<T*>(y), saved_mean, saved_inv_std);
  });
  RT_CHECK_LAUNCH();
}

void batchnorm_forward_infer(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, double epsilon, void* y,
                             Stream stream) {
  if (empty(s)) return;
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    forward_infer_kernel<<<s.channels, detail::kChannelThreads, 0, stream>>>(
        sizes_of(s), static_cast<const T*>(x), gamma, beta, running_mean, running_var, epsilon, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

void batchnorm_backward(const BatchNormShape& s, const void* x, const void* dy, const float* gamma,
                        const float* saved_mean, const float* saved_inv_std, void* dx, float* dgamma, float* dbeta,
                        Stream stream) {
  if (empty(s)) return;
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    backward_kernel<<<s.channels, detail::kChannelThreads, 0, stream>>>(
        sizes_of(s), static_cast<const T*>(x), static_cast<const T*>(dy), gamma, saved_mean, saved_inv_std,
        static_cast<T*>(dx), dgamma, dbeta);
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
