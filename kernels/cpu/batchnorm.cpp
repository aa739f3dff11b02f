// Owns spatial batch normalisation on the CPU.
//
// Per-channel sums run over N planes of H x W. They are taken in two steps so every hot loop is a plain
// element-wise loop the compiler vectorises under strict IEEE rules: first the N planes are added element by
// element into a float row of H x W partial sums (N terms each, 64 in the model), then that row is summed in
// double. A float reduction written directly (s += x[i]) is left scalar without -ffast-math, and eight
// hand-made float lanes were vectorised across the wrong loop and ran ~5x slower than this.
// The variance is a second pass over centred values, because E[x^2] - E[x]^2 cancels when |mean| >> std.
//
// x (and dx) may come channel-blocked, as oneDNN's convolution wrote x (BatchNormShape::in_block): then a group is
// whole blocks, the partial sums take x's own layout (each element still summed over n in order), the row sums
// read along the block, and backward first stages the group's dy (unpooled, masked) in that layout, so every
// element sees the same operations in the same order as in NCHW: the same bits either way. With a fused pool and a
// blocked x the pooled y (and dy) may be blocked too, by x's block, for the convolution after it
// (BatchNormShape::out_block): only where the pooled values are written and where dy is read for staging does that
// layout show. NHWC is the block of every channel: one group, each position one run of C channels.
#include "kernels/cpu/batchnorm.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <vector>

#include "common/error.h"
#include "kernels/activation.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/operand_rounding.h"
#include "kernels/cpu/pooling.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

const float* plane(const BatchNormShape& s, const float* base, int n, int c) {
  return base + (std::ptrdiff_t{n} * s.channels + c) * s.spatial;
}
float* plane(const BatchNormShape& s, float* base, int n, int c) {
  return base + (std::ptrdiff_t{n} * s.channels + c) * s.spatial;
}

// Channels are taken in groups whose planes lie next to each other in NCHW: for each image the group is one
// contiguous run, which the hardware prefetcher streams, where a single small plane (14 x 14 floats, or 1 after a
// dense layer) is a short hop. A group holds about this many bytes of one tensor, so a second pass over the
// group's x, dy and output finds them in L2. Each channel's sums are taken in the same order as one at a time.
constexpr std::size_t kGroupBytes = 384 * 1024;

struct ChannelGroup {
  int first = 0, count = 0;
};

int block_of(const BatchNormShape& s) { return std::max(1, s.in_block); }

// Channels per group: about kGroupBytes of one tensor, in whole blocks of a blocked x.
int group_size(const BatchNormShape& s) {
  const std::size_t channel_bytes = sizeof(float) * static_cast<std::size_t>(s.batch) * s.spatial;
  const auto block = static_cast<std::size_t>(block_of(s));
  const std::size_t fit = channel_bytes > 0 ? kGroupBytes / channel_bytes / block * block : block;
  return static_cast<int>(std::clamp<std::size_t>(fit, block, static_cast<std::size_t>(s.channels)));
}

// Where channel c's first element of image n lies in an input-layout tensor (x, dx); its next elements follow at
// a stride of block_of(s). A group's channels of one image are one contiguous run in either layout, starting at
// input_offset(s, n, g.first).
std::ptrdiff_t input_offset(const BatchNormShape& s, int n, int c) {
  const int b = block_of(s);
  return (std::ptrdiff_t{n} * s.channels + c / b * b) * s.spatial + c % b;
}

// Where channel c's pooled plane of image n starts in y and dy (and a fused ReLU's output) with a fused pool of
// out_plane positions, and the stride between its positions: NCHW, or blocked by s.out_block. The pool's winners
// stay in NCHW order whatever y's layout: pool.argmax + pooled_index(s, out_plane, n, c).
struct PooledAt {
  std::ptrdiff_t offset = 0;
  int stride = 1;
};
PooledAt pooled_at(const BatchNormShape& s, std::ptrdiff_t out_plane, int n, int c) {
  const int b = std::max(1, s.out_block);
  return {(std::ptrdiff_t{n} * s.channels + c / b * b) * out_plane + c % b, b};
}
std::ptrdiff_t pooled_index(const BatchNormShape& s, std::ptrdiff_t out_plane, int n, int c) {
  return (std::ptrdiff_t{n} * s.channels + c) * out_plane;
}

template <class Body>
void for_each_group(const BatchNormShape& s, Body body) {
  const int size = group_size(s);
  for (int c = 0; c < s.channels; c += size) body(ChannelGroup{c, std::min(size, s.channels - c)});
}

int group_count(const BatchNormShape& s) { return (s.channels + group_size(s) - 1) / group_size(s); }

// The threads the fp32 passes run channel groups on: the process's compute threads (no more than there are groups)
// where x is NCHW, each group one thread's, every channel's sums in the same order: the same bits on any thread
// count; else one. A blocked x is one group or a few, and its kernels may throw (with_block), which an OpenMP region
// cannot pass on.
int group_threads(const BatchNormShape& s) {
  return block_of(s) > 1 ? 1 : std::max(1, std::min(compute_threads(), group_count(s)));
}

// for_each_group on `threads` threads (thread_runs.h): body(g, t), t the thread's index in [0, threads) for buffers
// of its own.
template <class Body>
void for_each_group_on(int threads, const BatchNormShape& s, Body body) {
  const int size = group_size(s);
  for_each_thread_run(threads, group_count(s), [&](int64_t first, int64_t end, int t) {
    for (auto i = static_cast<int>(first); i < end; ++i)
      body(ChannelGroup{i * size, std::min(size, s.channels - i * size)}, t);
  });
}

// Four independent double chains: enough to hide the add latency, exact enough for 10^5-10^6 terms. Element i
// at v[i * stride].
double sum_row(const float* v, int n, int stride = 1) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += v[i * stride], s1 += v[(i + 1) * stride];
    s2 += v[(i + 2) * stride], s3 += v[(i + 3) * stride];
  }
  for (; i < n; ++i) s0 += v[i * stride];
  return (s0 + s1) + (s2 + s3);
}

// Channel j's row of a group's partial sums, which are laid out as the group's run of x.
double channel_sum(const BatchNormShape& s, const float* partial, int j) {
  const int b = block_of(s);
  return sum_row(partial + (std::ptrdiff_t{j} / b * b) * s.spatial + j % b, s.spatial, b);
}

// partial (g.count rows of H x W): row j, element i = sum over n of x[n][first + j][i], n in order.
void group_sums(const BatchNormShape& s, const float* x, ChannelGroup g, float* __restrict partial) {
  const std::ptrdiff_t run = std::ptrdiff_t{g.count} * s.spatial;
  const float* __restrict first = x + input_offset(s, 0, g.first);
  for (std::ptrdiff_t i = 0; i < run; ++i) partial[i] = first[i];
  for (int n = 1; n < s.batch; ++n) {
    const float* __restrict p = x + input_offset(s, n, g.first);
    for (std::ptrdiff_t i = 0; i < run; ++i) partial[i] += p[i];
  }
}

// Planes of fewer values than this are walked as one run of the group's channels per image, each per-channel
// coefficient spread over its channel's positions (as the blocked kernels spread theirs along a block), with the same
// per-element arithmetic as the loops per plane: a loop over a plane of a few values costs more to set up than its
// arithmetic (MobileNetV2's 960 channels of 2x2 took 2.5 ms a call, fp32 and bf16 alike).
constexpr int kSmallPlane = 16;
bool small_planes(const BatchNormShape& s) { return s.spatial < kSmallPlane && block_of(s) == 1; }

