// Tests for kernels/cpu/dnnl_ops: which convolutions it takes, that its convolutions and dense products agree
// with the im2col + BLAS kernels (themselves tested against loops and finite differences), that gradients
// accumulate, and that a second run on the same thread count gives the same bits; in bf16 (on CPUs with
// AVX512_BF16), that results stay within bf16 rounding of fp32's and repeat bit for bit too.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <thread>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/stored_elementwise.h"
#include "kernels/cpu/pooling.h"
#include "tests/kernels/grad_check.h"

namespace ringtrain::kernels::cpu {
namespace {

using testing::random_vector;

std::size_t x_size(const Conv2dShape& s) { return std::size_t(s.batch) * s.in_channels * s.in_h * s.in_w; }
std::size_t w_size(const Conv2dShape& s) { return static_cast<std::size_t>(s.weight_elements()); }
std::size_t y_size(const Conv2dShape& s) { return std::size_t(s.batch) * s.filters * s.out_h() * s.out_w(); }

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol) {
  ASSERT_EQ(got.size(), want.size());
  double peak = 0;
  for (float v : want) peak = std::max(peak, double(std::abs(v)));
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rtol * (peak + std::abs(want[i]))) << "at " << i;
}

// GELU, SiLU and the sigmoid on oneDNN's eltwise kernels against elementwise.cpp's loops of kernels/activation.h's
// formulas, forward and backward (its derivative at x), in place too; a NaN passes through as through the loops.
TEST(DnnlOps, SmoothActivationsFollowTheLoops) {
  DnnlOps ops(2);
  const int64_t n = 4099;
  const Elements values{n, ElementType::f32};
  const auto x = random_vector(static_cast<std::size_t>(n), 71, -6.0f, 6.0f);
  const auto dy = random_vector(static_cast<std::size_t>(n), 72);
  for (Activation a : {Activation::gelu, Activation::silu, Activation::sigmoid}) {
    SCOPED_TRACE(static_cast<int>(a));
    ASSERT_TRUE(ops.runs_activation(a, values));
    std::vector<float> y(x.size()), want_y(x.size()), dx(x.size()), want_dx(x.size());
    ops.activation_forward(a, values, x.data(), y.data());
    activation_forward(a, n, x.data(), want_y.data());
    expect_close(y, want_y, 1e-6);
    ops.activation_backward(a, values, x.data(), dy.data(), dx.data());
    activation_backward(a, n, x.data(), dy.data(), want_dx.data());
    expect_close(dx, want_dx, 1e-6);
    std::vector<float> in_place = x;
    ops.activation_forward(a, values, in_place.data(), in_place.data());
    EXPECT_EQ(in_place, y);
    std::vector<float> nan(3, std::numeric_limits<float>::quiet_NaN()), out(3);
    ops.activation_forward(a, {3, ElementType::f32}, nan.data(), out.data());
    EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[2]));
  }
  EXPECT_FALSE(ops.runs_activation(Activation::relu6, values));
  EXPECT_FALSE(ops.runs_activation(Activation::gelu, {n, ElementType::f16}));
}

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> y(x.size());
  narrow(x.data(), {static_cast<int64_t>(x.size()), ElementType::bf16}, y.data());
  return y;
}
std::vector<float> from_bf16(const std::vector<uint16_t>& x) {
  std::vector<float> y(x.size());
  widen({static_cast<int64_t>(x.size()), ElementType::bf16}, x.data(), y.data());
  return y;
}

