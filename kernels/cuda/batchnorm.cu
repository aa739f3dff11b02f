// Owns the batch-norm kernels declared in batchnorm.h. A pass that sums runs one block per (channel, slice) and
// writes the slice's sums; a finishing kernel, one thread per channel, adds them in slice order and derives the
// channel's coefficients; an element-wise kernel applies them. Forward in training: one pass summing x and x^2 (the
// statistics; a second, centred pass would read the whole tensor again), then y = x * scale + shift. Backward: sums of
// dy and dy * (x - mean), then dx = a dy + b (x - mean) + k.
// NHWC tensors (rows of channels) take the rows_* kernels: a thread keeps a pack of channels' sums over its rows, and
// the block adds its row lanes in lane order; a block per channel then folds the many slices (fold_slices_kernel)
// before the shared finishing kernels.
// The passes are bound by memory: values move in packs of up to 16 bytes, each thread keeps kUnroll packs in flight,
// and a pack's index becomes its channel or sample through FastDivide (an integer division costs tens of
// instructions). Sums are kept in double: a thread adds the few values of one NCHW pack in fp32 first (a 16-bit value
// and its square are exact in fp32), and the NHWC backward passes keep each thread's own sums in fp32 (a few hundred
// values; see kBackwardPackBytes); blocks, slices and channels add in double.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

#include "common/error.h"
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/element_access.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/fast_divide.h"