// value(j) over channel j's s.spatial positions, for the group's channels, in this thread's buffer `slot`.
template <class Value>
const float* spread(const BatchNormShape& s, ChannelGroup g, int slot, Value value) {
  thread_local std::array<std::vector<float>, 4> buffers;
  std::vector<float>& run = buffers[static_cast<std::size_t>(slot)];
  run.resize(static_cast<std::size_t>(g.count) * static_cast<std::size_t>(s.spatial));
  for (int j = 0; j < g.count; ++j) std::fill_n(run.data() + std::ptrdiff_t{j} * s.spatial, s.spatial, value(j));
  return run.data();
}

// Calls body.template operator()<B>() with the block as a constant, so the loops along a block are whole vectors
// (has_block_kernels offers no other block). NHWC's wide blocks are instantiated out of line: inlined beside the
// others they made the callers' blocks-of-16 loops measurably slower (perf/results/2026-11-26-cpu-nhwc.md).
template <class Body>
[[gnu::noinline]] void with_wide_block(const BatchNormShape& s, Body body) {
  switch (block_of(s)) {
    case 32:
      return body.template operator()<32>();
    case 64:
      return body.template operator()<64>();
    default:
      throw Error(ExitCode::internal, fmt::format("batch norm has no kernel for x blocked by {}", block_of(s)));
  }
}
template <class Body>
void with_block(const BatchNormShape& s, Body body) {
  if (block_of(s) == 16)
    body.template operator()<16>();
  else if (block_of(s) == 8)
    body.template operator()<8>();
  else
    with_wide_block(s, body);
}

// The same over a blocked x, along each block: one vector of the block's channels per position.
template <int b>
void group_centred_squares_blocked(const BatchNormShape& s, const float* x, ChannelGroup g, const float* mean,
                                   float* __restrict partial) {
  const std::ptrdiff_t block_run = std::ptrdiff_t{s.spatial} * b;
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t{g.count} * s.spatial; ++i) partial[i] = 0.0f;
  for (int n = 0; n < s.batch; ++n) {
    const float* __restrict p = x + input_offset(s, n, g.first);
    for (int blk = 0; blk < g.count / b; ++blk) {
      const float* __restrict m = mean + blk * b;
      const float* __restrict q = p + blk * block_run;
      float* __restrict row = partial + blk * block_run;
      for (int i = 0; i < s.spatial; ++i)
        for (int l = 0; l < b; ++l) {
          const float d = q[i * b + l] - m[l];
          row[i * b + l] += d * d;
        }
    }
  }
}

// partial row j = sum over n of (x - mean[j])^2 for channel first + j.
void group_centred_squares(const BatchNormShape& s, const float* x, ChannelGroup g, const float* mean,
                           float* __restrict partial) {
  if (block_of(s) > 1)
    return with_block(s, [&]<int b>() { group_centred_squares_blocked<b>(s, x, g, mean, partial); });
  const std::ptrdiff_t run = std::ptrdiff_t{g.count} * s.spatial;
  for (std::ptrdiff_t i = 0; i < run; ++i) partial[i] = 0.0f;
  if (small_planes(s)) {
    const float* __restrict m = spread(s, g, 0, [&](int j) { return mean[j]; });
    for (int n = 0; n < s.batch; ++n) {
      const float* __restrict p = x + input_offset(s, n, g.first);
      for (std::ptrdiff_t k = 0; k < run; ++k) {
        const float d = p[k] - m[k];
        partial[k] += d * d;
      }
    }
    return;
  }
  for (int n = 0; n < s.batch; ++n) {
    for (int j = 0; j < g.count; ++j) {
      const float* __restrict p = plane(s, x, n, g.first + j);
      float* __restrict row = partial + std::ptrdiff_t{j} * s.spatial;
      const float m = mean[j];
      for (int i = 0; i < s.spatial; ++i) {
        const float d = p[i] - m;
        row[i] += d * d;
      }
    }
  }
}

// v through the fused activation, as its layer's forward writes it: max(v, 0) as relu_forward writes it (a NaN
// passes through), or activation_forward's ReLU6 (kernels/activation.h), so the fused pass gives their bits.
inline float activated(FusedActivation act, float v) {
  if (act == FusedActivation::relu6) return activation_value(Activation::relu6, v);
  return act == FusedActivation::relu && v < 0.0f ? 0.0f : v;
}

// y = x * scale + shift over one plane, then the fused activation; a loop for each, so each vectorises alone.
void affine_plane(int spatial, const float* __restrict src, float a, float b, FusedActivation act,
                  float* __restrict dst) {
  switch (act) {
    case FusedActivation::relu:
      for (int i = 0; i < spatial; ++i) dst[i] = activated(FusedActivation::relu, src[i] * a + b);
      return;
    case FusedActivation::relu6:
      for (int i = 0; i < spatial; ++i) dst[i] = activated(FusedActivation::relu6, src[i] * a + b);
      return;
    case FusedActivation::none: break;
  }
  for (int i = 0; i < spatial; ++i) dst[i] = src[i] * a + b;
}

// The same over a run of planes, the coefficients spread over their positions (small_planes).
void affine_run(std::ptrdiff_t run, const float* __restrict src, const float* __restrict a,
                const float* __restrict b, FusedActivation act, float* __restrict dst) {
  switch (act) {
    case FusedActivation::relu:
      for (std::ptrdiff_t k = 0; k < run; ++k) dst[k] = activated(FusedActivation::relu, src[k] * a[k] + b[k]);
      return;
    case FusedActivation::relu6:
      for (std::ptrdiff_t k = 0; k < run; ++k) dst[k] = activated(FusedActivation::relu6, src[k] * a[k] + b[k]);
      return;
    case FusedActivation::none: break;
  }
  for (std::ptrdiff_t k = 0; k < run; ++k) dst[k] = src[k] * a[k] + b[k];
}

// The same reading a plane of a blocked x, whose elements lie `stride` apart.
void affine_plane_strided(int spatial, const float* __restrict src, int stride, float a, float b,
                          FusedActivation act, float* __restrict dst) {
  for (int i = 0; i < spatial; ++i) dst[i] = activated(act, src[std::ptrdiff_t{i} * stride] * a + b);
}

// values, in place, = themselves rounded to `stored` (nothing for fp32): what a fused pool's windows compare.
void round_to_stored(ElementType stored, std::ptrdiff_t n, float* values) {
  if (stored == ElementType::f32) return;
  round_operands(stored == ElementType::bf16 ? OperandRounding::bf16 : OperandRounding::fp16, n, values, values);
}