// The same activations on values stored in bf16, against the loops' bf16 form (widen, the formula, round to nearest
// even): oneDNN's exp and erf differ from libm's in fp32's last bits, so a value may land one bf16 step away.
TEST(DnnlOps, SmoothActivationsInBf16FollowTheLoopsWithinOneBf16Step) {
  DnnlOps ops(2);
  const int64_t n = 4099;
  const Elements values{n, ElementType::bf16};
  if (!ops.runs_activation(Activation::gelu, values))
    GTEST_SKIP() << "oneDNN has no JIT eltwise kernel for bf16 on this CPU (it needs AVX-512); the loops run bf16";
  const auto x = to_bf16(random_vector(static_cast<std::size_t>(n), 73, -6.0f, 6.0f));
  const auto dy = to_bf16(random_vector(static_cast<std::size_t>(n), 74));
  for (Activation a : {Activation::gelu, Activation::silu, Activation::sigmoid}) {
    SCOPED_TRACE(static_cast<int>(a));
    std::vector<uint16_t> y(x.size()), want_y(x.size()), dx(x.size()), want_dx(x.size());
    ops.activation_forward(a, values, x.data(), y.data());
    activation_forward(a, values, x.data(), want_y.data());
    expect_close(from_bf16(y), from_bf16(want_y), 1.0 / 256);
    ops.activation_backward(a, values, x.data(), dy.data(), dx.data());
    activation_backward(a, values, x.data(), dy.data(), want_dx.data());
    expect_close(from_bf16(dx), from_bf16(want_dx), 1.0 / 256);
    std::size_t same = 0;
    for (std::size_t i = 0; i < y.size(); ++i) same += y[i] == want_y[i];
    EXPECT_GT(same, y.size() * 9 / 10) << "most values round to the loops' bf16 exactly";
  }
}

TEST(DnnlOps, TakesConvolutionsWithManyInputChannelsOnly) {
  DnnlOps ops(1);
  EXPECT_FALSE(ops.runs_conv2d({4, 1, 28, 28, 32, 5, 5, 1, 2}));  // a first layer: im2col is as fast
  EXPECT_FALSE(ops.runs_conv2d({4, 3, 32, 32, 16, 7, 7, 2, 3}));
  EXPECT_TRUE(ops.runs_conv2d({4, 32, 14, 14, 64, 5, 5, 1, 2}));
}

struct Conv {
  Conv2dShape s;
  std::vector<float> x, w, b, dy;
  explicit Conv(const Conv2dShape& shape)
      : s(shape), x(random_vector(x_size(s), 1)), w(random_vector(w_size(s), 2)),
        b(random_vector(std::size_t(s.filters), 3)), dy(random_vector(y_size(s), 4)) {}
};

struct ConvResults {
  std::vector<float> y, dx, dw, db;
};

// dw and db start from ones, so accumulation (not overwriting) is checked too.
ConvResults run_dnnl(DnnlOps& ops, const Conv& c) {
  ConvResults r{std::vector<float>(y_size(c.s)), std::vector<float>(x_size(c.s)), std::vector<float>(w_size(c.s), 1.0f),
                std::vector<float>(c.b.size(), 1.0f)};
  ops.conv2d_forward(c.s, c.x.data(), c.w.data(), c.b.data(), r.y.data());
  ops.conv2d_backward(c.s, c.x.data(), c.dy.data(), c.w.data(), r.dx.data(), r.dw.data(), r.db.data());
  return r;
}

ConvResults run_im2col(const Conv& c) {
  ConvWorkspace ws;
  ConvResults r{std::vector<float>(y_size(c.s)), std::vector<float>(x_size(c.s)), std::vector<float>(w_size(c.s), 1.0f),
                std::vector<float>(c.b.size(), 1.0f)};
  conv2d_forward(c.s, c.x.data(), c.w.data(), c.b.data(), r.y.data(), ws);
  conv2d_backward_data(c.s, c.dy.data(), c.w.data(), r.dx.data(), ws);
  conv2d_backward_filter(c.s, c.x.data(), c.dy.data(), r.dw.data(), r.db.data(), ws);
  return r;
}

// s on oneDNN gives im2col's outputs and accumulated gradients.
void expect_dnnl_as_im2col(const Conv2dShape& s) {
  DnnlOps ops(1);
  ASSERT_TRUE(ops.runs_conv2d(s)) << s.in_channels << " channels, " << s.groups << " groups";
  const Conv c(s);
  const ConvResults got = run_dnnl(ops, c), want = run_im2col(c);
  expect_close(got.y, want.y, 1e-5);
  expect_close(got.dx, want.dx, 1e-5);
  expect_close(got.dw, want.dw, 1e-5);
  expect_close(got.db, want.db, 1e-5);
}

