// Owns the CPU layer normalisation declared in layer_norm.h. Positions are taken in runs of one sample's
// neighbouring positions: where a layout keeps a channel's positions side by side (NCHW), a run's sums advance
// channel by channel over contiguous memory, each position still adding its channels in ascending order, so every
// statistic and output has the bits of kernels/layer_norm.h's one-position loops. Runs, and for the parameter
// gradients channels, are split among the compute threads, each thing one thread's: the same bits on any count.
#include "kernels/cpu/layer_norm.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr int64_t kRunPositions = 128;  // a run's per-position sums stay in L1 (2 KB of doubles each)
// Where a position's channels lie side by side (NHWC), a run of this many positions still gives each of its sums a
// chain of its own to advance, so that the chains' additions overlap instead of waiting on one another.
constexpr int64_t kInterleavedPositions = 16;

// Runs of positions [first, first + count) of sample n, each one thread's.
struct PositionRun {
  int64_t n, first, count;
};

// How a tensor is cut into runs of one sample's neighbouring positions: long ones where a channel's positions lie side
// by side (NCHW), short ones where a position's channels do (NHWC).
struct RunGrid {
  Planes p;
  PlaneStrides st;
  int64_t run_positions, runs_per_sample;

  RunGrid(const Planes& planes, ActivationLayout layout)
      : p(planes),
        st(plane_strides(planes, layout)),
        run_positions(st.position == 1 ? kRunPositions : kInterleavedPositions),
        runs_per_sample((planes.hw + run_positions - 1) / run_positions) {}

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

template <class Body>
void for_each_run(const RunGrid& grid, Body&& body) {
  for_each_thread_run(compute_threads(), grid.runs(), [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) body(grid.run(r));
  });
}

void forward_run(const RunGrid& g, const PositionRun& r, float epsilon, const float* x, const LayerNormTensors& t,
                 float* y) {
  std::array<double, kRunPositions> sum{}, squares{};
  for (int64_t c = 0; c < g.p.c; ++c)
    for (int64_t i = 0; i < r.count; ++i) sum[i] += x[g.at(r, c, i)];
  for (int64_t i = 0; i < r.count; ++i) sum[i] = layer_norm_mean(sum[i], g.p.c);  // now each position's mean
  for (int64_t c = 0; c < g.p.c; ++c)
    for (int64_t i = 0; i < r.count; ++i) squares[i] += layer_norm_squared_deviation(x[g.at(r, c, i)], sum[i]);
  std::array<LayerNormStats, kRunPositions> stats;
  for (int64_t i = 0; i < r.count; ++i) {
    stats[i] = layer_norm_stats_of(sum[i], squares[i], g.p.c, epsilon);
    t.mean[g.stat(r, i)] = stats[i].mean, t.rstd[g.stat(r, i)] = stats[i].rstd;
  }
  for (int64_t c = 0; c < g.p.c; ++c)
    for (int64_t i = 0; i < r.count; ++i) {
      const int64_t e = g.at(r, c, i);
      y[e] = layer_norm_output(x[e], stats[i], t.gamma[c], t.beta[c]);
    }
}

void input_gradient_run(const RunGrid& g, const PositionRun& r, const float* x, const float* dy,
                        const LayerNormTensors& t, float* dx) {
  std::array<LayerNormStats, kRunPositions> stats;
  std::array<LayerNormGradientSums, kRunPositions> sums{};
  for (int64_t i = 0; i < r.count; ++i) stats[i] = {t.mean[g.stat(r, i)], t.rstd[g.stat(r, i)]};
  for (int64_t c = 0; c < g.p.c; ++c)
    for (int64_t i = 0; i < r.count; ++i) {
      const int64_t e = g.at(r, c, i);
      add_layer_norm_gradient_terms(sums[i], x[e], dy[e], t.gamma[c], stats[i]);
    }
  std::array<LayerNormGradientMeans, kRunPositions> means;
  for (int64_t i = 0; i < r.count; ++i) means[i] = layer_norm_gradient_means_of(sums[i], g.p.c);
  for (int64_t c = 0; c < g.p.c; ++c)
    for (int64_t i = 0; i < r.count; ++i) {
      const int64_t e = g.at(r, c, i);
      dx[e] = layer_norm_input_gradient(x[e], dy[e], t.gamma[c], stats[i], means[i]);
    }
}

// dgamma and dbeta for channels [first, end): each channel's terms added over samples, then positions, in order;
// channel by channel where its positions lie side by side (NCHW), else position by position over the channels.
void parameter_gradients(const Planes& p, PlaneStrides st, int64_t first, int64_t end, const float* x,
                         const float* dy, const LayerNormTensors& t, float* dgamma, float* dbeta) {
  std::vector<double> gamma_sum(static_cast<size_t>(end - first)), beta_sum(gamma_sum.size());
  const auto add = [&](int64_t n, int64_t i, int64_t c) {
    const LayerNormStats s{t.mean[n * p.hw + i], t.rstd[n * p.hw + i]};
    const int64_t e = n * p.c * p.hw + c * st.channel + i * st.position;
    gamma_sum[static_cast<size_t>(c - first)] += layer_norm_gamma_gradient_term(x[e], dy[e], s);
    beta_sum[static_cast<size_t>(c - first)] += dy[e];
  };
  if (st.position == 1) {
    for (int64_t c = first; c < end; ++c)
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t i = 0; i < p.hw; ++i) add(n, i, c);
  } else {
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t i = 0; i < p.hw; ++i)
        for (int64_t c = first; c < end; ++c) add(n, i, c);
  }
  for (int64_t c = first; c < end; ++c) {
    dgamma[c] += static_cast<float>(gamma_sum[static_cast<size_t>(c - first)]);
    dbeta[c] += static_cast<float>(beta_sum[static_cast<size_t>(c - first)]);
  }
}

}  // namespace

void layer_norm_forward(const Planes& p, ActivationLayout layout, float epsilon, const float* x,
                        const LayerNormTensors& t, float* y) {
  const RunGrid grid(p, layout);
  for_each_run(grid, [&](const PositionRun& r) { forward_run(grid, r, epsilon, x, t, y); });
}

void layer_norm_backward(const Planes& p, ActivationLayout layout, const float* x, const float* dy,
                         const LayerNormTensors& t, float* dx, float* dgamma, float* dbeta) {
  const RunGrid grid(p, layout);
  if (dx) for_each_run(grid, [&](const PositionRun& r) { input_gradient_run(grid, r, x, dy, t, dx); });
  for_each_thread_run(compute_threads(), p.c, [&](int64_t first, int64_t end, int) {
    parameter_gradients(p, grid.st, first, end, x, dy, t, dgamma, dbeta);
  });
}

}  // namespace ringtrain::kernels::cpu