// affine_group for a blocked x with a fused pool: a block of channels of one image at a time, normalised along the
// block into an L1-sized buffer in x's layout and pooled from there by maxpool_2x2_block.
template <int b>
void affine_pool_group_blocked(const BatchNormShape& s, ChannelGroup g, const float* x, const float* scale,
                               const float* shift, float* y, FusedActivation act, const FusedPool& pool,
                               std::vector<float>& block_buffer) {
  const int oh = pool.h / 2, ow = pool.w / 2;
  const std::ptrdiff_t block_run = std::ptrdiff_t{s.spatial} * b, out_plane = std::ptrdiff_t{oh} * ow;
  block_buffer.resize(static_cast<std::size_t>(block_run));
  float* __restrict buffer = block_buffer.data();
  for (int n = 0; n < s.batch; ++n) {
    for (int blk = 0; blk < g.count / b; ++blk) {
      const float* __restrict src = x + input_offset(s, n, g.first) + blk * block_run;
      const float* __restrict a = scale + blk * b;
      const float* __restrict c = shift + blk * b;
      for (int i = 0; i < s.spatial; ++i)
        for (int l = 0; l < b; ++l) buffer[i * b + l] = activated(act, src[i * b + l] * a[l] + c[l]);
      round_to_stored(pool.stored, block_run, buffer);
      const int first = g.first + blk * b;
      // y blocked as x is (BatchNormShape::out_block is then in_block), or NCHW planes.
      const PooledStrides y_at = s.out_block > 1 ? PooledStrides{1, b} : PooledStrides{out_plane, 1};
      maxpool_2x2_block(pool.w, oh, ow, b, buffer, y + pooled_at(s, out_plane, n, first).offset, y_at,
                        pool.argmax + pooled_index(s, out_plane, n, first), out_plane);
    }
  }
}

// The affine (and ReLU) over every plane of each channel of the group, into NCHW y; with a fused pool, each plane
// goes through a plane-sized buffer that stays in L1 into the pool, and only the pooled plane and its winners are
// written.
void affine_group(const BatchNormShape& s, ChannelGroup g, const float* x, const float* scale, const float* shift,
                  float* y, FusedActivation act, const FusedPool* pool, std::vector<float>& plane_buffer) {
  const int oh = pool ? pool->h / 2 : 0, ow = pool ? pool->w / 2 : 0;
  const int block = block_of(s);
  if (block > 1 && pool)
    return with_block(s, [&]<int b>() {
      affine_pool_group_blocked<b>(s, g, x, scale, shift, y, act, *pool, plane_buffer);
    });
  if (!pool && small_planes(s)) {
    const float* a = spread(s, g, 0, [&](int j) { return scale[j]; });
    const float* b = spread(s, g, 1, [&](int j) { return shift[j]; });
    for (int n = 0; n < s.batch; ++n)
      affine_run(std::ptrdiff_t{g.count} * s.spatial, x + input_offset(s, n, g.first), a, b, act,
                 plane(s, y, n, g.first));
    return;
  }
  const std::ptrdiff_t out_plane = std::ptrdiff_t{oh} * ow;
  if (pool) plane_buffer.resize(static_cast<std::size_t>(s.spatial));
  for (int n = 0; n < s.batch; ++n) {
    for (int j = 0; j < g.count; ++j) {
      const float* src = x + input_offset(s, n, g.first + j);
      float* const dst = pool ? plane_buffer.data() : plane(s, y, n, g.first + j);
      if (block > 1)
        affine_plane_strided(s.spatial, src, block, scale[j], shift[j], act, dst);
      else
        affine_plane(s.spatial, src, scale[j], shift[j], act, dst);
      if (!pool) continue;
      round_to_stored(pool->stored, s.spatial, plane_buffer.data());
      const std::ptrdiff_t out = pooled_index(s, out_plane, n, g.first + j);
      maxpool_2x2_plane(pool->w, oh, ow, plane_buffer.data(), y + out, pool->argmax + out);
    }
  }
}

// Where a group's planes of one tensor lie: plane (n, j) of the group at base + n * image_stride + j * spatial.
// A whole NCHW tensor, or the group's own staged gradients (stage_dy; blocked there, image n at base + n *
// image_stride in x's layout).
struct GroupPlanes {
  const float* base = nullptr;
  std::ptrdiff_t image_stride = 0;
  int spatial = 0;
  const float* at(int n, int j) const { return base + n * image_stride + std::ptrdiff_t{j} * spatial; }
};

GroupPlanes group_planes(const BatchNormShape& s, const float* t, ChannelGroup g) {
  if (!t) return {};
  return {plane(s, t, 0, g.first), std::ptrdiff_t{s.channels} * s.spatial, s.spatial};
}


// The output gradient as the fused activation's backward passes it, read at its output y: relu_backward's select
// (dy where y is positive), or activation_backward's product by ReLU6's slope (kernels/activation.h), whose slope at
// y is its slope at the input (1 inside (0, 6), 0 elsewhere and at a NaN).
inline float through_activation(FusedActivation act, float y, float dy) {
  if (act == FusedActivation::relu6) return activation_slope(Activation::relu6, y) * dy;
  return y > 0.0f ? dy : 0.0f;
}

// A fused activation's fp32 output and kind, as backward's passes read it (FusedOutput's y widened where 16-bit).
struct Fp32Mask {
  const float* y = nullptr;
  FusedActivation act = FusedActivation::relu;
};

// group_gradient_sums over small planes (small_planes): each image's run of the group's planes at once. The group's
// planes of dy and relu_y lie at j * spatial from their image's first, one run too.
void group_gradient_sums_small(const BatchNormShape& s, const float* x, GroupPlanes dy, GroupPlanes relu_y,
                               FusedActivation act, ChannelGroup g, const float* mean, float* __restrict pa,
                               float* __restrict pb) {
  const std::ptrdiff_t run = std::ptrdiff_t{g.count} * s.spatial;
  const float* __restrict m = spread(s, g, 0, [&](int j) { return mean[j]; });
  for (int n = 0; n < s.batch; ++n) {
    const float* __restrict xs = x + input_offset(s, n, g.first);
    const float* __restrict gs = dy.at(n, 0);
    if (relu_y.base) {
      const float* __restrict ys = relu_y.at(n, 0);
      for (std::ptrdiff_t k = 0; k < run; ++k) {
        const float gi = through_activation(act, ys[k], gs[k]);
        pa[k] += gi;
        pb[k] += gi * (xs[k] - m[k]);
      }
    } else {
      for (std::ptrdiff_t k = 0; k < run; ++k) {
        pa[k] += gs[k];
        pb[k] += gs[k] * (xs[k] - m[k]);
      }
    }
  }
}

// Rows j of pa and pb: sum over n of dy and of dy * (x - mean[j]), dy masked by the fused activation's output
// relu_y (of kind act) where given.
void group_gradient_sums(const BatchNormShape& s, const float* x, GroupPlanes dy, GroupPlanes relu_y,
                         FusedActivation act, ChannelGroup g, const float* mean, float* __restrict pa,
                         float* __restrict pb) {
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t{g.count} * s.spatial; ++i) pa[i] = 0.0f, pb[i] = 0.0f;
  if (small_planes(s)) return group_gradient_sums_small(s, x, dy, relu_y, act, g, mean, pa, pb);
  for (int n = 0; n < s.batch; ++n) {
    for (int j = 0; j < g.count; ++j) {
      const float* __restrict xs = plane(s, x, n, g.first + j);
      const float* __restrict gs = dy.at(n, j);
      float* __restrict a = pa + std::ptrdiff_t{j} * s.spatial;
      float* __restrict b = pb + std::ptrdiff_t{j} * s.spatial;
      const float m = mean[j];
      if (relu_y.base) {
        const float* __restrict ys = relu_y.at(n, j);
        for (int i = 0; i < s.spatial; ++i) {
          const float gi = through_activation(act, ys[i], gs[i]);
          a[i] += gi;
          b[i] += gi * (xs[i] - m);
        }
      } else {
        for (int i = 0; i < s.spatial; ++i) {
          a[i] += gs[i];
          b[i] += gs[i] * (xs[i] - m);
        }
      }
    }
  }
}

// The per-channel coefficients of dx = a dy + b (x - mean) + k (see batchnorm_backward).
struct DxCoefficients {
  float a = 0, b = 0, k = 0;
};