TEST(DnnlOps, ConvolutionsAgreeWithIm2colAndAccumulate) {
  for (const Conv2dShape& s : {Conv2dShape{3, 16, 9, 7, 24, 3, 3, 1, 1}, Conv2dShape{2, 20, 8, 8, 8, 5, 5, 2, 2},
                               Conv2dShape{2, 32, 7, 7, 64, 1, 1, 2, 0}})
    expect_dnnl_as_im2col(s);
}

// A patch embedding (windows that tile the image, ViT's and ConvNeXt's stems) goes to oneDNN despite its few input
// channels, where oneDNN has a JIT kernel for it, and gives im2col's numbers; small windows stay on im2col.
TEST(DnnlOps, TakesAPatchEmbeddingAndAgreesWithIm2col) {
  const Conv2dShape patches{2, 3, 32, 32, 24, 8, 8, 8, 0};  // 3 x 8 x 8 = 192 inputs a window
  DnnlOps ops(1);
  EXPECT_FALSE(ops.runs_conv2d({4, 1, 28, 28, 8, 2, 2, 2, 0})) << "4 inputs a window: im2col";
  EXPECT_FALSE(ops.runs_conv2d({4, 3, 32, 32, 16, 8, 8, 4, 0})) << "overlapping windows: im2col";
  if (!ops.runs_conv2d(patches)) GTEST_SKIP() << "this CPU's oneDNN has no JIT kernel for an 8x8/8 patch embedding";
  std::printf("oneDNN runs the 8x8/8 patch embedding as %s\n", ops.conv2d_implementation(patches).c_str());
  expect_dnnl_as_im2col(patches);
}

Conv2dShape grouped(Conv2dShape s, int groups) {
  s.groups = groups;
  return s;
}

// oneDNN takes our K x C/G x R x S weights as G x K/G x C/G x R x S: depthwise (its jit_dw kernel), strided, and
// four groups of 8 channels.
TEST(DnnlOps, GroupedConvolutionsAgreeWithIm2col) {
  for (const Conv2dShape& s : {grouped({3, 32, 9, 9, 32, 3, 3, 1, 1}, 32), grouped({2, 32, 9, 9, 32, 3, 3, 2, 1}, 32),
                               grouped({2, 32, 7, 7, 64, 1, 1, 1, 0}, 4)})
    expect_dnnl_as_im2col(s);
}

// backward() reorders dy once for both gradients: the filter gradient is the same with or without the data
// gradient, with or without a bias gradient, and the same when the primitives were made by prepare().
TEST(DnnlOps, ConvolutionBackwardSharesItsStagedOutputGradient) {
  const Conv c({4, 32, 14, 14, 64, 5, 5, 1, 2});
  DnnlOps both(1), filter_only(1), prepared(1);
  const ConvResults want = run_dnnl(both, c);
  std::vector<float> dw(w_size(c.s), 1.0f), db(c.b.size(), 1.0f);
  filter_only.conv2d_backward(c.s, c.x.data(), c.dy.data(), c.w.data(), nullptr, dw.data(), db.data());
  EXPECT_EQ(dw, want.dw);
  EXPECT_EQ(db, want.db);
  std::vector<float> dw_no_bias(w_size(c.s), 1.0f);
  filter_only.conv2d_backward(c.s, c.x.data(), c.dy.data(), c.w.data(), nullptr, dw_no_bias.data(), nullptr);
  expect_close(dw_no_bias, want.dw, 1e-6);
  prepared.conv2d_prepare(c.s);
  const ConvResults after_prepare = run_dnnl(prepared, c);
  EXPECT_EQ(after_prepare.dx, want.dx);
  EXPECT_EQ(after_prepare.dw, want.dw);
}

std::vector<float> nchw_to_nhwc(const std::vector<float>& t, int n, int c, int hw) {
  std::vector<float> out(t.size());
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j)
      for (int p = 0; p < hw; ++p)
        out[(std::size_t(i) * hw + p) * c + j] = t[(std::size_t(i) * c + j) * hw + p];
  return out;
}