namespace ringtrain::kernels::cuda {
namespace {

using detail::global_index;
using detail::grid_stride;
using detail::load;
using detail::load_pack;
using detail::Pack;
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
// each) and a slice of the rows (the sums) or chunks of them (the element-wise kernels), passes = kChannelThreads /
// lanes rows at a time.
struct Rows {
  int64_t rows;
  int channels, vec, lanes, group, groups, slices;
  __host__ __device__ int passes() const { return detail::kChannelThreads / lanes; }
  __host__ __device__ int64_t slice_rows() const { return (rows + slices - 1) / slices; }
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

Rows rows_of(const BatchNormShape& s, std::initializer_list<const void*> buffers = {}, int pack_bytes = 16) {
  Rows r{static_cast<int64_t>(s.batch) * s.spatial, s.channels, detail::pack_width(s.data, buffers), 1, 0, 0, 1};
  r.vec = std::min(r.vec, pack_bytes / static_cast<int>(element_bytes(s.data)));
  while (s.channels % r.vec) r.vec /= 2;
  const int packs_per_row = s.channels / r.vec;
  while (r.lanes * 2 <= std::min(32, packs_per_row)) r.lanes *= 2;
  r.group = r.lanes * r.vec;
  r.groups = (s.channels + r.group - 1) / r.group;
  r.slices = rows_slices(s);
  return r;
}

// `buffers`: the addresses the kernels will read and write (null ones ignored), whose alignment bounds the pack.
Layout layout_of(const BatchNormShape& s, std::initializer_list<const void*> buffers = {}) {
  Layout z{s.batch, s.channels, s.spatial, 1, detail::pack_width(s.data, buffers), FastDivide()};
  while (s.spatial % z.vec) z.vec /= 2;
  z.by_row = FastDivide(static_cast<uint32_t>(z.row_packs()));
  // element_grid's y extent (a CUDA grid's limit, 65535) bounds a sample's packs: about 2^26 values where H x W
  // is odd (one value a pack).
  const bool packs_fit = z.sample_packs() <= int64_t{65535} * detail::kThreads * kUnroll;
  if (z.count() >= FastDivide::kNumeratorLimit || static_cast<int64_t>(s.channels) * s.spatial > kMaxPerSample ||
      !packs_fit)
    throw JobFileError("batch norm over " + std::to_string(s.batch) + " x " + std::to_string(s.channels) + " x " +
                       std::to_string(s.spatial) + " values on the GPU: a channel may hold under 2^31 values " +
                       "(batch x H x W) and a sample at most 2^27 (C x H x W; 2^26 where H x W is odd); lower " +
                       "train.batch_per_rank, or the sample's channels or size");
  const int64_t by_blocks = (kTargetBlocks + s.channels - 1) / s.channels, by_size = z.count() / kMinSlice;
  z.slices = static_cast<int>(std::max<int64_t>(1, std::min(by_blocks, by_size)));
  if (is_nhwc(s)) z.slices = rows_slices(s);
  return z;
}

// Per channel: the slices' sums, then what the finishing kernel derives from them.
struct Scratch {
  PairSum* partial;  // channels x slices
  PairSum* totals;   // NHWC: each channel's slices added by fold_slices_kernel
  float* a;          // forward: scale; backward: the dy coefficient
  float* b;          // forward: shift; backward: the (x - mean) coefficient
  float* k;          // backward: the constant
  float* relu_a;     // backward after a fused ReLU: the forward's scale and shift, which give its mask again
  float* relu_b;
  // Synchronised batch norm: the values per channel over the group's ranks (in place of z.count()), once the
  // totals are added over them (group_totals); null otherwise.
  const double* group_count = nullptr;
};

Scratch scratch_of(const Layout& z, void* bytes) {
  auto* partial = static_cast<PairSum*>(bytes);
  auto* totals = partial + static_cast<std::ptrdiff_t>(z.channels) * z.slices;
  // After the totals, one more PairSum: this rank's count, added over the group's ranks with the totals.
  auto* floats = reinterpret_cast<float*>(totals + z.channels + 1);
  const int c = z.channels;
  return {partial, totals, floats, floats + c, floats + 2 * c, floats + 3 * c, floats + 4 * c};
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

// The values each channel's statistics are over: this rank's, or the group's (Scratch::group_count).
__device__ double values_per_channel(const Layout& z, const Scratch& w) {
  return w.group_count ? *w.group_count : static_cast<double>(z.count());
}

__device__ PairSum channel_total(const Layout& z, const PairSum* partial, int c) {
  PairSum t;
  for (int s = 0; s < z.slices; ++s) t.a += partial[c * z.slices + s].a, t.b += partial[c * z.slices + s].b;
  return t;
}

// Sums of x (a) and x^2 (b) of slice blockIdx.y of channel blockIdx.x. A pack of 16-bit values sums in fp32 (their
// squares are exact there); fp32 values each go to double, as rows_moments_kernel adds them: statistics_kernel takes
// E[x^2] - mean^2, which fp32 squares would spoil where the mean is large against the deviation (a pixel-valued
// input: 4e-2 of the variance off at mean 1000, std 0.1), and the CPU twin's two passes do not.
template <int V, class T>
__global__ void moments_kernel(Layout z, const T* x, Scratch w) {
  sum_slice(z, w.partial, [&](int64_t i, PairSum& m) {
    float v[V];
    load_pack(x + i, v);
    if constexpr (sizeof(T) == sizeof(float)) {
#pragma unroll
      for (int r = 0; r < V; ++r) {
        const double d = v[r];
        m.a += d;
        m.b = fma(d, d, m.b);
      }
    } else {
      float sum = 0.0f, squares = 0.0f;
#pragma unroll
      for (int r = 0; r < V; ++r) sum += v[r], squares = fmaf(v[r], v[r], squares);
      m.a += sum;
      m.b += squares;
    }
  });
}

// The forward's y = x * a + b from the saved statistics, so that the backward passes derive the same a and b (in
// training) and with them the fused ReLU's mask, bit for bit.
struct Affine {
  float a, b;
};
__device__ Affine affine_of(float gamma, float beta, float saved_mean, float saved_inv_std) {
  const double scale = static_cast<double>(gamma) * saved_inv_std;
  return {static_cast<float>(scale), static_cast<float>(beta - static_cast<double>(saved_mean) * scale)};
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
    const PairSum moments = channel_total(z, w.partial, c);
    const double count = values_per_channel(z, w), mean = moments.a / count;
    // E[x^2] - mean^2 in double, over sums kept in double (moments_kernel): nothing that matters is lost unless |mean|
    // exceeds the deviation ~1e6x.
    const double var = max(0.0, moments.b / count - mean * mean);
    const double inv_std = 1.0 / sqrt(var + st.epsilon);  // biased variance: what the batch is normalised with
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    const float saved_mean = static_cast<float>(mean), saved_inv_std = static_cast<float>(inv_std);
    st.saved_mean[c] = saved_mean;
    st.saved_inv_std[c] = saved_inv_std;
    st.running_mean[c] = static_cast<float>((1.0 - st.momentum) * st.running_mean[c] + st.momentum * mean);
    st.running_var[c] = static_cast<float>((1.0 - st.momentum) * st.running_var[c] + st.momentum * unbiased);
    const Affine f = affine_of(st.gamma[c], st.beta[c], saved_mean, saved_inv_std);
    w.a[c] = f.a;
    w.b[c] = f.b;
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

// The forward's ReLU output for x = v, the forward's arithmetic and rounding: y = round(v * a + b), then whether it is
// positive, which is where relu_backward lets dy through.
template <class T>
__device__ bool relu_passes(float v, float a, float b) {
  T rounded;
  store(&rounded, fmaf(v, a, b));
  return load(&rounded) > 0.0f;
}

// Zeroes g where the fused ReLU zeroed the output (relu: there was one), as relu_backward masks it; a and b the
// forward's scale and shift of each value's channel.
template <int V, class T>
__device__ void mask_by_relu(bool relu, const float (&v)[V], const float (&a)[V], const float (&b)[V], float (&g)[V]) {
  if (!relu) return;
#pragma unroll
  for (int k = 0; k < V; ++k)
    if (!relu_passes<T>(v[k], a[k], b[k])) g[k] = 0.0f;
}

// The backward passes' forward scale and shift per channel, written first where a ReLU was fused.
__global__ void relu_coefficients_kernel(Layout z, const float* gamma, const float* beta, const float* saved_mean,
                                         const float* saved_inv_std, Scratch w) {
  for (int c = static_cast<int>(global_index()); c < z.channels; c += static_cast<int>(grid_stride())) {
    const Affine f = affine_of(gamma[c], beta[c], saved_mean[c], saved_inv_std[c]);
    w.relu_a[c] = f.a;
    w.relu_b[c] = f.b;
  }
}

// dy and x of the pack at i as fp32, dy zeroed where the fused ReLU zeroed the output (relu: there was one).
template <int V, class T>
__device__ void load_masked(const T* dy, const T* x, bool relu, const Scratch& w, int c, int64_t i, float (&g)[V],
                            float (&v)[V]) {
  load_pack(dy + i, g);
  load_pack(x + i, v);
  if (!relu) return;
#pragma unroll
  for (int r = 0; r < V; ++r)
    if (!relu_passes<T>(v[r], w.relu_a[c], w.relu_b[c])) g[r] = 0.0f;
}

template <int V, class T>
__global__ void gradient_sums_kernel(Layout z, const T* x, const T* dy, bool relu, const float* saved_mean, Scratch w) {
  const float mean = saved_mean[blockIdx.x];
  sum_slice(z, w.partial, [&](int64_t i, PairSum& m) {
    float g[V], v[V];
    load_masked(dy, x, relu, w, static_cast<int>(blockIdx.x), i, g, v);
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
    const double count = values_per_channel(z, w), inv_std = saved_inv_std[c];
    const double sum_dy_xhat = sums.b * inv_std;
    if (dbeta) {
      dbeta[c] += static_cast<float>(sums.a);
      dgamma[c] += static_cast<float>(sum_dy_xhat);
    }
    const double a = gamma[c] * inv_std;
    w.a[c] = static_cast<float>(a);
    w.b[c] = static_cast<float>(-a * inv_std * sum_dy_xhat / count);
    w.k[c] = static_cast<float>(-a * sums.a / count);
  }
}

template <int V, class T>
__global__ void dx_kernel(Layout z, const T* x, const T* dy, bool relu, const float* saved_mean, Scratch w, T* dx) {
  for_sample_packs(z, [&](int64_t i, int c) {
    float g[V], v[V];
    load_masked(dy, x, relu, w, c, i, g, v);
#pragma unroll
    for (int r = 0; r < V; ++r) v[r] = fmaf(w.a[c], g[r], fmaf(w.b[c], v[r] - saved_mean[c], w.k[c]));
    store_pack(dx + i, v);
  });
}

// ---- NHWC: the same arithmetic with the channel innermost. A thread owns V channels (its lane of the block's group)
// and walks rows passes() apart, kUnroll rows at a time so that that many packs of each tensor are in flight; it reads
// its channels' coefficients once, not once per pack. The sums' row lanes are added in lane order, so they stay
// deterministic.

// Blocks a multiprocessor holds at least, so that enough threads keep packs in flight: three (80 registers a thread),
// each thread kUnroll rows of packs at a time. A pass is bound by the bytes it keeps in flight: on an H200 the
// backward passes with 16-byte packs of three tensors, 2 rows at a time at two blocks (128 registers), streamed at
// 54-57 % of DRAM bandwidth against the affine pass's 79 %, in the ratio of their bytes in flight. So the backward
// passes take 8-byte packs (kBackwardPackBytes: four channels a thread), 4 rows at a time, three blocks, and widen one
// row at a time; their thread's sums are fp32 (FloatPairSum).
constexpr int kRowBlocksPerSm = 3;
constexpr int kBackwardRowBlocksPerSm = 3;
constexpr int kBackwardUnroll = kUnroll;
constexpr int kBackwardPackBytes = 8;
// The affine pass with a fused join reads two tensors: in 16-byte packs, 4 rows at a time, it spills at 80 registers
// (ptxas); in 8-byte packs it keeps the plain pass's bytes in flight, and no spill.
constexpr int kJoinPackBytes = 8;

// A thread's V channels from c0 (channel group blockIdx.x) and its row lane.
struct RowThread {
  int c0, row_lane;
};

__device__ RowThread row_thread(const Rows& r) {
  const int lane = static_cast<int>(threadIdx.x) % r.lanes;
  return {static_cast<int>(blockIdx.x) * r.group + lane * r.vec, static_cast<int>(threadIdx.x) / r.lanes};
}

// U rows passes() apart from the row at `first` (the index of its first value of the thread's channels): the first
// `count` of them below the end.
struct RowRun {
  int64_t first, stride;
  int count;
  __device__ bool has(int u) const { return u < count; }
  __device__ int64_t at(int u) const { return first + u * stride; }
};

// Calls f(run) for this thread's rows from first + row_lane below end, U rows passes() apart per call and `stride`
// rows between calls.
template <int U, class F>
__device__ void for_row_runs(const Rows& r, RowThread t, int64_t first, int64_t end, int64_t stride, F&& f) {
  const int64_t step = r.passes();
  for (int64_t row = first + t.row_lane; row < end; row += stride) {
    const int count = static_cast<int>(min(int64_t{U}, (end - row + step - 1) / step));
    f(RowRun{row * r.channels + t.c0, step * r.channels, count});
  }
}

// The element-wise kernels' rows: chunks of passes() x U rows (U a call), chunk blockIdx.y, then every gridDim.y-th.
template <int U, class F>
__device__ void for_element_rows(const Rows& r, RowThread t, F&& f) {
  const int64_t chunk = int64_t{r.passes()} * U;
  for_row_runs<U>(r, t, blockIdx.y * chunk, r.rows, gridDim.y * chunk, f);
}

template <int V, int U, class T>
__device__ void load_rows(const T* p, const RowRun& run, Pack<V, T> (&out)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (run.has(u)) out[u] = detail::pack_at<V>(p + run.at(u));
}

// Calls f(u, v) with each loaded pack u of `in` (the run's rows) as fp32 values.
template <int V, int U, class T, class F>
__device__ void for_unpacked(const RowRun& run, const Pack<V, T> (&in)[U], F&& f) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (!run.has(u)) continue;
    float v[V];
    detail::unpack(in[u], v);
    f(u, v);
  }
}

// The backward passes' packs of one run, dy and x, both loaded before either is widened so that they are in flight
// together.
template <int V, int U, class T>
struct BackwardPacks {
  Pack<V, T> dy[U], x[U];
  __device__ BackwardPacks(const T* dy_at, const T* x_at, const RowRun& run) {
    load_rows(dy_at, run, dy);
    load_rows(x_at, run, x);
  }
  // Calls f(u, g, v) for each row u of the run: g its dy where no fused ReLU zeroed the output (relu: there was one;
  // a and b the forward's scale and shift), v its x, both fp32; one row widened at a time.
  template <class F>
  __device__ void for_rows(const RowRun& run, bool relu, const float (&a)[V], const float (&b)[V], F&& f) const {
    for_rows(run, [&](int u, float(&g)[V], const float(&v)[V]) {
      mask_by_relu<V, T>(relu, v, a, b, g);
      f(u, g, v);
    });
  }
  // The same without a mask.
  template <class F>
  __device__ void for_rows(const RowRun& run, F&& f) const {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (!run.has(u)) continue;
      float g[V], v[V];
      detail::unpack(dy[u], g);
      detail::unpack(x[u], v);
      f(u, g, v);
    }
  }
};

// A thread's own sums where double would cost the registers that keep packs in flight: the backward passes add at
// most a few hundred values a thread (a slice's rows over the block's row lanes) before the block's sums in double.
struct FloatPairSum {
  float a = 0, b = 0;
};

// Calls add(at, sums) for this thread's rows of slice blockIdx.y (its sums in Sum), then stores the block's sums per
// channel, added in double.
template <int V, int U, class Sum = PairSum, class Add>
__device__ void sum_rows(const Rows& r, int slices, PairSum* partial, Add&& add) {
  __shared__ double sum_a[detail::kChannelThreads * V], sum_b[detail::kChannelThreads * V];
  const RowThread t = row_thread(r);
  const int64_t begin = blockIdx.y * r.slice_rows(), end = min(r.rows, begin + r.slice_rows());
  Sum mine[V];
  if (t.c0 < r.channels)
    for_row_runs<U>(r, t, begin, end, int64_t{r.passes()} * U, [&](const RowRun& at) { add(at, mine); });
  const int in_group = t.c0 - static_cast<int>(blockIdx.x) * r.group;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    sum_a[t.row_lane * r.group + in_group + k] = mine[k].a;
    sum_b[t.row_lane * r.group + in_group + k] = mine[k].b;
  }
  __syncthreads();
  const int i = static_cast<int>(threadIdx.x), c = static_cast<int>(blockIdx.x) * r.group + i;
  if (i < r.group && c < r.channels) {
    PairSum total;
    for (int l = 0; l < r.passes(); ++l) total.a += sum_a[l * r.group + i], total.b += sum_b[l * r.group + i];
    partial[c * slices + static_cast<int>(blockIdx.y)] = total;
  }
}

// The V coefficients of the thread's channels from c0 (zeros past the last channel, whose lanes do nothing).
template <int V, class C>
__device__ void channel_values(const C* from, const Rows& r, int c0, float (&out)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = c0 < r.channels ? static_cast<float>(from[c0 + k]) : 0.0f;
}

// Sums of x (a) and x^2 (b) per channel over the thread's rows of slice blockIdx.y.
template <int V, class T>
__global__ void __launch_bounds__(detail::kChannelThreads, kRowBlocksPerSm)
    rows_moments_kernel(Rows r, Layout z, const T* x, Scratch w) {
  sum_rows<V, kUnroll>(r, z.slices, w.partial, [&](const RowRun& at, PairSum(&m)[V]) {
    Pack<V, T> in[kUnroll];
    load_rows(x, at, in);
    for_unpacked(at, in, [&](int, const float(&v)[V]) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const double d = v[k];
        m[k].a += d;
        m[k].b = fma(d, d, m[k].b);
      }
    });
  });
}

