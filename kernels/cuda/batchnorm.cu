// Owns the batch-norm kernels declared in batchnorm.h. A pass that sums runs one block per (channel, slice) and
// writes the slice's sums; a finishing kernel, one thread per channel, adds them in slice order and derives the
// channel's coefficients; an element-wise kernel applies them. Forward in training: sums of x, then of (x - mean)^2,
// then y = x * scale + shift. Backward: sums of dy and dy * (x - mean), then dx = a dy + b (x - mean) + k.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;
using detail::load;
using detail::PairSum;
using detail::store;

// Enough blocks for any current GPU to stream at full rate (an H100 has 132 SMs), and no slice under kMinSlice values.
constexpr int kTargetBlocks = 1024;
constexpr int64_t kMinSlice = 4096;

struct Layout {
  int batch, channels, spatial, slices;
  __host__ __device__ int64_t count() const { return static_cast<int64_t>(batch) * spatial; }  // per channel
  __host__ __device__ int64_t slice_length() const { return (count() + slices - 1) / slices; }
};

Layout layout_of(const BatchNormShape& s) {
  Layout z{s.batch, s.channels, s.spatial, 1};
  const int64_t by_blocks = (kTargetBlocks + s.channels - 1) / s.channels, by_size = z.count() / kMinSlice;
  z.slices = static_cast<int>(std::max<int64_t>(1, std::min(by_blocks, by_size)));
  return z;
}

// Per channel: the slices' sums, then what the finishing kernel derives from them.
struct Scratch {
  PairSum* partial;  // channels x slices
  double* mean;      // forward in training
  float* a;          // forward: scale; backward: the dy coefficient
  float* b;          // forward: shift; backward: the (x - mean) coefficient
  float* k;          // backward: the constant
};

Scratch scratch_of(const Layout& z, void* bytes) {
  auto* partial = static_cast<PairSum*>(bytes);
  auto* mean = reinterpret_cast<double*>(partial + static_cast<std::ptrdiff_t>(z.channels) * z.slices);
  auto* floats = reinterpret_cast<float*>(mean + z.channels);
  return {partial, mean, floats, floats + z.channels, floats + 2 * z.channels};
}

// Channel c of value k (k over batch x spatial) sits at (n * channels + c) * spatial + i.
__device__ int64_t index_of(const Layout& z, int c, int64_t k) {
  return (k / z.spatial * z.channels + c) * z.spatial + k % z.spatial;
}

// Calls f(index) for this thread's values of slice blockIdx.y of channel blockIdx.x, then stores the block's sums.
template <class F>
__device__ void sum_slice(const Layout& z, PairSum* partial, F&& f) {
  const int c = static_cast<int>(blockIdx.x), slice = static_cast<int>(blockIdx.y);
  const int64_t begin = slice * z.slice_length(), end = min(z.count(), begin + z.slice_length());
  PairSum mine;
  for (int64_t k = begin + threadIdx.x; k < end; k += detail::kChannelThreads) f(index_of(z, c, k), mine);
  const PairSum total = detail::block_sum(mine);
  if (threadIdx.x == 0) partial[c * z.slices + slice] = total;
}

__device__ PairSum channel_total(const Layout& z, const PairSum* partial, int c) {
  PairSum t;
  for (int s = 0; s < z.slices; ++s) t.a += partial[c * z.slices + s].a, t.b += partial[c * z.slices + s].b;
  return t;
}

template <class T>
__global__ void sum_kernel(Layout z, const T* x, Scratch w) {
  sum_slice(z, w.partial, [&](int64_t i, PairSum& m) { m.a += load(x + i); });
}

__global__ void mean_kernel(Layout z, Scratch w) {
  for (int c = static_cast<int>(global_index()); c < z.channels; c += static_cast<int>(grid_stride()))
    w.mean[c] = channel_total(z, w.partial, c).a / static_cast<double>(z.count());
}

template <class T>
__global__ void centred_squares_kernel(Layout z, const T* x, Scratch w) {
  const float mean = static_cast<float>(w.mean[blockIdx.x]);
  sum_slice(z, w.partial, [&](int64_t i, PairSum& m) {
    const double d = load(x + i) - mean;
    m.a += d * d;
  });
}

struct Statistics {
  const float* gamma;
  const float* beta;
  double momentum, epsilon;
  float* running_mean;
  float* running_var;
  float* saved_mean;
  float* saved_inv_std;
};

__global__ void statistics_kernel(Layout z, Statistics st, Scratch w) {
  for (int c = static_cast<int>(global_index()); c < z.channels; c += static_cast<int>(grid_stride())) {
    const double count = static_cast<double>(z.count()), mean = w.mean[c];
    const double var = channel_total(z, w.partial, c).a / count;
    const double inv_std = 1.0 / sqrt(var + st.epsilon);  // biased variance: what the batch is normalised with
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    st.saved_mean[c] = static_cast<float>(mean);
    st.saved_inv_std[c] = static_cast<float>(inv_std);
    st.running_mean[c] = static_cast<float>((1.0 - st.momentum) * st.running_mean[c] + st.momentum * mean);
    st.running_var[c] = static_cast<float>((1.0 - st.momentum) * st.running_var[c] + st.momentum * unbiased);
    const double scale = st.gamma[c] * inv_std;
    w.a[c] = static_cast<float>(scale);
    w.b[c] = static_cast<float>(st.beta[c] - mean * scale);
  }
}