// stage_dy's blocked form with a fused pool, a block of channels at a time: the block's plane zeroed in vectors,
// then each window's masked gradient written at its winner, rather than each channel's plane unpooled apart and
// scattered along the block.
void stage_unpooled_blocked(const BatchNormShape& s, ChannelGroup g, const float* dy, Fp32Mask mask,
                            const FusedPool& pool, float* staged) {
  const int b = block_of(s);
  const int oh = pool.h / 2, ow = pool.w / 2;
  const std::ptrdiff_t out_plane = std::ptrdiff_t{oh} * ow, block_run = std::ptrdiff_t{s.spatial} * b;
  for (int n = 0; n < s.batch; ++n) {
    for (int blk = 0; blk < g.count / b; ++blk) {
      float* __restrict dst = staged + (std::ptrdiff_t{n} * g.count / b + blk) * block_run;
      std::fill(dst, dst + block_run, 0.0f);
      for (int l = 0; l < b; ++l) {
        const int c = g.first + blk * b + l;
        const PooledAt at = pooled_at(s, out_plane, n, c);
        const int32_t* const winners = pool.argmax + pooled_index(s, out_plane, n, c);
        for (std::ptrdiff_t o = 0; o < out_plane; ++o) {
          const std::ptrdiff_t k = at.offset + o * at.stride;
          const float gradient = mask.y ? through_activation(mask.act, mask.y[k], dy[k]) : dy[k];
          dst[std::ptrdiff_t{winners[o]} * b + l] = maxpool_2x2_winner_gradient(gradient, ow);
        }
      }
    }
  }
}

// The group's dy as batch norm's passes read it, staged in x's layout ([n][j][spatial] in NCHW, [n][block][spatial]
// [lane] blocked; about kGroupBytes, which the two passes after it find in L2): masked where a fused ReLU's output
// is not positive, and with a fused pool unpooled as maxpool_backward would (the pooled gradient at each window's
// winner, zero elsewhere), so the full-size gradient never crosses memory. Used with a fused pool, and for a
// blocked x, whose passes then run along the block.
GroupPlanes stage_dy(const BatchNormShape& s, ChannelGroup g, const float* dy, Fp32Mask mask,
                     const FusedPool* pool, std::vector<float>& masked, std::vector<float>& plane_buffer,
                     std::vector<float>& staged) {
  const int b = block_of(s);
  const std::ptrdiff_t image = std::ptrdiff_t{g.count} * s.spatial;
  staged.resize(static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(image));
  if (pool && b > 1) {
    stage_unpooled_blocked(s, g, dy, mask, *pool, staged.data());
    return {staged.data(), image, s.spatial};
  }
  const int oh = pool ? pool->h / 2 : 0, ow = pool ? pool->w / 2 : 0;
  const std::ptrdiff_t out_plane = pool ? std::ptrdiff_t{oh} * ow : s.spatial;
  masked.resize(static_cast<std::size_t>(out_plane));
  plane_buffer.resize(static_cast<std::size_t>(s.spatial));
  for (int n = 0; n < s.batch; ++n) {
    for (int j = 0; j < g.count; ++j) {
      const std::ptrdiff_t out = (std::ptrdiff_t{n} * s.channels + g.first + j) * out_plane;
      const float* g_in = dy + out;
      if (mask.y) {
        for (std::ptrdiff_t i = 0; i < out_plane; ++i)
          masked[i] = through_activation(mask.act, mask.y[out + i], g_in[i]);
        g_in = masked.data();
      }
      float* const plane_at = staged.data() + n * image + (std::ptrdiff_t{j} / b * b) * s.spatial + j % b;
      if (pool) {
        float* const unpooled = b == 1 ? plane_at : plane_buffer.data();  // NCHW: straight into its place
        maxpool_2x2_backward_plane(pool->h, pool->w, oh, ow, g_in, pool->argmax + out, unpooled);
        if (b == 1) continue;
        g_in = unpooled;
      }
      for (int i = 0; i < s.spatial; ++i) plane_at[std::ptrdiff_t{i} * b] = g_in[i];
    }
  }
  return {staged.data(), image, s.spatial};
}

// group_gradient_sums and group_dx for a blocked x and its staged dy, with the same per-element arithmetic.
template <int b>
void group_gradient_sums_blocked(const BatchNormShape& s, const float* x, GroupPlanes dy, ChannelGroup g,
                                 const float* mean, float* __restrict pa, float* __restrict pb) {
  const std::ptrdiff_t block_run = std::ptrdiff_t{s.spatial} * b;
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t{g.count} * s.spatial; ++i) pa[i] = 0.0f, pb[i] = 0.0f;
  for (int n = 0; n < s.batch; ++n) {
    const float* __restrict xs = x + input_offset(s, n, g.first);
    const float* __restrict gs = dy.base + n * dy.image_stride;
    for (int blk = 0; blk < g.count / b; ++blk) {
      const float* __restrict m = mean + blk * b;
      const std::ptrdiff_t base = blk * block_run;
      for (int i = 0; i < s.spatial; ++i)
        for (int l = 0; l < b; ++l) {
          const std::ptrdiff_t k = base + std::ptrdiff_t{i} * b + l;
          pa[k] += gs[k];
          pb[k] += gs[k] * (xs[k] - m[l]);
        }
    }
  }
}

template <int b>
void group_dx_blocked(const BatchNormShape& s, const float* x, GroupPlanes dy, ChannelGroup g, const float* mean,
                      const DxCoefficients* coef, float* dx) {
  const std::ptrdiff_t block_run = std::ptrdiff_t{s.spatial} * b;
  for (int n = 0; n < s.batch; ++n) {
    const float* __restrict xs = x + input_offset(s, n, g.first);
    const float* __restrict gs = dy.base + n * dy.image_stride;
    float* __restrict d = dx + input_offset(s, n, g.first);
    for (int blk = 0; blk < g.count / b; ++blk) {
      const float* __restrict m = mean + blk * b;
      float ca[b], cb[b], ck[b];  // the block's coefficients as vectors
      for (int l = 0; l < b; ++l) ca[l] = coef[blk * b + l].a, cb[l] = coef[blk * b + l].b, ck[l] = coef[blk * b + l].k;
      const std::ptrdiff_t base = blk * block_run;
      for (int i = 0; i < s.spatial; ++i)
        for (int l = 0; l < b; ++l) {
          const std::ptrdiff_t k = base + std::ptrdiff_t{i} * b + l;
          d[k] = ca[l] * gs[k] + cb[l] * (xs[k] - m[l]) + ck[l];
        }
    }
  }
}

// group_dx over small planes (small_planes), as group_gradient_sums_small walks them.
void group_dx_small(const BatchNormShape& s, const float* x, GroupPlanes dy, GroupPlanes relu_y, FusedActivation act,
                    ChannelGroup g, const float* mean, const DxCoefficients* coef, float* dx) {
  const std::ptrdiff_t run = std::ptrdiff_t{g.count} * s.spatial;
  const float* __restrict af = spread(s, g, 0, [&](int j) { return coef[j].a; });
  const float* __restrict bf = spread(s, g, 1, [&](int j) { return coef[j].b; });
  const float* __restrict kf = spread(s, g, 2, [&](int j) { return coef[j].k; });
  const float* __restrict m = spread(s, g, 3, [&](int j) { return mean[j]; });
  for (int n = 0; n < s.batch; ++n) {
    const float* __restrict xs = x + input_offset(s, n, g.first);
    const float* __restrict gs = dy.at(n, 0);
    float* __restrict d = dx + input_offset(s, n, g.first);
    if (relu_y.base) {
      const float* __restrict ys = relu_y.at(n, 0);
      for (std::ptrdiff_t k = 0; k < run; ++k)
        d[k] = af[k] * through_activation(act, ys[k], gs[k]) + bf[k] * (xs[k] - m[k]) + kf[k];
    } else {
      for (std::ptrdiff_t k = 0; k < run; ++k) d[k] = af[k] * gs[k] + bf[k] * (xs[k] - m[k]) + kf[k];
    }
  }
}