// y = x * a + b rounded to T; with Add (a fused residual join) the shortcut added to that in fp32; with relu, then
// max(., 0), rounded: the bits relu_forward, or add_relu, would write after the unfused batch norm.
template <int V, bool Add, class T>
__global__ void __launch_bounds__(detail::kChannelThreads, kRowBlocksPerSm)
    rows_affine_kernel(Rows r, const T* x, const T* shortcut, Scratch w, bool relu, T* y) {
  const RowThread t = row_thread(r);
  if (t.c0 >= r.channels) return;
  float a[V], b[V];
  channel_values(w.a, r, t.c0, a);
  channel_values(w.b, r, t.c0, b);
  for_element_rows<kUnroll>(r, t, [&](const RowRun& at) {
    Pack<V, T> in[kUnroll], added[Add ? kUnroll : 1];
    load_rows(x, at, in);
    if constexpr (Add) load_rows(shortcut, at, added);
    for_unpacked(at, in, [&](int u, const float(&v)[V]) {
      float out[V], s[V] = {};
      if constexpr (Add) detail::unpack(added[u], s);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        T rounded;
        store(&rounded, fmaf(v[k], a[k], b[k]));
        out[k] = load(&rounded);
        if constexpr (Add) out[k] += s[k];
        if (relu && !(out[k] > 0.0f)) out[k] = 0.0f;
      }
      store_pack(y + at.at(u), out);
    });
  });
}

