// Owns the layer tests' reference arithmetic: each layer kind's forward and backward written as direct loops in
// double on the host, the definition every backend is checked against (NCHW, weights K x C/G x R x S with filter k
// reading the input channels of group k / (K/G) only, W of dense stored out x in, average pooling counting padding,
// unbiased running variance, a squeeze-and-excitation's 1x1 products as dense products of the channel means, layer
// normalisation over each position's channels with the biased variance, attention's projections as 1x1 convolutions
// over the tokens, tokens N x D x T x 1 with token t's feature d at d * T + t and the token tables token-major,
// t * D + d).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/op_shapes.h"

namespace ringtrain::layer_test {

using Values = std::vector<double>;

inline Values to_double(const std::vector<float>& v) { return Values(v.begin(), v.end()); }

struct ConvReference {
  kernels::Conv2dShape s;
  size_t x_at(int n, int c, int h, int w) const { return ((size_t(n) * s.in_channels + c) * s.in_h + h) * s.in_w + w; }
  size_t y_at(int n, int k, int h, int w) const { return ((size_t(n) * s.filters + k) * s.out_h() + h) * s.out_w() + w; }
  int per_group() const { return s.in_channels / s.groups; }  // the input channels one filter reads
  // c is an input channel of filter k's group: the weight's own channel index is c's place within that group.
  size_t w_at(int k, int c, int r, int q) const {
    return ((size_t(k) * per_group() + c % per_group()) * s.kernel_h + r) * s.kernel_w + q;
  }
  // Calls f(n, k, oh, ow, c, r, q, ih, iw) for every term whose input position lies inside the image, c running over
  // the input channels of filter k's group.
  template <class F>
  void for_each_term(F f) const {
    const int filters_per_group = s.filters / s.groups;
    for (int n = 0; n < s.batch; ++n)
      for (int k = 0; k < s.filters; ++k)
        for (int oh = 0; oh < s.out_h(); ++oh)
          for (int ow = 0; ow < s.out_w(); ++ow)
            for (int c = k / filters_per_group * per_group(); c < (k / filters_per_group + 1) * per_group(); ++c)
              for (int r = 0; r < s.kernel_h; ++r)
                for (int q = 0; q < s.kernel_w; ++q) {
                  const int ih = oh * s.stride + r - s.padding, iw = ow * s.stride + q - s.padding;
                  if (ih >= 0 && ih < s.in_h && iw >= 0 && iw < s.in_w) f(n, k, oh, ow, c, r, q, ih, iw);
                }
  }
  Values forward(const Values& x, const Values& w, const Values* bias) const {
    Values y(size_t(s.batch) * s.filters * s.out_h() * s.out_w());
    for_each_term([&](int n, int k, int oh, int ow, int c, int r, int q, int ih, int iw) {
      y[y_at(n, k, oh, ow)] += x[x_at(n, c, ih, iw)] * w[w_at(k, c, r, q)];
    });
    if (bias)
      for (int n = 0; n < s.batch; ++n)
        for (int k = 0; k < s.filters; ++k)
          for (int i = 0; i < s.out_h() * s.out_w(); ++i) y[y_at(n, k, 0, 0) + size_t(i)] += (*bias)[size_t(k)];
    return y;
  }
  Values backward_data(const Values& dy, const Values& w) const {
    Values dx(size_t(s.batch) * s.in_channels * s.in_h * s.in_w);
    for_each_term([&](int n, int k, int oh, int ow, int c, int r, int q, int ih, int iw) {
      dx[x_at(n, c, ih, iw)] += dy[y_at(n, k, oh, ow)] * w[w_at(k, c, r, q)];
    });
    return dx;
  }
  void backward_filter(const Values& x, const Values& dy, Values& dw, Values* dbias) const {
    for_each_term([&](int n, int k, int oh, int ow, int c, int r, int q, int ih, int iw) {
      dw[w_at(k, c, r, q)] += dy[y_at(n, k, oh, ow)] * x[x_at(n, c, ih, iw)];
    });
    if (dbias)
      for (int n = 0; n < s.batch; ++n)
        for (int k = 0; k < s.filters; ++k)
          for (int i = 0; i < s.out_h() * s.out_w(); ++i) (*dbias)[size_t(k)] += dy[y_at(n, k, 0, 0) + size_t(i)];
  }
};

struct DenseReference {
  int batch, in, out;
  Values forward(const Values& x, const Values& w, const Values* bias) const {
    Values y(size_t(batch) * out);
    for (int b = 0; b < batch; ++b)
      for (int o = 0; o < out; ++o) {
        double acc = bias ? (*bias)[size_t(o)] : 0.0;
        for (int i = 0; i < in; ++i) acc += x[size_t(b) * in + i] * w[size_t(o) * in + i];
        y[size_t(b) * out + o] = acc;
      }
    return y;
  }
  Values backward_data(const Values& dy, const Values& w) const {
    Values dx(size_t(batch) * in);
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < in; ++i)
        for (int o = 0; o < out; ++o) dx[size_t(b) * in + i] += dy[size_t(b) * out + o] * w[size_t(o) * in + i];
    return dx;
  }
  void backward_params(const Values& x, const Values& dy, Values& dw, Values* dbias) const {
    for (int b = 0; b < batch; ++b)
      for (int o = 0; o < out; ++o) {
        for (int i = 0; i < in; ++i) dw[size_t(o) * in + i] += dy[size_t(b) * out + o] * x[size_t(b) * in + i];
        if (dbias) (*dbias)[size_t(o)] += dy[size_t(b) * out + o];
      }
  }
};