// MobileNetV2's last depthwise layer (960 channels, 3x3 on 2x2 maps): where oneDNN's filter gradient for it is no
// JIT depthwise kernel, ours runs (the implementation says so), and the results follow the im2col kernels; a second
// thread count gives the same bits.
TEST(DnnlOps, DepthwiseFilterGradientOnTinyMapsRunsDirect) {
  Conv2dShape s{4, 960, 2, 2, 960, 3, 3, 1, 1};
  s.groups = 960;
  DnnlOps ops(1), two(2);
  const Conv c(s);
  const ConvResults got = run_dnnl(ops, c);
  std::printf("oneDNN runs depthwise 960 3x3 on 2x2 as %s\n", ops.conv2d_implementation(s).c_str());
  if (ops.conv2d_implementation(s).find("direct depthwise") == std::string::npos)
    GTEST_SKIP() << "this CPU's oneDNN has a JIT filter gradient for this shape: " << ops.conv2d_implementation(s);
  const ConvResults want = run_im2col(c);
  expect_close(got.y, want.y, 1e-5);
  expect_close(got.dx, want.dx, 1e-5);
  expect_close(got.dw, want.dw, 1e-5);
  expect_close(got.db, want.db, 1e-5);
  const ConvResults again = run_dnnl(two, c);
  EXPECT_EQ(again.dw, got.dw);
  EXPECT_EQ(again.db, got.db);
}

// Where fp32 runs on oneDNN's NHWC kernel, the convolution offers NHWC (a block of every channel) to the batch norm
// after it and takes it from the one before; handed over so, x, y, dx and dy are NHWC and every number is the one
// the NCHW hand-over gives (the same kernel behind reorders). Elsewhere it offers oneDNN's channel blocks or none.
TEST(DnnlOps, ANhwcHandOverGivesTheBitsOfNchw) {
  const Conv2dShape s{4, 32, 14, 14, 64, 5, 5, 1, 2};
  DnnlOps ops(1);
  const int out_block = ops.conv2d_output_block(s), in_block = ops.conv2d_input_block(s);
  std::printf("oneDNN runs conv 32->64 5x5 on 14x14 as %s, handing over %s in, %s out\n",
              ops.conv2d_implementation(s).c_str(), blocked_layout_name(in_block, 32).c_str(),
              blocked_layout_name(out_block, 64).c_str());
  if (out_block != 64) GTEST_SKIP() << "this CPU's oneDNN has no NHWC kernel it prefers for this convolution";
  EXPECT_EQ(in_block, 32);
  EXPECT_TRUE(ops.conv2d_implementation(s).starts_with("brg")) << ops.conv2d_implementation(s);
  const Conv plain(s);
  Conv2dShape nhwc_shape = s;
  nhwc_shape.in_block = 32, nhwc_shape.out_block = 64;
  Conv nhwc(nhwc_shape);
  nhwc.x = nchw_to_nhwc(plain.x, 4, 32, 14 * 14);
  nhwc.dy = nchw_to_nhwc(plain.dy, 4, 64, 14 * 14);
  const ConvResults want = run_dnnl(ops, plain), got = run_dnnl(ops, nhwc);
  EXPECT_EQ(got.y, nchw_to_nhwc(want.y, 4, 64, 14 * 14));
  EXPECT_EQ(got.dx, nchw_to_nhwc(want.dx, 4, 32, 14 * 14));
  EXPECT_EQ(got.dw, want.dw);
  EXPECT_EQ(got.db, want.db);
}

// A stop signal (SIGUSR1, SIGTERM) may arrive at any moment of a step. oneDNN's JIT GEMM, under the dense data
// gradient, corrupted the heap when a handler ran on its thread mid-product (glibc aborted: "corrupted size vs.
// prev_size"); the context keeps signals off the threads running oneDNN. Here a thread signals the process every
// 50 us while the dense layer's gradients and a convolution's run over and over: no crash, and the same bits.
volatile sig_atomic_t g_signals_seen = 0;
extern "C" void count_signal(int) { g_signals_seen = g_signals_seen + 1; }