template <int V, class T>
__global__ void __launch_bounds__(detail::kChannelThreads, kBackwardRowBlocksPerSm)
    rows_gradient_sums_kernel(Rows r, Layout z, const T* x, const T* dy, bool relu, const float* saved_mean,
                              Scratch w) {
  const int c0 = row_thread(r).c0;
  float mean[V], relu_a[V], relu_b[V];
  channel_values(saved_mean, r, c0, mean);
  channel_values(w.relu_a, r, c0, relu_a);
  channel_values(w.relu_b, r, c0, relu_b);
  sum_rows<V, kBackwardUnroll, FloatPairSum>(r, z.slices, w.partial, [&](const RowRun& at, FloatPairSum(&m)[V]) {
    const BackwardPacks<V, kBackwardUnroll, T> packs(dy, x, at);
    packs.for_rows(at, relu, relu_a, relu_b, [&](int, const float(&g)[V], const float(&v)[V]) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        m[k].a += g[k];
        m[k].b = fmaf(g[k], v[k] - mean[k], m[k].b);
      }
    });
  });
}

// The first backward pass after a fused residual join: dy where the join's output y is positive (relu_backward's
// rule) is the shortcut's gradient, written to dshortcut, and the batch norm's own dy, summed as
// rows_gradient_sums_kernel sums it. Three tensors' packs in flight: at 80 registers ptxas spills 22 bytes.
template <int V, class T>
__global__ void __launch_bounds__(detail::kChannelThreads, kBackwardRowBlocksPerSm)
    rows_join_gradient_sums_kernel(Rows r, Layout z, const T* x, const T* dy, const T* y, const float* saved_mean,
                                   Scratch w, T* dshortcut) {
  float mean[V];
  channel_values(saved_mean, r, row_thread(r).c0, mean);
  sum_rows<V, kBackwardUnroll, FloatPairSum>(r, z.slices, w.partial, [&](const RowRun& at, FloatPairSum(&m)[V]) {
    Pack<V, T> out[kBackwardUnroll];
    load_rows(y, at, out);
    const BackwardPacks<V, kBackwardUnroll, T> packs(dy, x, at);
    packs.for_rows(at, [&](int u, const float(&g)[V], const float(&v)[V]) {
      float passed[V], kept[V];
      detail::unpack(out[u], passed);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        kept[k] = passed[k] > 0.0f ? g[k] : 0.0f;
        m[k].a += kept[k];
        m[k].b = fmaf(kept[k], v[k] - mean[k], m[k].b);
      }
      store_pack(dshortcut + at.at(u), kept);
    });
  });
}