struct BatchNormReference {
  kernels::BatchNormShape s;
  double momentum, epsilon;
  size_t at(int n, int c, int i) const { return (size_t(n) * s.channels + c) * s.spatial + i; }
  double count() const { return double(s.batch) * s.spatial; }
  template <class F>
  double channel_sum(int c, F f) const {
    double acc = 0;
    for (int n = 0; n < s.batch; ++n)
      for (int i = 0; i < s.spatial; ++i) acc += f(at(n, c, i));
    return acc;
  }
  // Training forward: y, and the running statistics updated in place.
  Values forward_train(const Values& x, const Values& gamma, const Values& beta, Values& running_mean,
                       Values& running_var) const {
    Values y(x.size());
    for (int c = 0; c < s.channels; ++c) {
      const double mean = channel_sum(c, [&](size_t j) { return x[j]; }) / count();
      const double var = channel_sum(c, [&](size_t j) { return (x[j] - mean) * (x[j] - mean); }) / count();
      const double inv_std = 1.0 / std::sqrt(var + epsilon);
      for (int n = 0; n < s.batch; ++n)
        for (int i = 0; i < s.spatial; ++i)
          y[at(n, c, i)] = gamma[size_t(c)] * (x[at(n, c, i)] - mean) * inv_std + beta[size_t(c)];
      running_mean[size_t(c)] = (1 - momentum) * running_mean[size_t(c)] + momentum * mean;
      running_var[size_t(c)] = (1 - momentum) * running_var[size_t(c)] + momentum * var * count() / (count() - 1);
    }
    return y;
  }
  Values forward_infer(const Values& x, const Values& gamma, const Values& beta, const Values& running_mean,
                       const Values& running_var) const {
    Values y(x.size());
    for (int c = 0; c < s.channels; ++c)
      for (int n = 0; n < s.batch; ++n)
        for (int i = 0; i < s.spatial; ++i)
          y[at(n, c, i)] = gamma[size_t(c)] * (x[at(n, c, i)] - running_mean[size_t(c)]) /
                               std::sqrt(running_var[size_t(c)] + epsilon) +
                           beta[size_t(c)];
    return y;
  }
  // dx from batch statistics; dgamma and dbeta accumulate.
  Values backward(const Values& x, const Values& dy, const Values& gamma, Values& dgamma, Values& dbeta) const {
    Values dx(x.size());
    for (int c = 0; c < s.channels; ++c) {
      const double mean = channel_sum(c, [&](size_t j) { return x[j]; }) / count();
      const double var = channel_sum(c, [&](size_t j) { return (x[j] - mean) * (x[j] - mean); }) / count();
      const double inv_std = 1.0 / std::sqrt(var + epsilon);
      const double sum_dy = channel_sum(c, [&](size_t j) { return dy[j]; });
      const double sum_dy_xhat = channel_sum(c, [&](size_t j) { return dy[j] * (x[j] - mean) * inv_std; });
      dgamma[size_t(c)] += sum_dy_xhat;
      dbeta[size_t(c)] += sum_dy;
      for (int n = 0; n < s.batch; ++n)
        for (int i = 0; i < s.spatial; ++i) {
          const size_t j = at(n, c, i);
          const double xhat = (x[j] - mean) * inv_std;
          dx[j] = gamma[size_t(c)] * inv_std * (dy[j] - sum_dy / count() - xhat * sum_dy_xhat / count());
        }
    }
    return dx;
  }
};

