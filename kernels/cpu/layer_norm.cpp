// Owns the CPU layer normalisation declared in layer_norm.h. Positions are taken in runs of neighbouring positions,
// whose sums advance channel by channel over contiguous memory: in place where a layout keeps a channel's positions
// side by side (NCHW), over a channel-major copy of the run where it keeps a position's channels side by side (NHWC,
// transposed by OpenBLAS's omatcopy). Each position still adds its channels in ascending order, so every statistic
// and output has the bits of kernels/layer_norm.h's one-position loops. Runs, and for the parameter gradients
// channels, are split among the compute threads, each thing one thread's: the same bits on any count.
#include "kernels/cpu/layer_norm.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/stored_values.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr int64_t kRunPositions = 128;  // a run's per-position sums stay in L1 (2 KB of doubles each)
// Where a position's channels lie side by side (NHWC), a run of this many positions: two AVX-512 registers of double
// sums, whose copy (C x 16 floats) stays in L1 at transformer widths.
constexpr int64_t kInterleavedPositions = 16;

// Runs of positions [first, first + count) of sample n, each one thread's.
struct PositionRun {
  int64_t n, first, count;
};

// Where a position's channels lie side by side (NHWC), every sample's positions follow the previous sample's: the
// tensor is one sample of N x HW positions, so that runs cross samples and none is cut short at a sample's end.
Planes positions_in_order(Planes p, ActivationLayout layout) {
  if (layout == ActivationLayout::nhwc) p.hw *= std::exchange(p.n, 1);
  return p;
}

// How a tensor is cut into runs of neighbouring positions: long runs within a sample where a channel's positions lie
// side by side (NCHW); short runs, across samples' boundaries, where a position's channels do (NHWC).
struct RunGrid {
  Planes p;
  PlaneStrides st;
  int64_t run_positions, runs_per_sample;

  RunGrid(const Planes& planes, ActivationLayout layout)
      : p(positions_in_order(planes, layout)),
        st(plane_strides(p, layout)),
        run_positions(st.position == 1 ? kRunPositions : kInterleavedPositions),
        runs_per_sample((p.hw + run_positions - 1) / run_positions) {}

  int64_t runs() const { return p.n * runs_per_sample; }
  PositionRun run(int64_t r) const {
    const int64_t n = r / runs_per_sample, first = r % runs_per_sample * run_positions;
    return {n, first, std::min(run_positions, p.hw - first)};
  }
  // Channel c of the run's position i (0-based in the run).
  int64_t at(const PositionRun& r, int64_t c, int64_t i) const {
    return r.n * p.c * p.hw + c * st.channel + (r.first + i) * st.position;
  }
  int64_t stat(const PositionRun& r, int64_t i) const { return r.n * p.hw + r.first + i; }
};

// A run's values of one tensor as rows of channels: position i's value in channel c at data[c * stride + i].
struct ChannelRows {
  const float* data;
  int64_t stride;
  float operator()(int64_t c, int64_t i) const { return data[c * stride + i]; }
};

// The copies channel_rows makes: each thread's own, kept from one call to the next. `widened`: a 16-bit run widened on
// its way to a copy.
struct RunScratch {
  std::vector<float> first, second, widened;
};

// Where a channel's positions lie side by side (NCHW), the run's own memory (fp32), or its rows widened into `copy`
// (16-bit); else (NHWC) the run's values copied into `copy` in that order, kInterleavedPositions to a channel (zeros
// past the run's end), a 16-bit run widened first, whole (it is contiguous). So the sums over each position's channels
// advance over contiguous memory in both layouts, each position still adding its channels in ascending order.
// omatcopy multiplies by alpha = 1 as it copies, which keeps every value the sums read: they widen each to double
// first, and that quiets a signalling NaN (and flushes a denormal under FTZ/DAZ) as the copy does.
template <class Values>
ChannelRows channel_rows(const RunGrid& g, const PositionRun& r, const typename Values::Stored* v,
                         std::vector<float>& copy, std::vector<float>& widened) {
  const auto* run = v + g.at(r, 0, 0);
  constexpr bool kFp32 = std::is_same_v<Values, Fp32Values>;
  if (g.st.position == 1) {
    if constexpr (kFp32) return {run, g.st.channel};
    copy.resize(static_cast<size_t>(g.p.c * r.count));
    for (int64_t c = 0; c < g.p.c; ++c)
      for (int64_t i = 0; i < r.count; ++i)
        copy[static_cast<size_t>(c * r.count + i)] = Values::load(run[c * g.st.channel + i]);
    return {copy.data(), r.count};
  }
  const float* values = nullptr;
  if constexpr (kFp32) {
    values = run;
  } else {
    widened.resize(static_cast<size_t>(r.count * g.p.c));
    for (size_t e = 0; e < widened.size(); ++e) widened[e] = Values::load(run[e]);
    values = widened.data();
  }
  copy.resize(static_cast<size_t>(g.p.c * kInterleavedPositions));
  if (r.count < kInterleavedPositions) std::fill(copy.begin(), copy.end(), 0.0f);  // the lanes past the run
  cblas_somatcopy(CblasRowMajor, CblasTrans, static_cast<blasint>(r.count), static_cast<blasint>(g.p.c), 1.0f,
                  values, static_cast<blasint>(g.st.position), copy.data(), kInterleavedPositions);
  return {copy.data(), kInterleavedPositions};
}

