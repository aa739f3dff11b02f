// Owns the batch-norm kernels declared in batchnorm.h. A pass that sums runs one block per (channel, slice) and
// writes the slice's sums; a finishing kernel, one thread per channel, adds them in slice order and derives the
// channel's coefficients; an element-wise kernel applies them. Forward in training: sums of x, then of (x - mean)^2,
// then y = x * scale + shift. Backward: sums of dy and dy * (x - mean), then dx = a dy + b (x - mean) + k.
// NHWC tensors (rows of channels) take the rows_* kernels: a thread keeps a pack of channels' sums over its rows, and
// the block adds its row lanes in lane order; the finishing kernels are shared.
// The passes are bound by memory: values move in packs of up to 16 bytes, each thread keeps kUnroll packs in flight,
// and a pack's index becomes its channel or sample through FastDivide (an integer division costs tens of
// instructions).
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "common/error.h"
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/fast_divide.h"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;
using detail::load;
using detail::load_pack;
using detail::PairSum;
using detail::store;
using detail::store_pack;

// Enough blocks for any current GPU to stream at full rate (an H100 has 132 SMs), and no slice under kMinSlice values.
constexpr int kTargetBlocks = 1024;
constexpr int64_t kMinSlice = 4096;
// Packs each thread loads before it adds: with 16-byte packs, enough bytes in flight per SM to cover the memory's
// latency.
constexpr int kUnroll = 4;
// The element-wise kernels' grid: samples along x, each sample's packs in chunks of kThreads x kUnroll along y (at
// most 65535 of them).
constexpr int64_t kMaxPerSample = int64_t{1} << 27;

// The tensor as rows of `spatial` values (one per sample and channel), read and written in packs of `vec` values: the
// largest power of two up to 16 bytes that divides a row and the buffers' alignment, so a pack never leaves its row.
struct Layout {
  int batch, channels, spatial, slices, vec;
  FastDivide by_row;  // a pack's index among a channel's packs (or a sample's) -> its sample (or channel)
  __host__ __device__ int64_t count() const { return static_cast<int64_t>(batch) * spatial; }  // values per channel
  __host__ __device__ int row_packs() const { return spatial / vec; }
  __host__ __device__ int64_t channel_packs() const { return count() / vec; }
  __host__ __device__ int64_t sample_packs() const { return static_cast<int64_t>(channels) * row_packs(); }
  __host__ __device__ int64_t slice_packs() const { return (channel_packs() + slices - 1) / slices; }
};

// NHWC (BatchNormShape's channel block is all the channels): rows of `channels` values, one per sample and position.
bool is_nhwc(const BatchNormShape& s) { return s.in_block == s.channels && s.channels > 1 && s.spatial > 1; }

// How the NHWC kernels cover the rows: a block takes `group` channels (lanes threads across them, `vec` channels
// each) and a slice of the rows, passes = kChannelThreads / lanes rows at a time.
struct Rows {
  int64_t rows;
  int channels, vec, lanes, group, groups, slices;
  FastDivide by_row_packs;  // a pack's flat index -> its row (channels / vec packs a row)
  __host__ __device__ int passes() const { return detail::kChannelThreads / lanes; }
  __host__ __device__ int64_t slice_rows() const { return (rows + slices - 1) / slices; }
  __host__ __device__ int64_t packs() const { return rows * (channels / vec); }
};

// How many row slices the NHWC sums take: from the shape alone (the scratch is sized before the buffers are known),
// enough blocks to stream the tensor with the channel groups widest packs give, and no slice under kMinRows rows.
constexpr int64_t kMinRows = 256;
int rows_slices(const BatchNormShape& s) {
  int vec = static_cast<int>(16 / element_bytes(s.data));
  while (s.channels % vec) vec /= 2;
  const int group = std::min(32, s.channels / vec) * vec;
  const int64_t groups = (s.channels + group - 1) / group, rows = static_cast<int64_t>(s.batch) * s.spatial;
  const int64_t by_blocks = (kTargetBlocks + groups - 1) / groups, by_size = rows / kMinRows;
  return static_cast<int>(std::max<int64_t>(1, std::min(by_blocks, by_size)));
}