struct PoolReference {
  kernels::PoolShape s;
  bool max;
  size_t x_at(int p, int h, int w) const { return (size_t(p) * s.in_h + h) * s.in_w + w; }
  size_t y_at(int p, int h, int w) const { return (size_t(p) * s.out_h() + h) * s.out_w() + w; }
  // Calls f(plane, oh, ow, ih, iw) for every input inside each output's window, in scan order.
  template <class F>
  void for_each_tap(F f) const {
    for (int p = 0; p < s.batch * s.channels; ++p)
      for (int oh = 0; oh < s.out_h(); ++oh)
        for (int ow = 0; ow < s.out_w(); ++ow)
          for (int r = 0; r < s.window; ++r)
            for (int q = 0; q < s.window; ++q) {
              const int ih = oh * s.stride + r - s.padding, iw = ow * s.stride + q - s.padding;
              if (ih >= 0 && ih < s.in_h && iw >= 0 && iw < s.in_w) f(p, oh, ow, ih, iw);
            }
  }
  Values forward(const Values& x) const {
    Values y(size_t(s.batch) * s.channels * s.out_h() * s.out_w(), max ? -std::numeric_limits<double>::infinity() : 0.0);
    for_each_tap([&](int p, int oh, int ow, int ih, int iw) {
      double& out = y[y_at(p, oh, ow)];
      out = max ? std::max(out, x[x_at(p, ih, iw)]) : out + x[x_at(p, ih, iw)] / (s.window * s.window);
    });
    return y;
  }
  // Max: each output's gradient goes to its window's largest input (inputs are distinct, so it is unique).
  Values backward(const Values& x, const Values& dy) const {
    const Values y = forward(x);
    Values dx(x.size());
    for_each_tap([&](int p, int oh, int ow, int ih, int iw) {
      const double g = dy[y_at(p, oh, ow)];
      if (!max)
        dx[x_at(p, ih, iw)] += g / (s.window * s.window);
      else if (x[x_at(p, ih, iw)] == y[y_at(p, oh, ow)])
        dx[x_at(p, ih, iw)] += g;
    });
    return dx;
  }
};

// A function and its derivative, in double.
struct ScalarFunction {
  std::function<double(double)> value, slope;
};

// Squeeze and excitation over N x C x HW (NCHW): m = the plane means, h = act(W1 m + b1) (W1: S x C),
// g = gate(W2 h + b2) (W2: C x S), y = x * g per plane. Parameters in the layer's order: W1, b1, W2, b2.
struct SqueezeExcitationReference {
  int batch, channels, plane, squeeze;
  ScalarFunction act, gate;