// Calls f(c, i, e) for each element e of the run, in memory order, so that element-wise loops run over contiguous
// memory in both layouts.
template <class F>
void for_each_element(const RunGrid& g, const PositionRun& r, F&& f) {
  if (g.st.position == 1) {
    for (int64_t c = 0; c < g.p.c; ++c) {
      const int64_t row = g.at(r, c, 0);
      for (int64_t i = 0; i < r.count; ++i) f(c, i, row + i);
    }
  } else {
    for (int64_t i = 0; i < r.count; ++i) {
      const int64_t row = g.at(r, 0, i);
      for (int64_t c = 0; c < g.p.c; ++c) f(c, i, row + c);
    }
  }
}

template <class Body>
void for_each_run(const RunGrid& grid, Body&& body) {
  for_each_thread_run(compute_threads(), grid.runs(), [&](int64_t begin, int64_t end, int) {
    thread_local RunScratch scratch;
    for (int64_t r = begin; r < end; ++r) body(grid.run(r), scratch);
  });
}

// Lanes: the positions the sums advance together, kInterleavedPositions over channel_rows' copy (NHWC), where a
// number the compiler knows keeps the sums in registers; 0: the run's own count (NCHW).
template <int64_t Lanes, class Values>
void forward_run(const RunGrid& g, const PositionRun& r, float epsilon, const typename Values::Stored* x,
                 const LayerNormTensors& t, typename Values::Stored* y, RunScratch& scratch) {
  const ChannelRows xs = channel_rows<Values>(g, r, x, scratch.first, scratch.widened);
  const int64_t lanes = Lanes > 0 ? Lanes : r.count;
  std::array<double, kRunPositions> sum{}, squares{};
  for (int64_t c = 0; c < g.p.c; ++c)
    for (int64_t i = 0; i < lanes; ++i) sum[i] += xs(c, i);
  for (int64_t i = 0; i < lanes; ++i) sum[i] = layer_norm_mean(sum[i], g.p.c);  // now each position's mean
  for (int64_t c = 0; c < g.p.c; ++c)
    for (int64_t i = 0; i < lanes; ++i) squares[i] = layer_norm_add_squared_deviation(squares[i], xs(c, i), sum[i]);
  std::array<LayerNormStats, kRunPositions> stats;
  for (int64_t i = 0; i < r.count; ++i) {
    stats[i] = layer_norm_stats_of(sum[i], squares[i], g.p.c, epsilon);
    t.mean[g.stat(r, i)] = stats[i].mean, t.rstd[g.stat(r, i)] = stats[i].rstd;
  }
  for_each_element(g, r, [&](int64_t c, int64_t i, int64_t e) {
    y[e] = Values::store(layer_norm_output(Values::load(x[e]), stats[i], t.gamma[c], t.beta[c]));
  });
}

template <int64_t Lanes, class Values>  // as forward_run's
void input_gradient_run(const RunGrid& g, const PositionRun& r, const typename Values::Stored* x,
                        const typename Values::Stored* dy, const LayerNormTensors& t, typename Values::Stored* dx,
                        RunScratch& scratch) {
  const ChannelRows xs = channel_rows<Values>(g, r, x, scratch.first, scratch.widened),
                    dys = channel_rows<Values>(g, r, dy, scratch.second, scratch.widened);
  const int64_t lanes = Lanes > 0 ? Lanes : r.count;
  std::array<LayerNormStats, kRunPositions> stats;  // mean 0, rstd 1 in the lanes past the run
  for (int64_t i = 0; i < r.count; ++i) stats[i] = {t.mean[g.stat(r, i)], t.rstd[g.stat(r, i)]};
  // The two sums of each position in arrays of their own, so that the additions vectorise over positions.
  std::array<double, kRunPositions> g_sums{}, g_xhat_sums{};
  for (int64_t c = 0; c < g.p.c; ++c)
    for (int64_t i = 0; i < lanes; ++i) {
      LayerNormGradientSums sums{g_sums[i], g_xhat_sums[i]};
      add_layer_norm_gradient_terms(sums, xs(c, i), dys(c, i), t.gamma[c], stats[i]);
      g_sums[i] = sums.g, g_xhat_sums[i] = sums.g_xhat;
    }
  std::array<LayerNormGradientMeans, kRunPositions> means;
  for (int64_t i = 0; i < r.count; ++i) means[i] = layer_norm_gradient_means_of({g_sums[i], g_xhat_sums[i]}, g.p.c);
  for_each_element(g, r, [&](int64_t c, int64_t i, int64_t e) {
    dx[e] = Values::store(
        layer_norm_input_gradient(Values::load(x[e]), Values::load(dy[e]), t.gamma[c], stats[i], means[i]));
  });
}