void group_dx(const BatchNormShape& s, const float* x, GroupPlanes dy, GroupPlanes relu_y, FusedActivation act,
              ChannelGroup g, const float* mean, const DxCoefficients* coef, float* dx) {
  if (small_planes(s)) return group_dx_small(s, x, dy, relu_y, act, g, mean, coef, dx);
  for (int n = 0; n < s.batch; ++n) {
    for (int j = 0; j < g.count; ++j) {
      const float* __restrict xs = plane(s, x, n, g.first + j);
      const float* __restrict gs = dy.at(n, j);
      float* __restrict d = plane(s, dx, n, g.first + j);
      const float af = coef[j].a, bf = coef[j].b, kf = coef[j].k, m = mean[j];
      if (relu_y.base) {
        const float* __restrict ys = relu_y.at(n, j);
        for (int i = 0; i < s.spatial; ++i) d[i] = af * through_activation(act, ys[i], gs[i]) + bf * (xs[i] - m) + kf;
      } else {
        for (int i = 0; i < s.spatial; ++i) d[i] = af * gs[i] + bf * (xs[i] - m) + kf;
      }
    }
  }
}

// What training forward reads and writes per channel besides the tensors.
struct TrainChannels {
  const float* gamma;
  const float* beta;
  float momentum, eps;
  float *running_mean, *running_var, *saved_mean, *saved_inv_std;
};

// A channel's batch mean (in double, and as the float the centred passes subtract) and biased variance over
// `count` values.
struct ChannelMoments {
  double mean_d;
  float mean;
  double var, count;
};

// Channel c's training statistics: what backward keeps, the running statistics' update, and the affine
// (scale, shift) the batch is normalised with.
void train_channel(const TrainChannels& t, int c, const ChannelMoments& m, float& scale, float& shift) {
  const double inv_std = 1.0 / std::sqrt(m.var + t.eps);  // biased variance: what the batch is normalised with
  t.saved_mean[c] = m.mean;
  t.saved_inv_std[c] = static_cast<float>(inv_std);
  const double unbiased = m.count > 1 ? m.var * m.count / (m.count - 1) : m.var;
  t.running_mean[c] = static_cast<float>((1.0 - t.momentum) * t.running_mean[c] + t.momentum * m.mean_d);
  t.running_var[c] = static_cast<float>((1.0 - t.momentum) * t.running_var[c] + t.momentum * unbiased);
  const double sc = t.gamma[c] * inv_std;
  scale = static_cast<float>(sc);
  shift = static_cast<float>(t.beta[c] - m.mean_d * sc);
}

void forward_train_fp32(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var, float* y,
                             float* saved_mean, float* saved_inv_std, FusedActivation act, const FusedPool* pool) {
  const double count = static_cast<double>(s.batch) * s.spatial;
  if (count <= 0) return;
  const TrainChannels train{gamma, beta, momentum, eps, running_mean, running_var, saved_mean, saved_inv_std};
  const auto size = static_cast<std::size_t>(group_size(s));
  struct Buffers {
    std::vector<float> partial, mean, scale, shift, plane_buffer;
    std::vector<double> mean_d;
  };
  const int threads = group_threads(s);
  std::vector<Buffers> buffers(static_cast<std::size_t>(threads));
  for (Buffers& b : buffers) {
    b.partial.resize(size * static_cast<std::size_t>(s.spatial));
    b.mean.resize(size), b.scale.resize(size), b.shift.resize(size), b.mean_d.resize(size);
  }
  for_each_group_on(threads, s, [&](ChannelGroup g, int t) {
    auto& [partial, mean, scale, shift, plane_buffer, mean_d] = buffers[static_cast<std::size_t>(t)];
    group_sums(s, x, g, partial.data());
    for (int j = 0; j < g.count; ++j) {
      mean_d[j] = channel_sum(s, partial.data(), j) / count;
      mean[j] = static_cast<float>(mean_d[j]);
    }
    group_centred_squares(s, x, g, mean.data(), partial.data());
    for (int j = 0; j < g.count; ++j) {
      const ChannelMoments moments{mean_d[j], mean[j], channel_sum(s, partial.data(), j) / count, count};
      train_channel(train, g.first + j, moments, scale[j], shift[j]);
    }
    affine_group(s, g, x, scale.data(), shift.data(), y, act, pool, plane_buffer);
  });
}

void forward_infer_fp32(const BatchNormShape& s, const float* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float eps, float* y,
                             FusedActivation act, const FusedPool* pool) {
  struct Buffers {
    std::vector<float> scale, shift, plane_buffer;
  };
  const int threads = group_threads(s);
  std::vector<Buffers> buffers(static_cast<std::size_t>(threads));
  for (Buffers& b : buffers) b.scale.resize(static_cast<std::size_t>(group_size(s))), b.shift.resize(b.scale.size());
  for_each_group_on(threads, s, [&](ChannelGroup g, int t) {
    auto& [scale, shift, plane_buffer] = buffers[static_cast<std::size_t>(t)];
    for (int j = 0; j < g.count; ++j) {
      const int c = g.first + j;
      const double sc = gamma[c] / std::sqrt(static_cast<double>(running_var[c]) + eps);
      scale[j] = static_cast<float>(sc);
      shift[j] = static_cast<float>(beta[c] - running_mean[c] * sc);
    }
    affine_group(s, g, x, scale.data(), shift.data(), y, act, pool, plane_buffer);
  });
}
// A group's dy as backward's passes read it: staged (stage_dy, the ReLU's mask in it already) with a fused pool or
// a blocked x, else the tensor's own planes and the fused ReLU's output as the mask.
struct GroupGradient {
  GroupPlanes dy, mask;
  FusedActivation act;
  bool blocked;
};

GroupGradient group_gradient(const BatchNormShape& s, ChannelGroup g, const float* dy, Fp32Mask mask,
                             const FusedPool* pool, BatchNormWorkspace::Staging& staging) {
  const bool blocked = block_of(s) > 1;
  if (!blocked && !pool) return {group_planes(s, dy, g), group_planes(s, mask.y, g), mask.act, false};
  auto& [masked, staged, plane_buffer] = staging;
  return {stage_dy(s, g, dy, mask, pool, masked, plane_buffer, staged), {}, mask.act, blocked};
}

// Rows j of pa and pb: sum over n of dy and of dy * (x - mean[j]), in x's layout.
void gradient_partials(const BatchNormShape& s, const float* x, const GroupGradient& grad, ChannelGroup g,
                       const float* mean, float* pa, float* pb) {
  if (grad.blocked)
    return with_block(s, [&]<int b>() { group_gradient_sums_blocked<b>(s, x, grad.dy, g, mean, pa, pb); });
  group_gradient_sums(s, x, grad.dy, grad.mask, grad.act, g, mean, pa, pb);
}

// dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)), expanded into dx = a dy + b (x - mean) + k so
// the per-element loop is a subtraction and two fused multiply-adds; x stays centred so a large mean does not
// cancel. The sums run over `count` values.
DxCoefficients dx_coefficients(float gamma, double inv_std, double sum_dy, double sum_dy_xhat, double count) {
  const double a = gamma * inv_std;
  const double b = -a * inv_std * sum_dy_xhat / count;
  const double k = -a * sum_dy / count;
  return {static_cast<float>(a), static_cast<float>(b), static_cast<float>(k)};
}

void group_dx_of(const BatchNormShape& s, const float* x, const GroupGradient& grad, ChannelGroup g,
                 const float* mean, const DxCoefficients* coef, float* dx) {
  if (grad.blocked)
    return with_block(s, [&]<int b>() { group_dx_blocked<b>(s, x, grad.dy, g, mean, coef, dx); });
  group_dx(s, x, grad.dy, grad.mask, grad.act, g, mean, coef, dx);
}

void backward_fp32(const BatchNormShape& s, const float* x, const float* dy, const float* gamma,
                   const float* saved_mean, const float* saved_inv_std, float* dx, float* dgamma, float* dbeta,
                   Fp32Mask mask, const FusedPool* pool, BatchNormWorkspace& ws) {
  const double count = static_cast<double>(s.batch) * s.spatial;
  if (count <= 0) return;
  const auto size = static_cast<std::size_t>(group_size(s));
  struct Buffers {
    std::vector<float> partial_dy, partial_dy_xc;
    std::vector<DxCoefficients> coef;
  };
  const int threads = group_threads(s);
  std::vector<Buffers> buffers(static_cast<std::size_t>(threads));
  for (Buffers& b : buffers) {
    b.partial_dy.resize(size * static_cast<std::size_t>(s.spatial)), b.partial_dy_xc.resize(b.partial_dy.size());
    b.coef.resize(size);
  }
  if (ws.threads.size() < buffers.size()) ws.threads.resize(buffers.size());
  for_each_group_on(threads, s, [&](ChannelGroup g, int t) {
    auto& [partial_dy, partial_dy_xc, coef] = buffers[static_cast<std::size_t>(t)];
    const float* mean = saved_mean + g.first;
    const GroupGradient grad = group_gradient(s, g, dy, mask, pool, ws.threads[static_cast<std::size_t>(t)]);
    gradient_partials(s, x, grad, g, mean, partial_dy.data(), partial_dy_xc.data());
    for (int j = 0; j < g.count; ++j) {
      const int c = g.first + j;
      const double inv_std = saved_inv_std[c];
      const double sum_dy = channel_sum(s, partial_dy.data(), j);
      const double sum_dy_xhat = channel_sum(s, partial_dy_xc.data(), j) * inv_std;
      dbeta[c] += static_cast<float>(sum_dy);
      dgamma[c] += static_cast<float>(sum_dy_xhat);
      coef[j] = dx_coefficients(gamma[c], inv_std, sum_dy, sum_dy_xhat, count);
    }
    group_dx_of(s, x, grad, g, mean, coef.data(), dx);
  });
}

// ---- synchronised batch norm: each pass below covers every channel before the group's sums are reduced, so the
// reduction is one call per pass from outside the threads' regions.

// sums[c] = channel c's sum of what `partials(g, t, rows)` writes into a group's rows (on thread t), for every
// channel.
// A rank may hold no samples: its sums stay zero (sums must come zeroed), as group_sums reads a first image.
template <class Partials>
void all_channel_sums(const BatchNormShape& s, int threads, Partials partials, double* sums) {
  if (s.batch == 0 || s.spatial == 0) return;
  std::vector<std::vector<float>> partial(static_cast<std::size_t>(threads));
  for (auto& p : partial) p.resize(static_cast<std::size_t>(group_size(s)) * static_cast<std::size_t>(s.spatial));
  for_each_group_on(threads, s, [&](ChannelGroup g, int t) {
    float* rows = partial[static_cast<std::size_t>(t)].data();
    partials(g, t, rows);
    for (int j = 0; j < g.count; ++j) sums[g.first + j] = channel_sum(s, rows, j);
  });
}

// The affine pass over every channel group with per-channel scale and shift.
void affine_all(const BatchNormShape& s, int threads, const float* x, const float* scale, const float* shift,
                float* y, FusedActivation act, const FusedPool* pool) {
  std::vector<std::vector<float>> plane_buffers(static_cast<std::size_t>(threads));
  for_each_group_on(threads, s, [&](ChannelGroup g, int t) {
    affine_group(s, g, x, scale + g.first, shift + g.first, y, act, pool,
                 plane_buffers[static_cast<std::size_t>(t)]);
  });
}

// Forward over the group's batch: the sums and the count reduced, then the centred squares about the group's mean
// (two passes, as unsynchronised, so a large mean does not cancel), then the affine.
void forward_train_synced_fp32(const BatchNormShape& s, const float* x, const TrainChannels& train, float* y,
                               FusedActivation act, const FusedPool* pool, const ChannelSumReduce& reduce) {
  const auto channels = static_cast<std::size_t>(s.channels);
  const int threads = group_threads(s);
  std::vector<double> sums(channels + 1), squares(channels);
  all_channel_sums(s, threads, [&](ChannelGroup g, int, float* rows) { group_sums(s, x, g, rows); }, sums.data());
  sums[channels] = static_cast<double>(s.batch) * s.spatial;  // the count: ranks' batches may differ
  reduce(sums);
  const double count = sums[channels];
  if (count <= 0) return;
  std::vector<float> mean(channels), scale(channels), shift(channels);
  for (std::size_t c = 0; c < channels; ++c) mean[c] = static_cast<float>(sums[c] / count);
  all_channel_sums(
      s, threads, [&](ChannelGroup g, int, float* rows) { group_centred_squares(s, x, g, mean.data() + g.first, rows); },
      squares.data());
  reduce(squares);
  for (std::size_t c = 0; c < channels; ++c) {
    const ChannelMoments moments{sums[c] / count, mean[c], squares[c] / count, count};
    train_channel(train, static_cast<int>(c), moments, scale[c], shift[c]);
  }
  affine_all(s, threads, x, scale.data(), shift.data(), y, act, pool);
}

// Backward over the group's batch: the sums of dy and of dy * (x - mean) over every channel (this rank's share
// into dgamma and dbeta, as the gradient all-reduce adds the ranks' up), reduced with the count, then dx from the
// group's sums. dy is staged again in the second pass: the workspace holds one group's.
// sums[c] and sums[C + c]: channel c's sums of dy and of dy * (x - mean) over this rank's batch (C channels).
void all_gradient_sums(const BatchNormShape& s, int threads, const float* x, const float* dy, Fp32Mask mask,
                       const FusedPool* pool, const float* saved_mean, BatchNormWorkspace& ws, double* sums) {
  std::vector<std::vector<float>> partial_dy_xc(static_cast<std::size_t>(threads));
  all_channel_sums(
      s, threads,
      [&](ChannelGroup g, int thread, float* rows) {
        const auto t = static_cast<std::size_t>(thread);
        auto& pb = partial_dy_xc[t];
        pb.resize(static_cast<std::size_t>(group_size(s)) * static_cast<std::size_t>(s.spatial));
        const GroupGradient grad = group_gradient(s, g, dy, mask, pool, ws.threads[t]);
        gradient_partials(s, x, grad, g, saved_mean + g.first, rows, pb.data());
        for (int j = 0; j < g.count; ++j) sums[s.channels + g.first + j] = channel_sum(s, pb.data(), j);
      },
      sums);
}