Rows rows_of(const BatchNormShape& s, std::initializer_list<const void*> buffers = {}) {
  Rows r{static_cast<int64_t>(s.batch) * s.spatial, s.channels, detail::pack_width(s.data, buffers), 1, 0, 0, 1,
         FastDivide()};
  while (s.channels % r.vec) r.vec /= 2;
  const int packs_per_row = s.channels / r.vec;
  while (r.lanes * 2 <= std::min(32, packs_per_row)) r.lanes *= 2;
  r.group = r.lanes * r.vec;
  r.groups = (s.channels + r.group - 1) / r.group;
  if (r.packs() >= FastDivide::kNumeratorLimit)
    throw JobFileError("batch norm over " + std::to_string(r.rows * s.channels) + " NHWC values on the GPU: at most "
                       "2^31 packs of channels; lower train.batch_size");
  r.by_row_packs = FastDivide(static_cast<uint32_t>(packs_per_row));
  r.slices = rows_slices(s);
  return r;
}

// `buffers`: the addresses the kernels will read and write (null ones ignored), whose alignment bounds the pack.
Layout layout_of(const BatchNormShape& s, std::initializer_list<const void*> buffers = {}) {
  Layout z{s.batch, s.channels, s.spatial, 1, detail::pack_width(s.data, buffers), FastDivide()};
  while (s.spatial % z.vec) z.vec /= 2;
  z.by_row = FastDivide(static_cast<uint32_t>(z.row_packs()));
  if (z.count() >= FastDivide::kNumeratorLimit || static_cast<int64_t>(s.channels) * s.spatial > kMaxPerSample)
    throw JobFileError("batch norm over " + std::to_string(s.batch) + " x " + std::to_string(s.channels) + " x " +
                       std::to_string(s.spatial) + " values on the GPU: a channel may hold under 2^31 values " +
                       "(batch x H x W) and a sample at most 2^27 (C x H x W); lower train.batch_size");
  const int64_t by_blocks = (kTargetBlocks + s.channels - 1) / s.channels, by_size = z.count() / kMinSlice;
  z.slices = static_cast<int>(std::max<int64_t>(1, std::min(by_blocks, by_size)));
  if (is_nhwc(s)) z.slices = rows_slices(s);
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

// The first value of channel c's pack k (k over the channel's batch x row_packs packs).
__device__ int64_t index_of(const Layout& z, int c, uint32_t k) {
  const uint32_t n = z.by_row.quotient(k), p = k - n * static_cast<uint32_t>(z.row_packs());
  return (static_cast<int64_t>(n) * z.channels + c) * z.spatial + static_cast<int64_t>(p) * z.vec;
}

// Calls f(index, sums) for this thread's packs of slice blockIdx.y of channel blockIdx.x, kUnroll at a time, then
// stores the block's sums.
template <class F>
__device__ void sum_slice(const Layout& z, PairSum* partial, F&& f) {
  const int c = static_cast<int>(blockIdx.x), slice = static_cast<int>(blockIdx.y);
  const auto begin = static_cast<uint32_t>(slice * z.slice_packs());
  const auto end = static_cast<uint32_t>(min(z.channel_packs(), begin + z.slice_packs()));
  constexpr uint32_t kStep = detail::kChannelThreads;
  PairSum mine;
  for (uint32_t k = begin + threadIdx.x; k < end; k += kStep * kUnroll) {
#pragma unroll
    for (uint32_t r = 0; r < kUnroll; ++r)
      if (k + r * kStep < end) f(index_of(z, c, k + r * kStep), mine);
  }
  const PairSum total = detail::block_sum(mine);
  if (threadIdx.x == 0) partial[c * z.slices + slice] = total;
}

// Calls f(index, channel) for the first value of each of this thread's packs of sample blockIdx.x (element_grid).
template <class F>
__device__ void for_sample_packs(const Layout& z, F&& f) {
  const auto packs = static_cast<uint32_t>(z.sample_packs());
  const int64_t base = static_cast<int64_t>(blockIdx.x) * z.channels * z.spatial;
  const uint32_t first = blockIdx.y * (detail::kThreads * kUnroll) + threadIdx.x;
#pragma unroll
  for (uint32_t r = 0; r < kUnroll; ++r) {
    const uint32_t j = first + r * detail::kThreads;
    if (j < packs) f(base + static_cast<int64_t>(j) * z.vec, static_cast<int>(z.by_row.quotient(j)));
  }
}

__device__ PairSum channel_total(const Layout& z, const PairSum* partial, int c) {
  PairSum t;
  for (int s = 0; s < z.slices; ++s) t.a += partial[c * z.slices + s].a, t.b += partial[c * z.slices + s].b;
  return t;
}

template <int V, class T>
__global__ void sum_kernel(Layout z, const T* x, Scratch w) {
  sum_slice(z, w.partial, [&](int64_t i, PairSum& m) {
    float v[V];
    load_pack(x + i, v);
#pragma unroll
    for (int r = 0; r < V; ++r) m.a += v[r];
  });
}

__global__ void mean_kernel(Layout z, Scratch w) {
  for (int c = static_cast<int>(global_index()); c < z.channels; c += static_cast<int>(grid_stride()))
    w.mean[c] = channel_total(z, w.partial, c).a / static_cast<double>(z.count());
}

template <int V, class T>
__global__ void centred_squares_kernel(Layout z, const T* x, Scratch w) {
  const float mean = static_cast<float>(w.mean[blockIdx.x]);
  sum_slice(z, w.partial, [&](int64_t i, PairSum& m) {
    float v[V];
    load_pack(x + i, v);
#pragma unroll
    for (int r = 0; r < V; ++r) {
      const double d = v[r] - mean;
      m.a += d * d;
    }
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

// y = x * scale + shift, rounded to T; with relu, then max(y, 0) of the rounded value: the bits relu_forward
// would write after an unfused batch norm.
template <int V, class T>
__global__ void affine_kernel(Layout z, const T* x, Scratch w, bool relu, T* y) {
  for_sample_packs(z, [&](int64_t i, int c) {
    float v[V];
    load_pack(x + i, v);
#pragma unroll
    for (int r = 0; r < V; ++r) {
      T rounded;
      store(&rounded, fmaf(v[r], w.a[c], w.b[c]));
      v[r] = load(&rounded);
      if (relu && !(v[r] > 0.0f)) v[r] = 0.0f;
    }
    store_pack(y + i, v);
  });
}

// The pack of dy at i where no fused ReLU zeroed the output (relu_y null: no ReLU), as relu_backward masks it.
template <int V, class T>
__device__ void load_masked_dy(const T* dy, const T* relu_y, int64_t i, float (&g)[V]) {
  load_pack(dy + i, g);
  if (!relu_y) return;
  float y[V];
  load_pack(relu_y + i, y);
#pragma unroll
  for (int r = 0; r < V; ++r)
    if (!(y[r] > 0.0f)) g[r] = 0.0f;
}

template <int V, class T>
__global__ void gradient_sums_kernel(Layout z, const T* x, const T* dy, const T* relu_y, const float* saved_mean,
                                     Scratch w) {
  const float mean = saved_mean[blockIdx.x];
  sum_slice(z, w.partial, [&](int64_t i, PairSum& m) {
    float g[V], v[V];
    load_masked_dy(dy, relu_y, i, g);
    load_pack(x + i, v);
#pragma unroll
    for (int r = 0; r < V; ++r) {
      m.a += g[r];
      m.b += static_cast<double>(g[r]) * (v[r] - mean);
    }
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

template <int V, class T>
__global__ void dx_kernel(Layout z, const T* x, const T* dy, const T* relu_y, const float* saved_mean, Scratch w,
                          T* dx) {
  for_sample_packs(z, [&](int64_t i, int c) {
    float g[V], v[V];
    load_masked_dy(dy, relu_y, i, g);
    load_pack(x + i, v);
#pragma unroll
    for (int r = 0; r < V; ++r) v[r] = fmaf(w.a[c], g[r], fmaf(w.b[c], v[r] - saved_mean[c], w.k[c]));
    store_pack(dx + i, v);
  });
}

// ---- NHWC: the same arithmetic with the channel innermost. A thread keeps V channels' sums over its rows; the
// block's row lanes are then added in lane order, so the sums stay deterministic.

// Calls f(index, c0, sums) for this thread's rows of slice blockIdx.y, its V channels from c0 (group blockIdx.x),
// then stores the block's sums per channel.
template <int V, class F>
__device__ void sum_rows(const Rows& r, int slices, PairSum* partial, F&& f) {
  __shared__ double sum_a[detail::kChannelThreads * V], sum_b[detail::kChannelThreads * V];
  const int lane = static_cast<int>(threadIdx.x) % r.lanes, row_lane = static_cast<int>(threadIdx.x) / r.lanes;
  const int c0 = static_cast<int>(blockIdx.x) * r.group + lane * V;
  const int64_t begin = blockIdx.y * r.slice_rows(), end = min(r.rows, begin + r.slice_rows());
  PairSum mine[V];
  if (c0 < r.channels)
    for (int64_t row = begin + row_lane; row < end; row += r.passes()) f(row * r.channels + c0, c0, mine);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    sum_a[row_lane * r.group + lane * V + k] = mine[k].a;
    sum_b[row_lane * r.group + lane * V + k] = mine[k].b;
  }
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x), c = static_cast<int>(blockIdx.x) * r.group + t;
  if (t < r.group && c < r.channels) {
    PairSum total;
    for (int l = 0; l < r.passes(); ++l) total.a += sum_a[l * r.group + t], total.b += sum_b[l * r.group + t];
    partial[c * slices + static_cast<int>(blockIdx.y)] = total;
  }
}

// Calls f(index, c0) for each of this thread's packs: V channels from c0 of one row.
template <class F>
__device__ void for_row_packs(const Rows& r, F&& f) {
  const auto packs = static_cast<uint32_t>(r.packs());
  const auto per_row = static_cast<uint32_t>(r.channels / r.vec);
  for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < packs; j += gridDim.x * blockDim.x) {
    const uint32_t row = r.by_row_packs.quotient(j);
    f(static_cast<int64_t>(j) * r.vec, static_cast<int>((j - row * per_row) * r.vec));
  }
}

template <int V, class T>
__global__ void rows_sum_kernel(Rows r, Layout z, const T* x, Scratch w) {
  sum_rows<V>(r, z.slices, w.partial, [&](int64_t i, int, PairSum(&m)[V]) {
    float v[V];
    load_pack(x + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) m[k].a += v[k];
  });
}

template <int V, class T>
__global__ void rows_centred_squares_kernel(Rows r, Layout z, const T* x, Scratch w) {
  sum_rows<V>(r, z.slices, w.partial, [&](int64_t i, int c0, PairSum(&m)[V]) {
    float v[V];
    load_pack(x + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const double d = v[k] - static_cast<float>(w.mean[c0 + k]);
      m[k].a += d * d;
    }
  });
}

template <int V, class T>
__global__ void rows_affine_kernel(Rows r, const T* x, Scratch w, bool relu, T* y) {
  for_row_packs(r, [&](int64_t i, int c0) {
    float v[V];
    load_pack(x + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      T rounded;
      store(&rounded, fmaf(v[k], w.a[c0 + k], w.b[c0 + k]));
      v[k] = load(&rounded);
      if (relu && !(v[k] > 0.0f)) v[k] = 0.0f;
    }
    store_pack(y + i, v);
  });
}

template <int V, class T>
__global__ void rows_gradient_sums_kernel(Rows r, Layout z, const T* x, const T* dy, const T* relu_y,
                                          const float* saved_mean, Scratch w) {
  sum_rows<V>(r, z.slices, w.partial, [&](int64_t i, int c0, PairSum(&m)[V]) {
    float g[V], v[V];
    load_masked_dy(dy, relu_y, i, g);
    load_pack(x + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      m[k].a += g[k];
      m[k].b += static_cast<double>(g[k]) * (v[k] - saved_mean[c0 + k]);
    }
  });
}

template <int V, class T>
__global__ void rows_dx_kernel(Rows r, const T* x, const T* dy, const T* relu_y, const float* saved_mean, Scratch w,
                               T* dx) {
  for_row_packs(r, [&](int64_t i, int c0) {
    float g[V], v[V];
    load_masked_dy(dy, relu_y, i, g);
    load_pack(x + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k)
      v[k] = fmaf(w.a[c0 + k], g[k], fmaf(w.b[c0 + k], v[k] - saved_mean[c0 + k], w.k[c0 + k]));
    store_pack(dx + i, v);
  });
}

bool empty(const BatchNormShape& s) { return s.batch <= 0 || s.channels <= 0 || s.spatial <= 0; }

dim3 slice_grid(const Layout& z) { return dim3(static_cast<unsigned>(z.channels), static_cast<unsigned>(z.slices)); }
unsigned channel_blocks(const Layout& z) { return detail::blocks_for(z.channels); }
dim3 element_grid(const Layout& z) {
  constexpr int64_t kPerBlock = int64_t{detail::kThreads} * kUnroll;
  return dim3(static_cast<unsigned>(z.batch), static_cast<unsigned>((z.sample_packs() + kPerBlock - 1) / kPerBlock));
}

dim3 rows_grid(const Rows& r) { return dim3(static_cast<unsigned>(r.groups), static_cast<unsigned>(r.slices)); }
unsigned row_pack_blocks(const Rows& r) { return detail::blocks_for(r.packs()); }

// Calls body(T{}, std::integral_constant<int, V>{}) for the element type and a pack of vec values.
template <class Body>
void with_pack(const BatchNormShape& s, int vec, Body body) {
  detail::with_element(s.data, [&](auto t) { detail::with_pack_width(vec, [&](auto v) { body(t, v); }); });
}

}  // namespace

std::size_t batchnorm_scratch_bytes(const BatchNormShape& s) {
  if (empty(s)) return 0;
  const Layout z = layout_of(s);
  const auto channels = static_cast<std::size_t>(z.channels);
  return sizeof(PairSum) * channels * static_cast<std::size_t>(z.slices) + sizeof(double) * channels +
         3 * sizeof(float) * channels;
}

void batchnorm_forward_train(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             double momentum, double epsilon, float* running_mean, float* running_var, bool relu,
                             void* y, float* saved_mean, float* saved_inv_std, void* scratch, Stream stream) {
  if (empty(s)) return;
  const Layout z = layout_of(s, {x, y});
  const Scratch w = scratch_of(z, scratch);
  const Statistics st{gamma, beta, momentum, epsilon, running_mean, running_var, saved_mean, saved_inv_std};
  if (is_nhwc(s)) {
    const Rows r = rows_of(s, {x, y});
    with_pack(s, r.vec, [&](auto t, auto v) {
      using T = decltype(t);
      constexpr int V = decltype(v)::value;
      const T* xt = static_cast<const T*>(x);
      rows_sum_kernel<V><<<rows_grid(r), detail::kChannelThreads, 0, stream>>>(r, z, xt, w);
      mean_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, w);
      rows_centred_squares_kernel<V><<<rows_grid(r), detail::kChannelThreads, 0, stream>>>(r, z, xt, w);
      statistics_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, st, w);
      rows_affine_kernel<V><<<row_pack_blocks(r), detail::kThreads, 0, stream>>>(r, xt, w, relu, static_cast<T*>(y));
    });
    RT_CHECK_LAUNCH();
    return;
  }
  with_pack(s, z.vec, [&](auto t, auto v) {
    using T = decltype(t);
    constexpr int V = decltype(v)::value;
    const T* xt = static_cast<const T*>(x);
    sum_kernel<V><<<slice_grid(z), detail::kChannelThreads, 0, stream>>>(z, xt, w);
    mean_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, w);
    centred_squares_kernel<V><<<slice_grid(z), detail::kChannelThreads, 0, stream>>>(z, xt, w);
    statistics_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, st, w);
    affine_kernel<V><<<element_grid(z), detail::kThreads, 0, stream>>>(z, xt, w, relu, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

void batchnorm_forward_infer(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, double epsilon, bool relu,
                             void* y, void* scratch, Stream stream) {
  if (empty(s)) return;
  const Layout z = layout_of(s, {x, y});
  const Scratch w = scratch_of(z, scratch);
  if (is_nhwc(s)) {
    const Rows r = rows_of(s, {x, y});
    with_pack(s, r.vec, [&](auto t, auto v) {
      using T = decltype(t);
      constexpr int V = decltype(v)::value;
      inference_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, gamma, beta, running_mean,
                                                                                         running_var, epsilon, w);
      rows_affine_kernel<V><<<row_pack_blocks(r), detail::kThreads, 0, stream>>>(r, static_cast<const T*>(x), w, relu,
                                                                                  static_cast<T*>(y));
    });
    RT_CHECK_LAUNCH();
    return;
  }
  with_pack(s, z.vec, [&](auto t, auto v) {
    using T = decltype(t);
    constexpr int V = decltype(v)::value;
    inference_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, gamma, beta, running_mean,
                                                                                       running_var, epsilon, w);
    affine_kernel<V><<<element_grid(z), detail::kThreads, 0, stream>>>(z, static_cast<const T*>(x), w, relu,
                                                                        static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

void batchnorm_backward(const BatchNormShape& s, const void* x, const void* dy, const void* relu_y,
                        const float* gamma, const float* saved_mean, const float* saved_inv_std, void* dx,
                        float* dgamma, float* dbeta, void* scratch, Stream stream) {
  if (empty(s)) return;
  const Layout z = layout_of(s, {x, dy, relu_y, dx});
  const Scratch w = scratch_of(z, scratch);
  if (is_nhwc(s)) {
    const Rows r = rows_of(s, {x, dy, relu_y, dx});
    with_pack(s, r.vec, [&](auto t, auto v) {
      using T = decltype(t);
      constexpr int V = decltype(v)::value;
      const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy), *yt = static_cast<const T*>(relu_y);
      rows_gradient_sums_kernel<V>
          <<<rows_grid(r), detail::kChannelThreads, 0, stream>>>(r, z, xt, dyt, yt, saved_mean, w);
      gradient_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, gamma, saved_inv_std, w,
                                                                                        dgamma, dbeta);
      rows_dx_kernel<V><<<row_pack_blocks(r), detail::kThreads, 0, stream>>>(r, xt, dyt, yt, saved_mean, w,
                                                                              static_cast<T*>(dx));
    });
    RT_CHECK_LAUNCH();
    return;
  }
  with_pack(s, z.vec, [&](auto t, auto v) {
    using T = decltype(t);
    constexpr int V = decltype(v)::value;
    const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy), *yt = static_cast<const T*>(relu_y);
    gradient_sums_kernel<V><<<slice_grid(z), detail::kChannelThreads, 0, stream>>>(z, xt, dyt, yt, saved_mean, w);
    gradient_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, gamma, saved_inv_std, w,
                                                                                      dgamma, dbeta);
    dx_kernel<V><<<element_grid(z), detail::kThreads, 0, stream>>>(z, xt, dyt, yt, saved_mean, w, static_cast<T*>(dx));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