template <int V, class T>
__global__ void __launch_bounds__(detail::kChannelThreads, kBackwardRowBlocksPerSm)
    rows_dx_kernel(Rows r, const T* x, const T* dy, bool relu, const float* saved_mean, Scratch w, T* dx) {
  const RowThread t = row_thread(r);
  if (t.c0 >= r.channels) return;
  float a[V], b[V], k0[V], mean[V], relu_a[V], relu_b[V];
  channel_values(w.a, r, t.c0, a);
  channel_values(w.b, r, t.c0, b);
  channel_values(w.k, r, t.c0, k0);
  channel_values(saved_mean, r, t.c0, mean);
  channel_values(w.relu_a, r, t.c0, relu_a);
  channel_values(w.relu_b, r, t.c0, relu_b);
  for_element_rows<kBackwardUnroll>(r, t, [&](const RowRun& at) {
    const BackwardPacks<V, kBackwardUnroll, T> packs(dy, x, at);
    packs.for_rows(at, relu, relu_a, relu_b, [&](int u, const float(&g)[V], const float(&v)[V]) {
      float out[V];
#pragma unroll
      for (int k = 0; k < V; ++k) out[k] = fmaf(a[k], g[k], fmaf(b[k], v[k] - mean[k], k0[k]));
      store_pack(dx + at.at(u), out);
    });
  });
}