void backward_synced_fp32(const BatchNormShape& s, const float* x, const float* dy, const float* gamma,
                          const float* saved_mean, const float* saved_inv_std, float* dx, float* dgamma,
                          float* dbeta, Fp32Mask mask, const FusedPool* pool, BatchNormWorkspace& ws,
                          const ChannelSumReduce& reduce) {
  const auto channels = static_cast<std::size_t>(s.channels);
  const int threads = group_threads(s);
  if (ws.threads.size() < static_cast<std::size_t>(threads)) ws.threads.resize(static_cast<std::size_t>(threads));
  std::vector<double> sums(2 * channels + 1);  // sum dy, then sum dy * (x - mean), then the count
  all_gradient_sums(s, threads, x, dy, mask, pool, saved_mean, ws, sums.data());
  for (std::size_t c = 0; c < channels; ++c) {
    dbeta[c] += static_cast<float>(sums[c]);
    dgamma[c] += static_cast<float>(sums[channels + c] * saved_inv_std[c]);
  }
  sums[2 * channels] = static_cast<double>(s.batch) * s.spatial;
  reduce(sums);
  const double count = sums[2 * channels];
  if (count <= 0) return;
  std::vector<DxCoefficients> coef(channels);
  for (std::size_t c = 0; c < channels; ++c) {
    const double inv_std = saved_inv_std[c];
    coef[c] = dx_coefficients(gamma[c], inv_std, sums[c], sums[channels + c] * inv_std, count);
  }
  for_each_group_on(threads, s, [&](ChannelGroup g, int t) {
    const GroupGradient grad = group_gradient(s, g, dy, mask, pool, ws.threads[static_cast<std::size_t>(t)]);
    group_dx_of(s, x, grad, g, saved_mean + g.first, coef.data() + g.first, dx);
  });
}

// A channel group's share of a 16-bit tensor, staged in fp32 for the fp32 passes above: in every image, the group's
// channel planes of `plane` values are one contiguous run at (n * C + first) * plane, in NCHW and in a blocked
// layout alike (a group is whole blocks). Staged, image n's run sits at n * run(): the layout of the same tensor
// with only the group's channels, which the passes read through a shape of g.count channels.
struct GroupRuns {
  const BatchNormShape& s;
  ChannelGroup g;
  std::ptrdiff_t plane;
  std::ptrdiff_t run() const { return std::ptrdiff_t{g.count} * plane; }
  std::ptrdiff_t at(int n) const { return (std::ptrdiff_t{n} * s.channels + g.first) * plane; }
  std::size_t staged_size() const { return static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(run()); }
};

const float* stage_in(const GroupRuns& r, const void* t, std::vector<float>& staged) {
  if (!t) return nullptr;
  staged.resize(r.staged_size());
  const auto* bytes = static_cast<const std::byte*>(t);
  for (int n = 0; n < r.s.batch; ++n)
    widen({r.run(), r.s.data}, bytes + static_cast<std::ptrdiff_t>(element_bytes(r.s.data)) * r.at(n),
          staged.data() + n * r.run());
  return staged.data();
}

void stage_out(const GroupRuns& r, const float* staged, void* t) {
  auto* bytes = static_cast<std::byte*>(t);
  for (int n = 0; n < r.s.batch; ++n)
    narrow(staged + n * r.run(), {r.run(), r.s.data},
           bytes + static_cast<std::ptrdiff_t>(element_bytes(r.s.data)) * r.at(n));
}

// The pool's winners, which stay int32 and in NCHW order: copied between the tensor and a group's staged share.
int32_t* stage_winners_in(const GroupRuns& r, const int32_t* argmax, std::vector<int32_t>& staged) {
  staged.resize(r.staged_size());
  for (int n = 0; n < r.s.batch; ++n) std::copy_n(argmax + r.at(n), r.run(), staged.data() + n * r.run());
  return staged.data();
}
void stage_winners_out(const GroupRuns& r, const int32_t* staged, int32_t* argmax) {
  for (int n = 0; n < r.s.batch; ++n) std::copy_n(staged + n * r.run(), r.run(), argmax + r.at(n));
}

// The group as a tensor of its own: g.count channels, fp32.
BatchNormShape group_shape(const BatchNormShape& s, ChannelGroup g) {
  BatchNormShape sub = s;
  sub.channels = g.count;
  sub.data = ElementType::f32;
  return sub;
}

// The planes y and dy have: pooled with a fused pool.
std::ptrdiff_t output_plane(const BatchNormShape& s, const FusedPool* pool) {
  return pool ? std::ptrdiff_t{pool->h / 2} * (pool->w / 2) : s.spatial;
}

// fp32 buffers a 16-bit call stages its groups in, reused from group to group.
struct Staged {
  std::vector<float> x, y, dy, dx;
  std::vector<int32_t> winners;
};

// One channel group of a 16-bit call: the group as a tensor of its own, where its share of x-like and of y-like
// tensors lies, and the fused pool with the group's winners staged (null without a pool).
struct GroupCall {
  BatchNormShape shape;
  GroupRuns in, out;
  const FusedPool* pool;
  int first;
};
enum class Winners { read, written };

// Calls body(GroupCall, t) for each channel group, the pool's winners staged in before a pass that reads them and
// out after one that writes them; on group_threads(s) threads (t: the thread's index, for its own Staged buffers,
// staged[t]), each group one thread's, so the bits do not depend on the thread count.
template <class Body>
void for_each_staged_group(const BatchNormShape& s, const FusedPool* pool, Winners winners,
                           std::vector<Staged>& staged, Body body) {
  staged.resize(static_cast<std::size_t>(group_threads(s)));
  for_each_group_on(static_cast<int>(staged.size()), s, [&](ChannelGroup g, int t) {
    Staged& mine = staged[static_cast<std::size_t>(t)];
    const GroupRuns in{s, g, s.spatial}, out{s, g, output_plane(s, pool)};
    std::optional<FusedPool> group_pool;
    if (pool && winners == Winners::read)
      group_pool = FusedPool{pool->h, pool->w, stage_winners_in(out, pool->argmax, mine.winners), pool->stored};
    if (pool && winners == Winners::written) {
      mine.winners.resize(out.staged_size());
      group_pool = FusedPool{pool->h, pool->w, mine.winners.data(), pool->stored};
    }
    body(GroupCall{group_shape(s, g), in, out, group_pool ? &*group_pool : nullptr, g.first}, mine, t);
    if (pool && winners == Winners::written) stage_winners_out(out, mine.winners.data(), pool->argmax);
  });
}

// Blocks of 8 or 16 channels, and NHWC over 32 or 64: the blocks with_block instantiates.
bool has_block_kernels(const BatchNormShape& s, int block) {
  return block == 8 || block == 16 || (block == s.channels && (block == 32 || block == 64));
}

}  // namespace

std::size_t BatchNormWorkspace::bytes() const {
  std::size_t floats = 0;
  for (const Staging& t : threads) floats += t.masked.capacity() + t.staged.capacity() + t.plane_buffer.capacity();
  return sizeof(float) * floats;
}