TEST(DnnlOps, SignalsDuringItsKernelsChangeNothing) {
  struct sigaction action {};
  action.sa_handler = count_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR1, &action, nullptr), 0);
  const DenseShape d{64, 3136, 1024};
  const auto x = random_vector(std::size_t(d.batch) * d.in, 1), w = random_vector(std::size_t(d.out) * d.in, 2);
  const auto dy = random_vector(std::size_t(d.batch) * d.out, 3);
  const Conv c({8, 32, 14, 14, 64, 5, 5, 1, 2});
  DnnlOps ops(1);
  std::vector<float> dx(x.size()), want_dx(x.size()), dw(w.size()), want_dw(w.size());
  ops.dense_backward(d, x.data(), w.data(), dy.data(), want_dx.data(), want_dw.data(), nullptr);
  const ConvResults want_conv = run_dnnl(ops, c);
  std::atomic<bool> done{false};
  std::thread signaller([&] {
    while (!done) {
      kill(getpid(), SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  int differing = 0;
  for (int i = 0; i < 60; ++i) {
    std::fill(dw.begin(), dw.end(), 0.0f);
    ops.dense_backward(d, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr);
    const ConvResults conv = run_dnnl(ops, c);
    differing += dx != want_dx || dw != want_dw || conv.y != want_conv.y || conv.dx != want_conv.dx;
  }
  done = true;
  signaller.join();
  // A straggler still pending must not meet SIGUSR1's default action (termination): ignore it from here on.
  signal(SIGUSR1, SIG_IGN);
  EXPECT_EQ(differing, 0);
  EXPECT_GT(g_signals_seen, 100) << "the signals were sent and handled";
}

TEST(DnnlOps, SameBitsOnTheSameThreadCount) {
  const Conv c({8, 32, 14, 14, 64, 5, 5, 1, 2});
  for (int threads : {1, 2}) {
    DnnlOps first(threads), second(threads);
    const ConvResults a = run_dnnl(first, c), b = run_dnnl(second, c), again = run_dnnl(first, c);
    EXPECT_EQ(a.y, b.y) << threads << " threads";
    EXPECT_EQ(a.dx, b.dx) << threads << " threads";
    EXPECT_EQ(a.dw, b.dw) << threads << " threads";
    EXPECT_EQ(a.y, again.y) << threads << " threads, same primitives";
  }
}

// With more outputs than samples (5 x 37 -> 13) the forward runs as y^T = W x^T; with fewer (20 x 37 -> 13) as is.
TEST(DnnlOps, DenseAgreesWithBlasAndAccumulates) {
  for (const DenseShape s : {DenseShape{5, 37, 13}, DenseShape{20, 37, 13}}) {
    SCOPED_TRACE(::testing::Message() << s.batch << " x " << s.in << " -> " << s.out);
    const auto x = random_vector(std::size_t(s.batch) * s.in, 1), w = random_vector(std::size_t(s.out) * s.in, 2);
    const auto b = random_vector(std::size_t(s.out), 3), dy = random_vector(std::size_t(s.batch) * s.out, 4);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 1.0f), db(b.size(), 1.0f);
    std::vector<float> want_y(y), want_dx(dx), want_dw(dw), want_db(db);
    DnnlOps ops(1);
    ops.dense_forward(s, x.data(), w.data(), b.data(), y.data());
    ops.dense_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
    dense_forward(s.batch, s.in, s.out, x.data(), w.data(), b.data(), want_y.data());
    dense_backward(s.batch, s.in, s.out, x.data(), w.data(), dy.data(), want_dx.data(), want_dw.data(), want_db.data());
    expect_close(y, want_y, 1e-5);
    expect_close(dx, want_dx, 1e-5);
    expect_close(dw, want_dw, 1e-5);
    expect_close(db, want_db, 1e-6);
  }
}

// bf16 keeps 8 mantissa bits: each operand is off by up to 2^-9 relative, and sums of such products stay within a
// few times that of the fp32 result, relative to the output's largest value.
constexpr double kBf16Tolerance = 1e-2;

TEST(DnnlOps, Bf16OperandsStayNearFp32AndRepeatBitForBit) {
  if (!DnnlOps::bf16_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const Conv c({8, 32, 14, 14, 64, 5, 5, 1, 2});
  DnnlOps fp32(1), bf16(1, DnnlMath::bf16), bf16_again(1, DnnlMath::bf16);
  const ConvResults want = run_dnnl(fp32, c), got = run_dnnl(bf16, c), again = run_dnnl(bf16_again, c);
  EXPECT_NE(got.y, want.y) << "bf16 operands should round";
  expect_close(got.y, want.y, kBf16Tolerance);
  expect_close(got.dx, want.dx, kBf16Tolerance);
  expect_close(got.dw, want.dw, kBf16Tolerance);
  expect_close(got.db, want.db, kBf16Tolerance);
  EXPECT_EQ(got.y, again.y);
  EXPECT_EQ(got.dx, again.dx);
  EXPECT_EQ(got.dw, again.dw);

  const DenseShape s{16, 300, 70};
  const auto x = random_vector(std::size_t(s.batch) * s.in, 1), w = random_vector(std::size_t(s.out) * s.in, 2);
  const auto b = random_vector(std::size_t(s.out), 3), dy = random_vector(std::size_t(s.batch) * s.out, 4);
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 1.0f), db(b.size(), 1.0f);
  std::vector<float> want_y(y), want_dx(dx), want_dw(dw), want_db(db);
  bf16.dense_forward(s, x.data(), w.data(), b.data(), y.data());
  bf16.dense_backward(s, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
  fp32.dense_forward(s, x.data(), w.data(), b.data(), want_y.data());
  fp32.dense_backward(s, x.data(), w.data(), dy.data(), want_dx.data(), want_dw.data(), want_db.data());
  expect_close(y, want_y, kBf16Tolerance);
  expect_close(dx, want_dx, kBf16Tolerance);
  expect_close(dw, want_dw, kBf16Tolerance);  // started from ones: accumulated, not overwritten
  expect_close(db, want_db, 1e-6);
}

// A layer's bf16 weight copy is its own whatever batch size reads it: evaluation's last batch (a product shape of its
// own) converts into the same copy, so memory does not grow by the weights with each batch size; and the data
// gradient after a forward at one batch size reads the weights that forward converted.
TEST(DnnlOps, ALayerKeepsOneBf16WeightCopyAcrossBatchSizes) {
  if (!DnnlOps::bf16_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  DnnlOps bf16(1, DnnlMath::bf16);
  const DenseShape train{16, 300, 70}, last_batch{5, 300, 70};
  const auto w = random_vector(std::size_t(train.out) * train.in, 2), other = random_vector(w.size(), 7);
  const auto x = random_vector(std::size_t(train.batch) * train.in, 1);
  const auto dy = random_vector(std::size_t(train.batch) * train.out, 4);
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 0.0f);
  bf16.dense_forward(train, x.data(), w.data(), nullptr, y.data());
  bf16.dense_backward(train, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr);
  const std::size_t one_batch_size = bf16.working_bytes();
  bf16.dense_forward(last_batch, x.data(), w.data(), nullptr, y.data());
  bf16.dense_backward(last_batch, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr);
  EXPECT_LT(bf16.working_bytes(), one_batch_size + w.size() * 2) << "a second batch size copied the weights again";
  // Another layer of the shape has a copy of its own, and its backward reads it, not the first layer's.
  bf16.dense_forward(train, x.data(), other.data(), nullptr, y.data());
  bf16.dense_forward(train, x.data(), w.data(), nullptr, y.data());
  std::vector<float> dx_other(dx.size()), dx_fresh(dx.size());
  bf16.dense_backward(train, x.data(), other.data(), dy.data(), dx_other.data(), dw.data(), nullptr);
  DnnlOps fresh(1, DnnlMath::bf16);
  fresh.dense_forward(train, x.data(), other.data(), nullptr, y.data());
  fresh.dense_backward(train, x.data(), other.data(), dy.data(), dx_fresh.data(), dw.data(), nullptr);
  EXPECT_EQ(dx_other, dx_fresh);
}

// Depthwise convolutions on activations stored in bf16: strided (whose data gradient oneDNN would hand to its brgemm
// convolution, not its depthwise kernel) and on 2x2 maps (whose filter gradient runs on the direct kernel), against
// im2col in fp32 on the same bf16 values; dw and db accumulate.
TEST(DnnlOps, Bf16DepthwiseConvolutionsStayNearFp32) {
  if (!DnnlOps::bf16_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  for (Conv2dShape s : {grouped({4, 96, 16, 16, 96, 3, 3, 2, 1}, 96), grouped({4, 960, 2, 2, 960, 3, 3, 1, 1}, 960)}) {
    SCOPED_TRACE(::testing::Message() << s.in_channels << " channels on " << s.in_h << "x" << s.in_w);
    Conv c(s);
    c.x = from_bf16(to_bf16(c.x));
    c.dy = from_bf16(to_bf16(c.dy));
    c.w = from_bf16(to_bf16(c.w));  // oneDNN rounds the fp32 weights to bf16; im2col then multiplies the same values
    const ConvResults want = run_im2col(c);
    s.data = ElementType::bf16;
    DnnlOps ops(1, DnnlMath::bf16);
    ASSERT_TRUE(ops.runs_conv2d(s));
    const auto x = to_bf16(c.x), dy = to_bf16(c.dy);
    std::vector<uint16_t> y(y_size(s)), dx(x_size(s));
    std::vector<float> dw(w_size(s), 1.0f), db(c.b.size(), 1.0f);
    ops.conv2d_forward(s, x.data(), c.w.data(), c.b.data(), y.data());
    ops.conv2d_backward(s, x.data(), dy.data(), c.w.data(), dx.data(), dw.data(), db.data());
    expect_close(from_bf16(y), want.y, kBf16Tolerance);
    expect_close(from_bf16(dx), want.dx, kBf16Tolerance);
    expect_close(dw, want.dw, 1e-5);  // products of bf16 values are exact in fp32
    expect_close(db, want.db, 1e-5);
  }
}

}  // namespace
}  // namespace ringtrain::kernels::cpu

namespace ringtrain::kernels::cpu {
namespace {

// The CPU backend may run max pooling over windows that do not overlap (window = stride, no padding: the model's
// 2x2/2) on either implementation, whichever is faster on the machine, because there they give the same bits:
// the window's maximum, and its gradient routed to the first maximum in the window's row-major order. Values drawn
// from a few levels make ties (as ReLU's zeros do) in most windows. (Overlapping windows differ in where a tie's
// gradient goes, so those stay on oneDNN.)
TEST(DnnlOps, MaxPoolingGivesOurKernelsBitsTiesIncluded) {
  DnnlOps ops(1);
  for (const PoolShape& s : {PoolShape{3, 5, 28, 28, 2, 2, 0}, PoolShape{2, 4, 14, 14, 2, 2, 0},
                             PoolShape{2, 3, 9, 12, 3, 3, 0}}) {
    std::vector<float> x = testing::random_vector(static_cast<std::size_t>(s.batch) * s.channels * s.in_h * s.in_w, 3);
    for (float& v : x) v = std::floor(v * 2.0f) * 0.5f;  // -1, -0.5, 0, 0.5: ties everywhere
    const auto outputs = static_cast<std::size_t>(s.batch) * s.channels * s.out_h() * s.out_w();
    const std::vector<float> dy = testing::random_vector(outputs, 4);
    std::vector<float> y_ours(outputs), y_dnnl(outputs), dx_ours(x.size()), dx_dnnl(x.size());
    std::vector<int32_t> argmax(outputs);
    std::vector<unsigned char> workspace(ops.pool_workspace_bytes(s, PoolMode::max));
    maxpool_forward(s, x.data(), y_ours.data(), argmax.data());
    maxpool_backward(s, dy.data(), argmax.data(), dx_ours.data());
    ops.pool_forward(s, PoolMode::max, x.data(), y_dnnl.data(), workspace.data());
    ops.pool_backward(s, PoolMode::max, dy.data(), dx_dnnl.data(), workspace.data());
    EXPECT_EQ(y_ours, y_dnnl) << "window " << s.window << " stride " << s.stride;
    EXPECT_EQ(dx_ours, dx_dnnl) << "window " << s.window << " stride " << s.stride;
  }
}

}  // namespace
}  // namespace ringtrain::kernels::cpu