  struct Forward {
    Values mean, hidden_in, hidden, gate_in, gate, y;
  };
  DenseReference fc1() const { return {batch, channels, squeeze}; }
  DenseReference fc2() const { return {batch, squeeze, channels}; }
  static Values map(const Values& v, const std::function<double(double)>& f) {
    Values out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = f(v[i]);
    return out;
  }
  Forward run(const Values& x, const std::vector<Values>& p) const {
    Forward f;
    f.mean.assign(size_t(batch) * channels, 0.0);
    for (size_t nc = 0; nc < f.mean.size(); ++nc) {
      for (int i = 0; i < plane; ++i) f.mean[nc] += x[nc * size_t(plane) + size_t(i)];
      f.mean[nc] /= plane;
    }
    f.hidden_in = fc1().forward(f.mean, p[0], &p[1]);
    f.hidden = map(f.hidden_in, act.value);
    f.gate_in = fc2().forward(f.hidden, p[2], &p[3]);
    f.gate = map(f.gate_in, gate.value);
    f.y.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) f.y[i] = x[i] * f.gate[i / size_t(plane)];
    return f;
  }
  Values forward(const Values& x, const std::vector<Values>& p) const { return run(x, p).y; }
  // Adds the parameter gradients to g; returns the input gradient.
  Values backward(const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) const {
    const Forward f = run(x, p);
    Values d_gate_in(f.gate.size(), 0.0);
    for (size_t i = 0; i < x.size(); ++i) d_gate_in[i / size_t(plane)] += dy[i] * x[i];
    for (size_t nc = 0; nc < d_gate_in.size(); ++nc) d_gate_in[nc] *= gate.slope(f.gate_in[nc]);
    fc2().backward_params(f.hidden, d_gate_in, g[2], &g[3]);
    Values d_hidden_in = fc2().backward_data(d_gate_in, p[2]);
    for (size_t i = 0; i < d_hidden_in.size(); ++i) d_hidden_in[i] *= act.slope(f.hidden_in[i]);
    fc1().backward_params(f.mean, d_hidden_in, g[0], &g[1]);
    const Values d_mean = fc1().backward_data(d_hidden_in, p[0]);
    Values dx(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t nc = i / size_t(plane);
      dx[i] = dy[i] * f.gate[nc] + d_mean[nc] / plane;
    }
    return dx;
  }
};

// Multi-head self-attention over N x D x T tokens (NCHW: feature d of token t at d x T + t), as
// torch.nn.MultiheadAttention: qkv = the 1x1 in-projection (3D x D, bias), per head h of width e = D / heads
// P = softmax over keys of Q K^T / sqrt(e) (Q, K, V: channels h e.. of qkv's three thirds), the head's output
// channels P V, then the 1x1 out-projection (D x D, bias). Parameters in the layer's order: W_in, b_in, W_out, b_out.
struct MultiHeadAttentionReference {
  int batch, width, tokens, heads;

  struct Forward {
    Values qkv, p, heads_out, y;  // p: N x heads x T x T
  };
  ConvReference projection(int outputs) const { return {{batch, width, tokens, 1, outputs, 1, 1, 1, 0}}; }
  int head_dim() const { return width / heads; }
  // qkv's value of part (0 Q, 1 K, 2 V), head h, feature e and token t of sample n.
  size_t qkv_at(int n, int part, int h, int e, int t) const {
    return (size_t(n) * 3 * width + size_t(part) * width + size_t(h) * head_dim() + e) * tokens + t;
  }
  size_t heads_at(int n, int h, int e, int t) const { return (size_t(n) * width + size_t(h) * head_dim() + e) * tokens + t; }
  size_t p_at(int n, int h, int i, int j) const { return ((size_t(n) * heads + h) * tokens + i) * tokens + j; }
  double scale() const { return 1 / std::sqrt(double(head_dim())); }