__global__ void inference_coefficients_kernel(Layout z, const float* gamma, const float* beta, const float* mean,
                                              const float* var, double epsilon, Scratch w) {
  for (int c = static_cast<int>(global_index()); c < z.channels; c += static_cast<int>(grid_stride())) {
    const double scale = gamma[c] / sqrt(static_cast<double>(var[c]) + epsilon);
    w.a[c] = static_cast<float>(scale);
    w.b[c] = static_cast<float>(beta[c] - mean[c] * scale);
  }
}

template <class T>
__global__ void affine_kernel(Layout z, const T* x, Scratch w, T* y) {
  const int64_t n = z.count() * z.channels;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int c = static_cast<int>(i / z.spatial % z.channels);
    store(y + i, fmaf(load(x + i), w.a[c], w.b[c]));
  }
}

template <class T>
__global__ void gradient_sums_kernel(Layout z, const T* x, const T* dy, const float* saved_mean, Scratch w) {
  const float mean = saved_mean[blockIdx.x];
  sum_slice(z, w.partial, [&](int64_t i, PairSum& m) {
    const float g = load(dy + i);
    m.a += g;
    m.b += static_cast<double>(g) * (load(x + i) - mean);
  });
}

__global__ void gradient_coefficients_kernel(Layout z, const float* gamma, const float* saved_inv_std, Scratch w,
                                             float* dgamma, float* dbeta) {
  for (int c = static_cast<int>(global_index()); c < z.channels; c += static_cast<int>(grid_stride())) {
    const PairSum sums = channel_total(z, w.partial, c);
    const double count = static_cast<double>(z.count()), inv_std = saved_inv_std[c];
    const double sum_dy_xhat = sums.b * inv_std;
    dbeta[c] += static_cast<float>(sums.a);
    dgamma[c] += static_cast<float>(sum_dy_xhat);
    const double a = gamma[c] * inv_std;
    w.a[c] = static_cast<float>(a);
    w.b[c] = static_cast<float>(-a * inv_std * sum_dy_xhat / count);
    w.k[c] = static_cast<float>(-a * sums.a / count);
  }
}

template <class T>
__global__ void dx_kernel(Layout z, const T* x, const T* dy, const float* saved_mean, Scratch w, T* dx) {
  const int64_t n = z.count() * z.channels;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int c = static_cast<int>(i / z.spatial % z.channels);
    store(dx + i, fmaf(w.a[c], load(dy + i), fmaf(w.b[c], load(x + i) - saved_mean[c], w.k[c])));
  }
}

bool empty(const BatchNormShape& s) { return s.batch <= 0 || s.channels <= 0 || s.spatial <= 0; }

dim3 slice_grid(const Layout& z) { return dim3(static_cast<unsigned>(z.channels), static_cast<unsigned>(z.slices)); }
unsigned channel_blocks(const Layout& z) { return detail::blocks_for(z.channels); }
unsigned element_blocks(const Layout& z) { return detail::blocks_for(z.count() * z.channels); }

}  // namespace

std::size_t batchnorm_scratch_bytes(const BatchNormShape& s) {
  if (empty(s)) return 0;
  const Layout z = layout_of(s);
  const auto channels = static_cast<std::size_t>(z.channels);
  return sizeof(PairSum) * channels * static_cast<std::size_t>(z.slices) + sizeof(double) * channels +
         3 * sizeof(float) * channels;
}

void batchnorm_forward_train(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             double momentum, double epsilon, float* running_mean, float* running_var, void* y,
                             float* saved_mean, float* saved_inv_std, void* scratch, Stream stream) {
  if (empty(s)) return;
  const Layout z = layout_of(s);
  const Scratch w = scratch_of(z, scratch);
  const Statistics st{gamma, beta, momentum, epsilon, running_mean, running_var, saved_mean, saved_inv_std};
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    const T* xt = static_cast<const T*>(x);
    sum_kernel<<<slice_grid(z), detail::kChannelThreads, 0, stream>>>(z, xt, w);
    mean_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, w);
    centred_squares_kernel<<<slice_grid(z), detail::kChannelThreads, 0, stream>>>(z, xt, w);
    statistics_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, st, w);
    affine_kernel<<<element_blocks(z), detail::kThreads, 0, stream>>>(z, xt, w, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

void batchnorm_forward_infer(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, double epsilon, void* y,
                             void* scratch, Stream stream) {
  if (empty(s)) return;
  const Layout z = layout_of(s);
  const Scratch w = scratch_of(z, scratch);
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    inference_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, gamma, beta, running_mean,
                                                                                       running_var, epsilon, w);
    affine_kernel<<<element_blocks(z), detail::kThreads, 0, stream>>>(z, static_cast<const T*>(x), w,
                                                                      static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

void batchnorm_backward(const BatchNormShape& s, const void* x, const void* dy, const float* gamma,
                        const float* saved_mean, const float* saved_inv_std, void* dx, float* dgamma, float* dbeta,
                        void* scratch, Stream stream) {
  if (empty(s)) return;
  const Layout z = layout_of(s);
  const Scratch w = scratch_of(z, scratch);
  detail::with_element(s.data, [&](auto t) {
    using T = decltype(t);
    const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy);
    gradient_sums_kernel<<<slice_grid(z), detail::kChannelThreads, 0, stream>>>(z, xt, dyt, saved_mean, w);
    gradient_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, gamma, saved_inv_std, w,
                                                                                      dgamma, dbeta);
    dx_kernel<<<element_blocks(z), detail::kThreads, 0, stream>>>(z, xt, dyt, saved_mean, w, static_cast<T*>(dx));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