// The NHWC sums leave a channel hundreds of slices (enough blocks to stream the tensor whatever the channel count);
// one finishing thread walking them took 140-280 us a kernel on an H200 (ncu), a third of a batch norm. A block per
// channel adds them first: each thread its slices in order, then the block in a fixed tree, so still deterministic.
__global__ void fold_slices_kernel(Layout z, Scratch w) {
  const int c = static_cast<int>(blockIdx.x);
  PairSum mine;
  for (int s = static_cast<int>(threadIdx.x); s < z.slices; s += detail::kChannelThreads)
    mine.a += w.partial[c * z.slices + s].a, mine.b += w.partial[c * z.slices + s].b;
  const PairSum total = detail::block_sum(mine);
  if (threadIdx.x == 0) w.totals[c] = total;
}

// The finishing kernels' view once fold_slices_kernel has run: one slice per channel, the totals.
Layout folded(Layout z) {
  z.slices = 1;
  return z;
}
Scratch folded(Scratch w) {
  w.partial = w.totals;
  return w;
}

bool empty(const BatchNormShape& s) { return s.batch <= 0 || s.channels <= 0 || s.spatial <= 0; }

dim3 slice_grid(const Layout& z) { return dim3(static_cast<unsigned>(z.channels), static_cast<unsigned>(z.slices)); }
unsigned channel_blocks(const Layout& z) { return detail::blocks_for(z.channels); }
dim3 element_grid(const Layout& z) {
  constexpr int64_t kPerBlock = int64_t{detail::kThreads} * kUnroll;
  return dim3(static_cast<unsigned>(z.batch), static_cast<unsigned>((z.sample_packs() + kPerBlock - 1) / kPerBlock));
}

dim3 rows_grid(const Rows& r) { return dim3(static_cast<unsigned>(r.groups), static_cast<unsigned>(r.slices)); }
dim3 rows_element_grid(const Rows& r) {
  const int64_t chunk = int64_t{r.passes()} * kUnroll, chunks = (r.rows + chunk - 1) / chunk;
  return dim3(static_cast<unsigned>(r.groups), static_cast<unsigned>(std::min<int64_t>(chunks, 65535)));
}

// Calls body(T{}, std::integral_constant<int, V>{}) for the element type and a pack of vec values.
template <class Body>
void with_pack(const BatchNormShape& s, int vec, Body body) {
  detail::with_element(s.data, [&](auto t) { detail::with_pack_width(vec, [&](auto v) { body(t, v); }); });
}