  Forward run(const Values& x, const std::vector<Values>& p) const {
    Forward f;
    f.qkv = projection(3 * width).forward(x, p[0], &p[1]);
    f.p.assign(size_t(batch) * heads * tokens * tokens, 0.0);
    f.heads_out.assign(size_t(batch) * width * tokens, 0.0);
    for (int n = 0; n < batch; ++n)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < tokens; ++i) {
          double peak = -std::numeric_limits<double>::infinity(), sum = 0;
          for (int j = 0; j < tokens; ++j) {
            double score = 0;
            for (int e = 0; e < head_dim(); ++e) score += f.qkv[qkv_at(n, 0, h, e, i)] * f.qkv[qkv_at(n, 1, h, e, j)];
            f.p[p_at(n, h, i, j)] = score * scale();
            peak = std::max(peak, score * scale());
          }
          for (int j = 0; j < tokens; ++j) sum += f.p[p_at(n, h, i, j)] = std::exp(f.p[p_at(n, h, i, j)] - peak);
          for (int j = 0; j < tokens; ++j) f.p[p_at(n, h, i, j)] /= sum;
          for (int e = 0; e < head_dim(); ++e)
            for (int j = 0; j < tokens; ++j)
              f.heads_out[heads_at(n, h, e, i)] += f.p[p_at(n, h, i, j)] * f.qkv[qkv_at(n, 2, h, e, j)];
        }
    f.y = projection(width).forward(f.heads_out, p[2], &p[3]);
    return f;
  }
  Values forward(const Values& x, const std::vector<Values>& p) const { return run(x, p).y; }
  // Adds the parameter gradients to g; returns the input gradient.
  Values backward(const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) const {
    const Forward f = run(x, p);
    projection(width).backward_filter(f.heads_out, dy, g[2], &g[3]);
    const Values d_heads = projection(width).backward_data(dy, p[2]);
    Values d_qkv(f.qkv.size(), 0.0);
    for (int n = 0; n < batch; ++n)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < tokens; ++i) {
          Values dp(size_t(tokens), 0.0);
          double dot = 0;
          for (int j = 0; j < tokens; ++j) {
            for (int e = 0; e < head_dim(); ++e) {
              dp[size_t(j)] += d_heads[heads_at(n, h, e, i)] * f.qkv[qkv_at(n, 2, h, e, j)];
              d_qkv[qkv_at(n, 2, h, e, j)] += f.p[p_at(n, h, i, j)] * d_heads[heads_at(n, h, e, i)];
            }
            dot += f.p[p_at(n, h, i, j)] * dp[size_t(j)];
          }
          for (int j = 0; j < tokens; ++j) {
            const double d_score = f.p[p_at(n, h, i, j)] * (dp[size_t(j)] - dot) * scale();
            for (int e = 0; e < head_dim(); ++e) {
              d_qkv[qkv_at(n, 0, h, e, i)] += d_score * f.qkv[qkv_at(n, 1, h, e, j)];
              d_qkv[qkv_at(n, 1, h, e, j)] += d_score * f.qkv[qkv_at(n, 0, h, e, i)];
            }
          }
        }
    projection(3 * width).backward_filter(x, d_qkv, g[0], &g[1]);
    return projection(3 * width).backward_data(d_qkv, p[0]);
  }
};