bool blocked_input_fits(const BatchNormShape& s, int block) {
  constexpr std::size_t kBlockedGroupBytes = std::size_t{1} << 20, kNhwcBytes = std::size_t{4} << 20;
  if (!has_block_kernels(s, block)) return false;
  const std::size_t block_bytes = sizeof(float) * static_cast<std::size_t>(block) *
                                  static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.spatial);
  const bool nhwc = block == s.channels && block > 16;  // 8 or 16 channels: the blocked kernels' own one group
  return block_bytes <= (nhwc ? kNhwcBytes : kBlockedGroupBytes);
}

bool blocked_output_supported(const BatchNormShape& s, int block) {
  return has_block_kernels(s, block) && s.in_block == block;
}


// 16-bit tensors go through the fp32 passes a channel group at a time: the group's share of each tensor is widened
// into an fp32 buffer of about the group's size, which the passes then find in L2, and their outputs are narrowed
// back, so the 16-bit tensors cross memory once each way at half fp32's bytes, with the arithmetic of fp32 tensors
// holding the same values. The groups are shared among the compute threads as the fp32 passes share them.
void batchnorm_forward_train(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var, void* y,
                             float* saved_mean, float* saved_inv_std, FusedActivation act, const FusedPool* pool) {
  if (s.data == ElementType::f32)
    return forward_train_fp32(s, static_cast<const float*>(x), gamma, beta, momentum, eps, running_mean, running_var,
                              static_cast<float*>(y), saved_mean, saved_inv_std, act, pool);
  std::vector<Staged> staged;
  for_each_staged_group(s, pool, Winners::written, staged, [&](const GroupCall& g, Staged& mine, int) {
    const int c = g.first;
    mine.y.resize(g.out.staged_size());
    forward_train_fp32(g.shape, stage_in(g.in, x, mine.x), gamma + c, beta + c, momentum, eps, running_mean + c,
                       running_var + c, mine.y.data(), saved_mean + c, saved_inv_std + c, act, g.pool);
    stage_out(g.out, mine.y.data(), y);
  });
}

void batchnorm_forward_infer(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                             const float* running_mean, const float* running_var, float eps, void* y,
                             FusedActivation act, const FusedPool* pool) {
  if (s.data == ElementType::f32)
    return forward_infer_fp32(s, static_cast<const float*>(x), gamma, beta, running_mean, running_var, eps,
                              static_cast<float*>(y), act, pool);
  std::vector<Staged> staged;
  for_each_staged_group(s, pool, Winners::written, staged, [&](const GroupCall& g, Staged& mine, int) {
    const int c = g.first;
    mine.y.resize(g.out.staged_size());
    forward_infer_fp32(g.shape, stage_in(g.in, x, mine.x), gamma + c, beta + c, running_mean + c, running_var + c,
                       eps, mine.y.data(), act, g.pool);
    stage_out(g.out, mine.y.data(), y);
  });
}

void batchnorm_backward(const BatchNormShape& s, const void* x, const void* dy, const float* gamma,
                        const float* saved_mean, const float* saved_inv_std, void* dx, float* dgamma, float* dbeta,
                        FusedOutput fused, const FusedPool* pool, BatchNormWorkspace* workspace) {
  BatchNormWorkspace own;
  BatchNormWorkspace& ws = workspace ? *workspace : own;
  if (s.data == ElementType::f32)
    return backward_fp32(s, static_cast<const float*>(x), static_cast<const float*>(dy), gamma, saved_mean,
                         saved_inv_std, static_cast<float*>(dx), dgamma, dbeta,
                         {static_cast<const float*>(fused.y), fused.activation}, pool, ws);
  std::vector<Staged> staged;
  // Each thread's group passes stage in a workspace of their own: the caller's for the first.
  std::vector<BatchNormWorkspace> others(static_cast<std::size_t>(std::max(0, group_threads(s) - 1)));
  for_each_staged_group(s, pool, Winners::read, staged, [&](const GroupCall& g, Staged& mine, int t) {
    const int c = g.first;
    mine.dx.resize(g.in.staged_size());
    backward_fp32(g.shape, stage_in(g.in, x, mine.x), stage_in(g.out, dy, mine.dy), gamma + c, saved_mean + c,
                  saved_inv_std + c, mine.dx.data(), dgamma + c, dbeta + c,
                  {stage_in(g.out, fused.y, mine.y), fused.activation}, g.pool,
                  t == 0 ? ws : others[static_cast<std::size_t>(t - 1)]);
    stage_out(g.in, mine.dx.data(), dx);
  });
}

// Synchronised, 16-bit tensors are widened whole rather than a channel group at a time: the statistics of every
// channel are reduced before any is normalised, so a group's staged share would be needed twice.
namespace {
std::vector<float> widened(const void* t, int64_t n, ElementType type) {
  std::vector<float> out;
  if (!t) return out;
  out.resize(static_cast<std::size_t>(n));
  widen({n, type}, t, out.data());
  return out;
}
const float* data_or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }
int64_t output_elements(const BatchNormShape& s, const FusedPool* pool) {
  return int64_t{s.batch} * s.channels * output_plane(s, pool);
}
BatchNormShape as_fp32(BatchNormShape s) {
  s.data = ElementType::f32;
  return s;
}
}  // namespace

void batchnorm_forward_train_synced(const BatchNormShape& s, const void* x, const float* gamma, const float* beta,
                                    float momentum, float eps, float* running_mean, float* running_var, void* y,
                                    float* saved_mean, float* saved_inv_std, FusedActivation act,
                                    const FusedPool* pool, const ChannelSumReduce& reduce) {
  const TrainChannels train{gamma, beta, momentum, eps, running_mean, running_var, saved_mean, saved_inv_std};
  if (s.data == ElementType::f32)
    return forward_train_synced_fp32(s, static_cast<const float*>(x), train, static_cast<float*>(y), act, pool,
                                     reduce);
  const std::vector<float> x32 = widened(x, s.elements(), s.data);
  std::vector<float> y32(static_cast<std::size_t>(output_elements(s, pool)));
  forward_train_synced_fp32(as_fp32(s), x32.data(), train, y32.data(), act, pool, reduce);
  narrow(y32.data(), {output_elements(s, pool), s.data}, y);
}

void batchnorm_backward_synced(const BatchNormShape& s, const void* x, const void* dy, const float* gamma,
                               const float* saved_mean, const float* saved_inv_std, void* dx, float* dgamma,
                               float* dbeta, FusedOutput fused, const FusedPool* pool, BatchNormWorkspace* workspace,
                               const ChannelSumReduce& reduce) {
  BatchNormWorkspace own;
  BatchNormWorkspace& ws = workspace ? *workspace : own;
  if (s.data == ElementType::f32)
    return backward_synced_fp32(s, static_cast<const float*>(x), static_cast<const float*>(dy), gamma, saved_mean,
                                saved_inv_std, static_cast<float*>(dx), dgamma, dbeta,
                                {static_cast<const float*>(fused.y), fused.activation}, pool, ws, reduce);
  const int64_t out = output_elements(s, pool);
  const std::vector<float> x32 = widened(x, s.elements(), s.data), dy32 = widened(dy, out, s.data),
                           y32 = widened(fused.y, out, s.data);
  std::vector<float> dx32(static_cast<std::size_t>(s.elements()));
  backward_synced_fp32(as_fp32(s), x32.data(), dy32.data(), gamma, saved_mean, saved_inv_std, dx32.data(), dgamma,
                       dbeta, {data_or_null(y32), fused.activation}, pool, ws, reduce);
  narrow(dx32.data(), {s.elements(), s.data}, dx);
}

}  // namespace ringtrain::kernels::cpu