// dgamma and dbeta for channels [first, end): each channel's terms added over samples, then positions, in order;
// channel by channel where its positions lie side by side (NCHW), else position by position over the channels.
template <class Values>
void parameter_gradients(const Planes& p, PlaneStrides st, int64_t first, int64_t end,
                         const typename Values::Stored* x, const typename Values::Stored* dy,
                         const LayerNormTensors& t, float* dgamma, float* dbeta) {
  std::vector<double> gamma_sum(static_cast<size_t>(end - first)), beta_sum(gamma_sum.size());
  // Element e (channel c) of position i of sample n.
  const auto add = [&](int64_t n, int64_t i, int64_t c, int64_t e) {
    const LayerNormStats s{t.mean[n * p.hw + i], t.rstd[n * p.hw + i]};
    const float dy_e = Values::load(dy[e]);
    gamma_sum[static_cast<size_t>(c - first)] += layer_norm_gamma_gradient_term(Values::load(x[e]), dy_e, s);
    beta_sum[static_cast<size_t>(c - first)] += dy_e;
  };
  if (st.position == 1) {
    for (int64_t c = first; c < end; ++c)
      for (int64_t n = 0; n < p.n; ++n) {
        const int64_t row = n * p.c * p.hw + c * st.channel;
        for (int64_t i = 0; i < p.hw; ++i) add(n, i, c, row + i);
      }
  } else {
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t i = 0; i < p.hw; ++i) {
        const int64_t row = n * p.c * p.hw + i * st.position;
        for (int64_t c = first; c < end; ++c) add(n, i, c, row + c);
      }
  }
  for (int64_t c = first; c < end; ++c) {
    dgamma[c] += static_cast<float>(gamma_sum[static_cast<size_t>(c - first)]);
    dbeta[c] += static_cast<float>(beta_sum[static_cast<size_t>(c - first)]);
  }
}

}  // namespace

void layer_norm_forward(const Planes& p, ActivationLayout layout, float epsilon, const void* x,
                        const LayerNormTensors& t, void* y) {
  const RunGrid grid(p, layout);
  with_stored_values(p.type, [&](auto values) {
    using Values = decltype(values);
    using Stored = typename Values::Stored;
    const auto* in = static_cast<const Stored*>(x);
    auto* out = static_cast<Stored*>(y);
    for_each_run(grid, [&](const PositionRun& r, RunScratch& s) {
      if (grid.st.position == 1)
        forward_run<0, Values>(grid, r, epsilon, in, t, out, s);
      else
        forward_run<kInterleavedPositions, Values>(grid, r, epsilon, in, t, out, s);
    });
  });
}

void layer_norm_backward(const Planes& p, ActivationLayout layout, const void* x, const void* dy,
                         const LayerNormTensors& t, void* dx, float* dgamma, float* dbeta) {
  const RunGrid grid(p, layout);
  with_stored_values(p.type, [&](auto values) {
    using Values = decltype(values);
    using Stored = typename Values::Stored;
    const auto *in = static_cast<const Stored*>(x), *gradient = static_cast<const Stored*>(dy);
    if (dx)
      for_each_run(grid, [&](const PositionRun& r, RunScratch& s) {
        auto* out = static_cast<Stored*>(dx);
        if (grid.st.position == 1)
          input_gradient_run<0, Values>(grid, r, in, gradient, t, out, s);
        else
          input_gradient_run<kInterleavedPositions, Values>(grid, r, in, gradient, t, out, s);
      });
    for_each_thread_run(compute_threads(), p.c, [&](int64_t first, int64_t end, int) {
      parameter_gradients<Values>(grid.p, grid.st, first, end, in, gradient, t, dgamma, dbeta);
    });
  });
}

}  // namespace ringtrain::kernels::cpu