// The NHWC affine pass, y = x * w.a + w.b then the epilogue, in the packs its tensors allow.
void apply_rows_affine(const BatchNormShape& s, const void* x, BatchNormEpilogue then, const Scratch& w, void* y,
                       Stream stream) {
  const Rows r = then.shortcut ? rows_of(s, {x, y, then.shortcut}, kJoinPackBytes) : rows_of(s, {x, y});
  with_pack(s, r.vec, [&](auto t, auto v) {
    using T = decltype(t);
    constexpr int V = decltype(v)::value;
    const dim3 grid = rows_element_grid(r);
    if (then.shortcut)
      rows_affine_kernel<V, true><<<grid, detail::kChannelThreads, 0, stream>>>(
          r, static_cast<const T*>(x), static_cast<const T*>(then.shortcut), w, then.relu, static_cast<T*>(y));
    else
      rows_affine_kernel<V, false><<<grid, detail::kChannelThreads, 0, stream>>>(
          r, static_cast<const T*>(x), static_cast<const T*>(nullptr), w, then.relu, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
}

// The NCHW kernels take no shortcut: the join runs after them, as the unfused one would.
void add_shortcut_apart(const BatchNormShape& s, BatchNormEpilogue then, void* y, Stream stream) {
  if (then.shortcut) add_relu({s.elements(), s.data}, y, then.shortcut, y, stream);
}

__global__ void set_count_kernel(PairSum* count, double values) { *count = {values, 0.0}; }

// This rank's sums as the finishing kernels read them: its slices, or their per-channel totals once folded. A group
// reduces the totals, so with one they are folded here if they are not yet.
struct OwnSums {
  Layout z;
  Scratch w;
};
OwnSums own_sums(const Layout& z, const Scratch& w, bool folded_already, const BatchNormGroup* group, Stream stream) {
  if (group && !folded_already) fold_slices_kernel<<<z.channels, detail::kChannelThreads, 0, stream>>>(z, w);
  if (group || folded_already) return {folded(z), folded(w)};
  return {z, w};
}

// The folded totals with this rank's count after them, added over the group's ranks in place: the sums the finishing
// kernels then read, with the group's count.
Scratch group_totals(const OwnSums& own, const BatchNormGroup& group, Stream stream) {
  PairSum* count = own.w.totals + own.z.channels;
  set_count_kernel<<<1, 1, 0, stream>>>(count, static_cast<double>(own.z.count()));
  RT_CHECK_LAUNCH();
  group.add_over_ranks(reinterpret_cast<double*>(own.w.totals), 2 * (static_cast<std::size_t>(own.z.channels) + 1),
                       stream);
  Scratch g = own.w;
  g.group_count = &count->a;
  return g;
}

// The forward's statistics from the sums in w: this rank's, or with a group the group's.
void finish_statistics(const Layout& z, const Statistics& st, const Scratch& w, bool folded_already,
                       const BatchNormGroup* group, Stream stream) {
  const OwnSums own = own_sums(z, w, folded_already, group, stream);
  statistics_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(
      own.z, st, group ? group_totals(own, *group, stream) : own.w);
  RT_CHECK_LAUNCH();
}

// Backward's coefficients from the gradient sums in w. With a group, this rank's share of dgamma and dbeta first
// (the gradient all-reduce adds the ranks' shares up), then dx's coefficients from the group's sums.
void finish_gradient(const Layout& z, const float* gamma, const float* saved_inv_std, const Scratch& w,
                     bool folded_already, const BatchNormGroup* group, float* dgamma, float* dbeta, Stream stream) {
  const OwnSums own = own_sums(z, w, folded_already, group, stream);
  gradient_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(own.z, gamma, saved_inv_std, own.w,
                                                                                    dgamma, dbeta);
  RT_CHECK_LAUNCH();
  if (!group) return;
  gradient_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(
      own.z, gamma, saved_inv_std, group_totals(own, *group, stream), nullptr, nullptr);
  RT_CHECK_LAUNCH();
}

}  // namespace

std::size_t batchnorm_scratch_bytes(const BatchNormShape& s) {
  if (empty(s)) return 0;
  const Layout z = layout_of(s);
  const auto channels = static_cast<std::size_t>(z.channels);
  return sizeof(PairSum) * (channels * (static_cast<std::size_t>(z.slices) + 1) + 1) + 5 * sizeof(float) * channels;
}

void batchnorm_forward_train(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             double momentum, double epsilon, float* running_mean, float* running_var,
                             BatchNormEpilogue then, void* y, float* saved_mean, float* saved_inv_std, void* scratch,
                             Stream stream, const BatchNormGroup* group) {
  if (empty(s)) return;
  const Layout z = layout_of(s, {x, y, then.shortcut});
  const Scratch w = scratch_of(z, scratch);
  const Statistics st{gamma, beta, momentum, epsilon, running_mean, running_var, saved_mean, saved_inv_std};
  if (is_nhwc(s)) {
    const Rows r = rows_of(s, {x, y});  // the sums as without a join: the same statistics, bit for bit
    with_pack(s, r.vec, [&](auto t, auto v) {
      rows_moments_kernel<decltype(v)::value>
          <<<rows_grid(r), detail::kChannelThreads, 0, stream>>>(r, z, static_cast<const decltype(t)*>(x), w);
    });
    fold_slices_kernel<<<z.channels, detail::kChannelThreads, 0, stream>>>(z, w);
    finish_statistics(z, st, w, true, group, stream);
    apply_rows_affine(s, x, then, w, y, stream);
    return;
  }
  with_pack(s, z.vec, [&](auto t, auto v) {
    using T = decltype(t);
    constexpr int V = decltype(v)::value;
    const T* xt = static_cast<const T*>(x);
    moments_kernel<V><<<slice_grid(z), detail::kChannelThreads, 0, stream>>>(z, xt, w);
    finish_statistics(z, st, w, false, group, stream);
    affine_kernel<V><<<element_grid(z), detail::kThreads, 0, stream>>>(z, xt, w, then.relu && !then.shortcut,
                                                                        static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
  add_shortcut_apart(s, then, y, stream);
}

void batchnorm_forward_infer(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, double epsilon,
                             BatchNormEpilogue then, void* y, void* scratch, Stream stream) {
  if (empty(s)) return;
  const Layout z = layout_of(s, {x, y, then.shortcut});
  const Scratch w = scratch_of(z, scratch);
  inference_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, gamma, beta, running_mean,
                                                                                     running_var, epsilon, w);
  if (is_nhwc(s)) {
    apply_rows_affine(s, x, then, w, y, stream);
    return;
  }
  with_pack(s, z.vec, [&](auto t, auto v) {
    using T = decltype(t);
    affine_kernel<decltype(v)::value><<<element_grid(z), detail::kThreads, 0, stream>>>(
        z, static_cast<const T*>(x), w, then.relu && !then.shortcut, static_cast<T*>(y));
  });
  RT_CHECK_LAUNCH();
  add_shortcut_apart(s, then, y, stream);
}

void batchnorm_backward(const BatchNormShape& s, const void* x, const void* dy, BatchNormBackwardMask mask,
                        const float* gamma, const float* beta, const float* saved_mean, const float* saved_inv_std,
                        void* dx, float* dgamma, float* dbeta, void* scratch, Stream stream,
                        const BatchNormGroup* group) {
  if (empty(s)) return;
  const Layout z = layout_of(s, {x, dy, dx, mask.join_y, mask.dshortcut});
  const Scratch w = scratch_of(z, scratch);
  if (mask.relu)
    relu_coefficients_kernel<<<channel_blocks(z), detail::kThreads, 0, stream>>>(z, gamma, beta, saved_mean,
                                                                                 saved_inv_std, w);
  if (is_nhwc(s)) {
    const Rows r = rows_of(s, {x, dy, dx, mask.join_y, mask.dshortcut}, kBackwardPackBytes);
    with_pack(s, r.vec, [&](auto t, auto v) {
      using T = decltype(t);
      constexpr int V = decltype(v)::value;
      const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy);
      if (mask.join_y) {
        rows_join_gradient_sums_kernel<V><<<rows_grid(r), detail::kChannelThreads, 0, stream>>>(
            r, z, xt, dyt, static_cast<const T*>(mask.join_y), saved_mean, w, static_cast<T*>(mask.dshortcut));
        dyt = static_cast<const T*>(mask.dshortcut);  // masked: what the batch norm's own passes read from here on
      } else {
        rows_gradient_sums_kernel<V>
            <<<rows_grid(r), detail::kChannelThreads, 0, stream>>>(r, z, xt, dyt, mask.relu, saved_mean, w);
      }
      fold_slices_kernel<<<z.channels, detail::kChannelThreads, 0, stream>>>(z, w);
      finish_gradient(z, gamma, saved_inv_std, w, true, group, dgamma, dbeta, stream);
      rows_dx_kernel<V><<<rows_element_grid(r), detail::kChannelThreads, 0, stream>>>(r, xt, dyt, mask.relu,
                                                                                       saved_mean, w,
                                                                                       static_cast<T*>(dx));
    });
    RT_CHECK_LAUNCH();
    return;
  }
  if (mask.join_y) {  // NCHW: the join's mask apart, then the batch norm's passes on the masked dy
    relu_backward({s.elements(), s.data}, mask.join_y, dy, mask.dshortcut, stream);
    dy = mask.dshortcut;
  }
  with_pack(s, z.vec, [&](auto t, auto v) {
    using T = decltype(t);
    constexpr int V = decltype(v)::value;
    const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy);
    gradient_sums_kernel<V>
        <<<slice_grid(z), detail::kChannelThreads, 0, stream>>>(z, xt, dyt, mask.relu, saved_mean, w);
    finish_gradient(z, gamma, saved_inv_std, w, false, group, dgamma, dbeta, stream);
    dx_kernel<V><<<element_grid(z), detail::kThreads, 0, stream>>>(z, xt, dyt, mask.relu, saved_mean, w,
                                                                   static_cast<T*>(dx));
  });
  RT_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels::cuda