// Layer normalisation over N x C x HW (NCHW): per (sample, position), xhat = (x - mean) / sqrt(var + epsilon) over
// the C values, var biased; y = gamma[c] * xhat + beta[c]. Parameters in the layer's order: gamma, beta.
struct LayerNormReference {
  int batch, channels, plane;
  double epsilon;
  size_t at(int n, int c, int i) const { return (size_t(n) * channels + c) * plane + i; }
  struct Position {
    double mean, inv_std;
  };
  Position stats(const Values& x, int n, int i) const {
    double mean = 0, var = 0;
    for (int c = 0; c < channels; ++c) mean += x[at(n, c, i)];
    mean /= channels;
    for (int c = 0; c < channels; ++c) var += (x[at(n, c, i)] - mean) * (x[at(n, c, i)] - mean);
    return {mean, 1.0 / std::sqrt(var / channels + epsilon)};
  }
  Values forward(const Values& x, const std::vector<Values>& p) const {
    Values y(x.size());
    for (int n = 0; n < batch; ++n)
      for (int i = 0; i < plane; ++i) {
        const Position s = stats(x, n, i);
        for (int c = 0; c < channels; ++c)
          y[at(n, c, i)] = p[0][size_t(c)] * (x[at(n, c, i)] - s.mean) * s.inv_std + p[1][size_t(c)];
      }
    return y;
  }
  // Adds the parameter gradients to g; returns the input gradient.
  Values backward(const Values& x, const Values& dy, const std::vector<Values>& p, std::vector<Values>& g) const {
    Values dx(x.size());
    for (int n = 0; n < batch; ++n)
      for (int i = 0; i < plane; ++i) {
        const Position s = stats(x, n, i);
        double sum_g = 0, sum_g_xhat = 0;
        for (int c = 0; c < channels; ++c) {
          const double xhat = (x[at(n, c, i)] - s.mean) * s.inv_std, d = dy[at(n, c, i)];
          g[0][size_t(c)] += d * xhat;
          g[1][size_t(c)] += d;
          sum_g += p[0][size_t(c)] * d;
          sum_g_xhat += p[0][size_t(c)] * d * xhat;
        }
        for (int c = 0; c < channels; ++c) {
          const double xhat = (x[at(n, c, i)] - s.mean) * s.inv_std;
          dx[at(n, c, i)] =
              s.inv_std * (p[0][size_t(c)] * dy[at(n, c, i)] - sum_g / channels - xhat * sum_g_xhat / channels);
        }
      }
    return dx;
  }
};
// The ViT token layers on N x D x T x 1 tokens (NCHW: sample n's token t, feature d at (n * D + d) * T + t), each
// layer's one parameter (the class token's D values, the position table's T x D, token-major) in p[0].
struct TokenReference {
  int batch, features, tokens;  // of the input
  size_t at(int n, int d, int t, int per_sample_tokens) const {
    return (size_t(n) * features + d) * per_sample_tokens + t;
  }
  // class_token: the parameter as token 0, the input's tokens after it.
  Values class_token_forward(const Values& x, const std::vector<Values>& p) const {
    Values y(size_t(batch) * features * (tokens + 1));
    for (int n = 0; n < batch; ++n)
      for (int d = 0; d < features; ++d) {
        y[at(n, d, 0, tokens + 1)] = p[0][d];
        for (int t = 0; t < tokens; ++t) y[at(n, d, t + 1, tokens + 1)] = x[at(n, d, t, tokens)];
      }
    return y;
  }
  Values class_token_backward(const Values& dy, std::vector<Values>& g) const {
    Values dx(size_t(batch) * features * tokens);
    for (int n = 0; n < batch; ++n)
      for (int d = 0; d < features; ++d) {
        g[0][d] += dy[at(n, d, 0, tokens + 1)];
        for (int t = 0; t < tokens; ++t) dx[at(n, d, t, tokens)] = dy[at(n, d, t + 1, tokens + 1)];
      }
    return dx;
  }
  // position_embedding: y = x + table[t * D + d].
  Values position_embedding_forward(const Values& x, const std::vector<Values>& p) const {
    Values y(x.size());
    for (int n = 0; n < batch; ++n)
      for (int d = 0; d < features; ++d)
        for (int t = 0; t < tokens; ++t)
          y[at(n, d, t, tokens)] = x[at(n, d, t, tokens)] + p[0][size_t(t) * features + d];
    return y;
  }
  Values position_embedding_backward(const Values& dy, std::vector<Values>& g) const {
    for (int n = 0; n < batch; ++n)
      for (int d = 0; d < features; ++d)
        for (int t = 0; t < tokens; ++t) g[0][size_t(t) * features + d] += dy[at(n, d, t, tokens)];
    return dy;
  }
  // class_token_output: token 0 alone, N x D x 1 x 1.
  Values class_token_output_forward(const Values& x) const {
    Values y(size_t(batch) * features);
    for (int n = 0; n < batch; ++n)
      for (int d = 0; d < features; ++d) y[size_t(n) * features + d] = x[at(n, d, 0, tokens)];
    return y;
  }
  Values class_token_output_backward(const Values& dy) const {
    Values dx(size_t(batch) * features * tokens, 0.0);
    for (int n = 0; n < batch; ++n)
      for (int d = 0; d < features; ++d) dx[at(n, d, 0, tokens)] = dy[size_t(n) * features + d];
    return dx;
  }
};

}  // namespace ringtrain::layer_test
