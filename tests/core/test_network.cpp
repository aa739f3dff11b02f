// Proves the model as assembled from a job file: parameter layout and counts, FLOP accounting, shape errors
// that name the layer, gradients of a whole network (residual blocks, nested ones included) against finite
// differences, that the memory plan and the fusion pass change no number, that a ViT's token layers train, and that
// attention reserves for backward what the backend says its path keeps.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "config/job_config.h"
#include "kernels/cpu/conv2d_direct.h"
#include "model/network.h"
#include "tests/core/layer_specs.h"
#include "tests/support/largest_difference.h"

namespace fs = std::filesystem;
using namespace ringtrain;
using config::LayerSpec;
using test_specs::layer;

namespace {

TEST(Network, FashionMnistModelHasTheExpectedParametersAndFlops) {
  const auto job = config::load_job(fs::path(RINGTRAIN_SOURCE_DIR) / "jobs/fashion_mnist.toml", {});
  backend::CpuBackend cpu(1);
  model::Network net(job.model.layers, cpu, {64, 1, 28, 28}, 10);
  // conv1 32x1x5x5 (no bias) + bn 2x32 + conv2 64x32x5x5 + bn 2x64 + dense 3136x1024+1024 + dense 1024x10+10
  EXPECT_EQ(net.param_count(), 800 + 64 + 51200 + 128 + 3136 * 1024 + 1024 + 10240 + 10);
  EXPECT_EQ(net.state_count(), 2 * 32 + 2 * 64);
  const double forward = 2.0 * (32 * 25 * 28 * 28 + 64 * 800 * 14 * 14 + 3136 * 1024 + 1024 * 10);
  EXPECT_DOUBLE_EQ(net.forward_flops_per_sample(), forward);
  // Backward is twice forward except that the first layer needs no input gradient.
  EXPECT_DOUBLE_EQ(net.train_flops_per_sample(), 3 * forward - 2.0 * 32 * 25 * 28 * 28);
  // Tensors tile the flat buffer in order.
  int64_t next = 0;
  for (const auto& t : net.param_tensors()) {
    EXPECT_EQ(t.offset, next) << t.name;
    next += t.count;
  }
  EXPECT_EQ(next, net.param_count());
}

TEST(Network, InitialParametersDependOnlyOnTheSeed) {
  backend::CpuBackend cpu(1);
  const std::vector<LayerSpec> layers{layer("flatten"), layer("dense", 5)};
  model::Network a(layers, cpu, {4, 1, 6, 6}, 5), b(layers, cpu, {16, 1, 6, 6}, 5);
  EXPECT_EQ(a.initial_params(3), b.initial_params(3));
  EXPECT_NE(a.initial_params(3), a.initial_params(4));
  // He-normal weights: mean ~0, std ~sqrt(2/36).
  const auto p = a.initial_params(3);
  double sum = 0, sq = 0;
  for (int i = 0; i < 180; ++i) sum += p[static_cast<size_t>(i)], sq += p[static_cast<size_t>(i)] * p[static_cast<size_t>(i)];
  EXPECT_NEAR(std::sqrt(sq / 180), std::sqrt(2.0 / 36), 0.06);
  for (int i = 180; i < 185; ++i) EXPECT_EQ(p[static_cast<size_t>(i)], 0.0f);  // bias
}

TEST(Network, ShapeErrorsNameTheLayer) {
  backend::CpuBackend cpu(1);
  auto pool = layer("maxpool", 3);
  pool.where = "model.layers[1]";
  try {
    model::Network net({layer("conv2d", 2, 3), pool, layer("dense", 3)}, cpu, {2, 1, 4, 4}, 3);
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers[1]"), std::string::npos) << e.what();
  }
  try {
    model::Network net({layer("dense", 7)}, cpu, {2, 1, 4, 4}, 10);
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    EXPECT_NE(std::string(e.what()).find("units = 10"), std::string::npos) << e.what();
  }
}

// groups = G: K x C/G x k x k weights and a G-th of the ungrouped multiply-adds.
TEST(Network, GroupedConvolutionHasAGroupsShareOfWeightsAndFlops) {
  backend::CpuBackend cpu(1);
  const LayerSpec grouped = config::layer_spec(
      "conv2d", {{"filters", 16}, {"kernel", 3}, {"padding", 1}, {"groups", 4}, {"bias", false}}, "test");
  model::Network net({grouped, layer("flatten"), layer("dense", 3)}, cpu, {2, 8, 5, 5}, 3);
  EXPECT_EQ(net.param_count(), 16 * 2 * 9 + 16 * 25 * 3 + 3);
  EXPECT_DOUBLE_EQ(net.forward_flops_per_sample(), 2.0 * (16 * 25 * 2 * 9 + 16 * 25 * 3));
}

// Not the channels (4 into 6), or not the filters (2 into 9).
TEST(Network, GroupsThatDoNotDivideTheChannelsOrFiltersAreRefusedNamingTheLayer) {
  backend::CpuBackend cpu(1);
  for (const auto& [filters, groups] : {std::pair{12, 4}, std::pair{9, 2}}) {
    const LayerSpec conv = config::layer_spec("conv2d", {{"filters", filters}, {"kernel", 1}, {"groups", groups}},
                                              "model.layers[0]");
    try {
      model::Network net({conv, layer("flatten"), layer("dense", 3)}, cpu, {2, 6, 4, 4}, 3);
      FAIL() << "expected JobFileError for groups = " << groups;
    } catch (const JobFileError& e) {
      const std::string why =
          fmt::format("model.layers[0] (conv2d 1x1x{} s1 p0 g{}) cannot take input 1x6x4x4 per sample: groups = {} "
                      "must divide both its 6 input channels and its {} filters",
                      filters, groups, groups, filters);
      EXPECT_EQ(std::string(e.what()), why);
    }
  }
}

// Heads that do not divide the embedding width are refused naming the layer, before any backend sees the shape.
TEST(Network, HeadsThatDoNotDivideTheEmbeddingAreRefusedNamingTheLayer) {
  backend::CpuBackend cpu(1);
  const LayerSpec attention = config::layer_spec("multi_head_attention", {{"heads", 3}}, "model.layers[0]");
  try {
    model::Network net({attention, layer("flatten"), layer("dense", 3)}, cpu, {2, 10, 5, 1}, 3);
    FAIL() << "expected JobFileError for 3 heads of 10 channels";
  } catch (const JobFileError& e) {
    EXPECT_EQ(std::string(e.what()), "model.layers[0] (multi_head_attention 3 heads) cannot take input 1x10x5x1 per "
                                     "sample: heads = 3 must divide the embedding width, its 10 input channels");
  }
}

TEST(Network, ResidualShortcutMismatchIsExplained) {
  backend::CpuBackend cpu(1);
  LayerSpec block;
  block.type = "residual";
  block.where = "model.layers[0]";
  block.body = {layer("conv2d", 4, 3, 1, 1)};  // 1 -> 4 channels, identity shortcut has 1
  try {
    model::Network net({block, layer("dense", 3)}, cpu, {2, 1, 5, 5}, 3);
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers[0] (residual)"), std::string::npos) << e.what();
  }
}

// conv -> batch norm -> ReLU -> a residual block (conv, batch norm, ReLU, conv, batch norm) -> 2x2 max pool, then
// `tail`: every kind of step a small ResNet has.
std::vector<LayerSpec> residual_net(const std::vector<LayerSpec>& tail) {
  auto block = layer("residual");
  block.body = {layer("conv2d", 4, 3, 1, 1), layer("batchnorm"), layer("relu"),
                layer("conv2d", 4, 3, 1, 1), layer("batchnorm")};
  std::vector<LayerSpec> layers{layer("conv2d", 4, 3, 1, 1), layer("batchnorm"),
                                layer("relu"), block, layer("maxpool", 2)};
  layers.insert(layers.end(), tail.begin(), tail.end());
  return layers;
}

// Softmax cross-entropy of one batch on the CPU backend (host memory), its gradient into dlogits if not null.
double loss_of(model::Network& net, const model::Tensor& logits, const std::vector<int32_t>& labels, float* dlogits) {
  model::LossTotals totals;
  net.backend().softmax_cross_entropy(logits.shape.n, net.classes(), logits.as<float>(), labels.data(), {}, dlogits, &totals);
  return totals.loss_sum;
}

// n normally distributed values (standard deviation 1), reproducible from the seed.
std::vector<float> normal_values(int64_t n, uint32_t seed, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(mean, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

// Loss of the whole network on one batch, in train mode, in double.
double batch_loss(model::Network& net, std::vector<float>& x, const std::vector<int32_t>& labels, int batch) {
  const auto logits = net.forward({x.data(), net.input_shape().with_batch(batch)}, model::Mode::train, 1);
  return loss_of(net, logits, labels, nullptr);
}

// Goyal et al. 2017's zero-init: a batch norm with init_scale = 0 starts with gamma = 0 (beta 0 as always), so a
// residual block ending in it starts as relu(0 + shortcut) = relu(x): the network gives the logits of the same
// network with the block replaced by a ReLU.
TEST(Network, ZeroInitBatchNormStartsItsResidualBlockAsTheShortcut) {
  backend::CpuBackend cpu(1);
  auto last_norm = layer("batchnorm");
  last_norm.values["init_scale"] = 0.0;
  const std::vector<LayerSpec> zero_init{
      test_specs::residual({layer("conv2d", 3, 3, 1, 1), layer("batchnorm"),
                            layer("relu"), layer("conv2d", 3, 3, 1, 1), last_norm}),
      layer("flatten"), layer("dense", 5)};
  const std::vector<LayerSpec> shortcut_only{layer("relu"), layer("flatten"),
                                             layer("dense", 5)};
  const int batch = 2;
  model::Network net(zero_init, cpu, {batch, 3, 4, 4}, 5), plain(shortcut_only, cpu, {batch, 3, 4, 4}, 5);
  const auto params = net.initial_params(5);
  int gammas = 0;
  for (const auto& t : net.param_tensors()) {
    if (t.decl.name != "gamma") continue;
    const float want = ++gammas == 2 ? 0.0f : 1.0f;  // the block's second batch norm is the zero-init one
    for (int64_t i = 0; i < t.count; ++i) EXPECT_EQ(params[static_cast<size_t>(t.offset + i)], want) << t.name;
  }
  EXPECT_EQ(gammas, 2);
  std::copy(params.begin(), params.end(), net.params());
  // The dense layer's weights and bias are the last parameters of both networks.
  std::copy(params.end() - plain.param_count(), params.end(), plain.params());
  std::vector<float> x = normal_values(batch * 3 * 4 * 4, 3);
  const auto a = net.forward({x.data(), net.input_shape()}, model::Mode::train, 1);
  const std::vector<float> block(a.as<float>(), a.as<float>() + a.shape.elements());
  const auto b = plain.forward({x.data(), plain.input_shape()}, model::Mode::train, 1);
  for (size_t i = 0; i < block.size(); ++i) EXPECT_FLOAT_EQ(block[i], b.as<float>()[i]) << i;
}

TEST(Network, WholeNetworkGradientsMatchFiniteDifferences) {
  backend::CpuBackend cpu(1);
  LayerSpec projected;  // residual with a strided conv shortcut
  projected.type = "residual";
  projected.where = "r1";
  auto bn = layer("batchnorm");
  projected.body = {layer("conv2d", 4, 3, 2, 1), bn, layer("relu"), layer("conv2d", 4, 3, 1, 1)};
  projected.shortcut = {layer("conv2d", 4, 1, 2, 0)};
  LayerSpec identity;  // residual with the identity shortcut
  identity.type = "residual";
  identity.where = "r2";
  identity.body = {layer("conv2d", 4, 3, 1, 1)};
  LayerSpec nested;  // a block whose body starts with a block: its input's gradient sums three contributions
  nested.type = "residual";
  nested.where = "r3";
  nested.body = {identity, layer("relu"), layer("conv2d", 4, 1, 1, 0)};
  LayerSpec gap;
  gap.type = "global_avgpool";
  const std::vector<LayerSpec> layers{layer("conv2d", 3, 3, 1, 1), layer("maxpool", 2),
                                      projected, identity, nested, layer("avgpool", 1), gap,
                                      layer("flatten"), layer("dense", 6), layer("relu"),
                                      layer("dense", 5)};
  const int batch = 3;
  model::Network net(layers, cpu, {batch, 2, 8, 8}, 5);
  auto params = net.initial_params(11);
  std::copy(params.begin(), params.end(), net.params());
  std::vector<float> x = normal_values(batch * 2 * 8 * 8, 5);
  const std::vector<int32_t> labels{1, 4, 2};

  std::fill(net.grads(), net.grads() + net.param_count(), 0.0f);
  std::vector<float> dlogits(static_cast<size_t>(batch * 5));
  const auto logits = net.forward({x.data(), net.input_shape()}, model::Mode::train, 1);
  loss_of(net, logits, labels, dlogits.data());
  net.backward({dlogits.data(), logits.shape}, nullptr);
  const std::vector<float> analytic(net.grads(), net.grads() + net.param_count());

  // Central differences with h = 1e-3 on every parameter tensor (up to 12 entries each). The loss is a float32
  // sum of ~1.6 (error ~1e-6), so a difference is resolved to ~1e-3 absolute. A larger h (1e-2 was tried) lets
  // batch-norm curvature and ReLU/max-pool kinks move the difference by 20% on this network, so h stays small
  // and the tolerance is 5% relative plus 2e-3 absolute.
  const float h = 1e-3f;
  int checked = 0;
  for (const auto& t : net.param_tensors()) {
    for (int64_t k = 0; k < std::min<int64_t>(t.count, 12); ++k) {
      const int64_t i = t.offset + (k * 7919) % t.count;
      float* p = net.params() + i;
      const float saved = *p;
      *p = saved + h;
      const double up = batch_loss(net, x, labels, batch);
      *p = saved - h;
      const double down = batch_loss(net, x, labels, batch);
      *p = saved;
      const double numeric = (up - down) / (2 * h);
      const double a = analytic[static_cast<size_t>(i)];
      EXPECT_NEAR(a, numeric, 0.05 * std::max(std::abs(a), std::abs(numeric)) + 2e-3) << t.name << " index " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

// A ViT's token layers between a patch embedding (conv2d kernel 4 stride 4 with a bias: 8x8 images to 2x2 patches)
// and a head: tokens, class_token, position_embedding, then a 3x3 convolution padded by 1, which on T x 1 tokens
// mixes each token with its neighbours (attention's part in a ViT: without it token 0 would see no patch),
// class_token_output, flatten, dense.
std::vector<LayerSpec> token_net() {
  auto patches = layer("conv2d", 6, 4, 4, 0);
  patches.values["bias"] = true;
  return {patches, layer("tokens"), layer("class_token"), layer("position_embedding"), layer("conv2d", 6, 3, 1, 1),
          layer("class_token_output"), layer("flatten"), layer("dense", 3)};
}

// The token layers as a network assembles them: their parameters start as torchvision's (class token zero,
// position table normal with standard deviation 0.02), every gradient is the loss's derivative (central
// differences on every parameter value of the embeddings), and a few steps of plain SGD on one batch learn it.
TEST(Network, VisionTransformerTokenLayersTrain) {
  backend::CpuBackend cpu(1);
  const int batch = 4;
  model::Network net(token_net(), cpu, {batch, 3, 8, 8}, 3);
  const auto params = net.initial_params(7);
  std::copy(params.begin(), params.end(), net.params());
  std::vector<float> x = normal_values(batch * 3 * 8 * 8, 8);
  const std::vector<int32_t> labels{0, 2, 1, 2};
  const model::ParamTensor* table = nullptr;
  for (const auto& t : net.param_tensors()) {
    const std::span<const float> values(params.data() + t.offset, static_cast<size_t>(t.count));
    if (t.decl.name == "class_token") {
      EXPECT_EQ(t.count, 6);
      EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](float v) { return v == 0.0f; }));
    }
    if (t.decl.name != "position_embedding") continue;
    table = &t;
    EXPECT_EQ(t.count, 5 * 6);  // 4 patches and the class token, 6 features each
    double sq = 0;
    for (float v : values) sq += double{v} * v;
    EXPECT_NEAR(std::sqrt(sq / static_cast<double>(t.count)), 0.02, 0.008);
  }
  ASSERT_NE(table, nullptr);

  auto step = [&] {  // the loss, and the gradients in net.grads()
    std::fill(net.grads(), net.grads() + net.param_count(), 0.0f);
    std::vector<float> dlogits(static_cast<size_t>(batch * 3));
    const auto logits = net.forward({x.data(), net.input_shape()}, model::Mode::train, 1);
    const double loss = loss_of(net, logits, labels, dlogits.data());
    net.backward({dlogits.data(), logits.shape}, nullptr);
    return loss;
  };
  step();
  const std::vector<float> analytic(net.grads(), net.grads() + net.param_count());
  const float h = 1e-2f;  // the network is linear up to the loss: a wide step resolves small gradients
  for (const auto& t : net.param_tensors()) {
    if (t.decl.name != "class_token" && t.decl.name != "position_embedding") continue;
    for (int64_t i = t.offset; i < t.offset + t.count; ++i) {
      float* p = net.params() + i;
      const float saved = *p;
      *p = saved + h;
      const double up = batch_loss(net, x, labels, batch);
      *p = saved - h;
      const double down = batch_loss(net, x, labels, batch);
      *p = saved;
      const double numeric = (up - down) / (2 * h), a = analytic[static_cast<size_t>(i)];
      EXPECT_NEAR(a, numeric, 0.01 * std::abs(numeric) + 2e-4) << t.name << " index " << i - t.offset;
    }
  }
  // The head reads token 0, which the mixing convolution makes of tokens 0 and 1: the table's later rows get nothing.
  for (int64_t i = table->offset + 2 * 6; i < table->offset + table->count; ++i)
    EXPECT_EQ(analytic[static_cast<size_t>(i)], 0.0f) << "position_embedding row " << (i - table->offset) / 6;

  const double first = step();
  double last = first;
  for (int k = 0; k < 30; ++k) {
    for (int64_t i = 0; i < net.param_count(); ++i) net.params()[i] -= 0.1f * net.grads()[i];
    last = step();
  }
  EXPECT_LT(last, 0.5 * first) << "30 steps of SGD on one batch";
}

// The CPU twin keeps attention's T x T probabilities in the element type: N x heads x T x T values.
TEST(Network, TheCpuAttentionKeepsTheProbabilities) {
  backend::CpuBackend cpu(1);
  EXPECT_EQ(cpu.attention_kept_bytes({3, 2, 5, 4, kernels::ElementType::f32}), std::size_t{3 * 2 * 5 * 5 * 4});
  EXPECT_EQ(cpu.attention_kept_bytes({3, 2, 5, 4, kernels::ElementType::bf16}), std::size_t{3 * 2 * 5 * 5 * 2});
}

// A CPU backend that answers for attention as a fused path does (the CUDA backend's cuDNN graphs): at `fused_batch`
// it keeps each query row's fp32 statistic, at any other batch the probabilities. Its passes are still the twin's,
// which write the probabilities, so only setup and the refusal run over it.
class FusedAnsweringCpu final : public backend::CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  std::size_t attention_kept_bytes(const model::AttentionShape& s) override {
    asked.push_back(s);
    return s.batch == fused_batch ? s.statistics_bytes() : CpuBackend::attention_kept_bytes(s);
  }
  int fused_batch = 0;
  std::vector<model::AttentionShape> asked;
};

// tokens (3 x 2 patches: 6 tokens of 8 features), attention with 2 heads of 4, a head.
std::vector<LayerSpec> attention_net() {
  return {layer("tokens"), config::layer_spec("multi_head_attention", {{"heads", 2}}, "test"), layer("flatten"),
          layer("dense", 3)};
}

// The attention layer reserves what the backend says its path keeps, and the run's planned memory (the backend's
// allocations: memory_planned_mb) follows: the statistics' 4 x 2 x 6 fp32 values in place of the 4 x 2 x 6 x 6.
TEST(Network, AttentionReservesWhatTheBackendsPathKeeps) {
  const model::Shape input{4, 8, 3, 2};
  backend::CpuBackend plain(1);
  FusedAnsweringCpu fused(1);
  fused.fused_batch = 4;
  const model::Network a(attention_net(), plain, input, 3), b(attention_net(), fused, input, 3);
  ASSERT_FALSE(fused.asked.empty());
  EXPECT_EQ(fused.asked.front(), (model::AttentionShape{4, 2, 6, 4, kernels::ElementType::f32}));
  const std::size_t probabilities = 4 * 2 * 6 * 6 * sizeof(float), statistics = 4 * 2 * 6 * sizeof(float);
  EXPECT_EQ(plain.bytes_allocated() - fused.bytes_allocated(), probabilities - statistics);
}

// A smaller batch whose path keeps more than the full batch's reserved (the fused attention refusing evaluation's
// last batch) is refused naming the layer and the keys that avoid it, before the attention writes anything.
TEST(Network, AttentionRefusesABatchWhosePathOutgrowsItsReservation) {
  const model::Shape input{4, 8, 3, 2};
  FusedAnsweringCpu fused(1);
  fused.fused_batch = 4;
  model::Network net(attention_net(), fused, input, 3);
  std::vector<float> x(static_cast<size_t>(2 * input.per_sample()), 0.5f);
  try {
    (void)net.forward({x.data(), input.with_batch(2)}, model::Mode::eval, 0);
    FAIL() << "expected the batch of 2 to be refused";
  } catch (const JobFileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("multi_head_attention"), std::string::npos) << what;
    EXPECT_NE(what.find("gpu.full_eval_batches = true"), std::string::npos) << what;
  }
}

// The memory plan (model/memory_plan.h) only moves where activations and gradients are written: the logits and
// every parameter gradient must be bit-for-bit what a buffer per tensor gives, on a model where a wrong plan
// would alias a layer's dy and dx (flatten and dropout passing dy through, a residual block between layers,
// layers of equal and of different sizes), let a ReLU or a residual join overwrite a tensor that backward still
// reads, or sum a nested block's gradients wrongly; and the plan must need less memory.
TEST(Network, TheMemoryPlanChangesNoNumberAndSavesMemory) {
  auto residual = layer("residual");
  residual.body = {layer("conv2d", 3, 3, 1, 1), layer("batchnorm"), layer("relu"),
                   layer("conv2d", 3, 3, 1, 1), layer("batchnorm")};
  auto inner = layer("residual");  // nested: its input is read by its body, its join and the outer join
  inner.body = {layer("conv2d", 4, 3, 1, 1), layer("relu"), layer("conv2d", 4, 1)};
  auto nested = layer("residual");
  nested.body = {inner, layer("conv2d", 4, 3, 1, 1)};
  auto projected = layer("residual");  // a shortcut with layers, whose backward runs before the body's
  projected.body = {layer("conv2d", 4, 3, 1, 1), layer("batchnorm"), layer("relu"),
                    nested, layer("conv2d", 4, 3, 1, 1)};
  projected.shortcut = {layer("conv2d", 4, 1), layer("batchnorm")};
  auto plain = layer("residual");  // no activation: its dy is read again by the sum
  plain.activation_relu = false;
  plain.body = {layer("conv2d", 4, 3, 1, 1), layer("relu"), layer("conv2d", 4, 3, 1, 1)};
  // The join must not add over the ReLU output that ReLU's backward reads (a ReLU with a buffer of its own: max
  // pooling before it reads its output too).
  auto relu_last = layer("residual");
  relu_last.body = {layer("conv2d", 4, 3, 1, 1), layer("maxpool", 1), layer("relu")};
  auto drop_off = layer("dropout");  // rate 0: a view, backward passes dy through
  auto drop_on = layer("dropout");
  drop_on.values["rate"] = 0.25;
  const std::vector<LayerSpec> layers{layer("conv2d", 3, 3, 1, 1), layer("relu"),
                                      layer("maxpool", 2), residual, projected, plain, relu_last,
                                      layer("relu"),
                                      layer("flatten"), layer("dense", 8), drop_off,
                                      layer("dense", 8), drop_on, layer("dense", 8),
                                      layer("relu"), layer("dense", 4)};
  const int batch = 3;
  const model::Shape input{batch, 2, 8, 8};
  std::vector<float> x = normal_values(input.elements(), 9);
  const std::vector<int32_t> labels{0, 3, 1};

  struct Result {
    std::vector<float> grads, logits;
    size_t bytes = 0;
  };
  auto run = [&](bool share) {
    backend::CpuBackend cpu(1);
    model::Network net(layers, cpu, input, 4, {.share_memory = share, .fuse = true, .budget = {}});
    auto params = net.initial_params(3);
    std::copy(params.begin(), params.end(), net.params());
    std::fill(net.grads(), net.grads() + net.param_count(), 0.0f);
    std::vector<float> last_logits;
    for (uint64_t step = 1; step <= 2; ++step) {  // twice: the second pass finds the buffers holding the first's
      std::vector<float> dlogits(static_cast<size_t>(batch * 4));
      const auto logits = net.forward({x.data(), input}, model::Mode::train, step);
      last_logits.assign(logits.as<float>(), logits.as<float>() + batch * 4);
      loss_of(net, logits, labels, dlogits.data());
      net.backward({dlogits.data(), logits.shape}, nullptr);
    }
    return Result{std::vector<float>(net.grads(), net.grads() + net.param_count()), last_logits,
                  cpu.bytes_allocated()};
  };
  const Result own = run(false), shared = run(true);
  EXPECT_EQ(own.logits, shared.logits);
  ASSERT_EQ(own.grads.size(), shared.grads.size());
  for (size_t i = 0; i < own.grads.size(); ++i) ASSERT_EQ(own.grads[i], shared.grads[i]) << "gradient " << i;
  EXPECT_GT(std::count_if(own.grads.begin(), own.grads.end(), [](float g) { return g != 0.0f; }), 100);
  EXPECT_LT(shared.bytes, own.bytes) << "the plan should need less memory than a buffer per tensor";
}

TEST(Network, DropoutIsIdentityInEvaluation) {
  backend::CpuBackend cpu(1);
  auto drop = layer("dropout");
  drop.values["rate"] = 0.5;
  model::Network net({layer("flatten"), drop, layer("dense", 3)}, cpu, {2, 1, 2, 2}, 3);
  std::vector<float> params = net.initial_params(1);
  std::copy(params.begin(), params.end(), net.params());
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8};
  const auto a = net.forward({x.data(), net.input_shape()}, model::Mode::eval, 1);
  const std::vector<float> first(a.as<float>(), a.as<float>() + 6);
  const auto b = net.forward({x.data(), net.input_shape()}, model::Mode::eval, 2);
  EXPECT_EQ(first, std::vector<float>(b.as<float>(), b.as<float>() + 6));
  const auto c = net.forward({x.data(), net.input_shape()}, model::Mode::train, 3);
  EXPECT_NE(first, std::vector<float>(c.as<float>(), c.as<float>() + 6));
}

// One training step's forward and backward, then an evaluation forward at `eval_batch`, of a network built with
// fusion on or off (the same seeds either way): what the fusion tests compare bit for bit.
struct FusionRun {
  std::string summary;
  std::vector<float> train_logits, eval_logits, grads, states;
};
// nhwc: the CPU backend stores 4-D activations NHWC (CpuBackend::store_nhwc); type: the activations' element type.
FusionRun run_fused_or_not(const std::vector<LayerSpec>& layers, model::Shape input, const std::vector<float>& x,
                           const std::vector<int32_t>& labels, bool fuse, int eval_batch, bool nhwc = false,
                           kernels::ElementType type = kernels::ElementType::f32) {
  backend::CpuBackend cpu(1);
  cpu.store_nhwc(nhwc);
  model::Network net(layers, cpu, input, 3, {.share_memory = true, .fuse = fuse, .budget = {}, .activations = type});
  const auto params = net.initial_params(4), states = net.initial_states();
  std::copy(params.begin(), params.end(), net.params());
  std::copy(states.begin(), states.end(), net.states());
  std::fill(net.grads(), net.grads() + net.param_count(), 0.0f);
  FusionRun r{net.summary(), {}, {}, {}, {}};
  float* const images = const_cast<float*>(x.data());
  const auto logits = net.forward({images, input}, model::Mode::train, 1);
  r.train_logits.assign(logits.as<float>(), logits.as<float>() + logits.shape.elements());
  std::vector<float> dlogits(r.train_logits.size());
  loss_of(net, logits, labels, dlogits.data());
  net.backward({dlogits.data(), logits.shape}, nullptr);
  r.grads.assign(net.grads(), net.grads() + net.param_count());
  r.states.assign(net.states(), net.states() + net.state_count());
  const auto eval = net.forward({images, input.with_batch(eval_batch)}, model::Mode::eval, 2);
  r.eval_logits.assign(eval.as<float>(), eval.as<float>() + eval.shape.elements());
  return r;
}

// A backend may store 4-D activations NHWC (Backend::activation_layout; the CUDA backend's 16-bit path is to): the
// network then reorders its input into it, flatten reorders out of it, and every layer's output lives NHWC. Run so
// on the CPU twin (whose kernels run NCHW between reorders), a network of convolutions, batch norms (fused with their
// ReLU and pool, or their ReLU6, or not), a residual block, pools, dropout on 4-D activations (its draw follows each
// element's NCHW position, not where it is stored) and flatten gives the NCHW run's bits: logits in training and
// evaluation (a smaller batch), every gradient, the running statistics; in fp32 and in bf16; and so does a ViT's
// token path.
TEST(Network, StoringActivationsNhwcChangesNoNumber) {
  auto dropout = layer("dropout");
  dropout.values["rate"] = 0.25;
  auto block = layer("residual");
  block.body = {layer("conv2d", 4, 3, 1, 1), layer("batchnorm"), layer("relu"),
                layer("conv2d", 4, 3, 1, 1), layer("batchnorm")};
  // 14x14 -> 7x7 (average pool) -> 4x4 (stride 2) -> 2x2 (fused or not max pool): flatten, or a dense layer on
  // the 4 x 2x2 values themselves, reorders them.
  std::vector<LayerSpec> layers{layer("conv2d", 4, 3, 1, 1), layer("batchnorm"),
                                layer("relu"), layer("avgpool", 2), dropout, block,
                                layer("conv2d", 4, 1, 1, 0), layer("batchnorm"), layer("relu6"),
                                layer("conv2d", 6, 3, 2, 1), layer("batchnorm"),
                                layer("relu"), layer("maxpool", 2),
                                layer("conv2d", 4, 1, 1, 0), layer("flatten"),
                                layer("dense", 8), layer("relu"), layer("dense", 3)};
  std::vector<LayerSpec> without_flatten = layers;
  without_flatten.erase(without_flatten.end() - 4);
  const model::Shape input{4, 3, 14, 14};
  const std::vector<float> x = normal_values(input.elements(), 6, 0.5f);
  const std::vector<int32_t> labels{0, 2, 1, 2};
  for (const auto& model_layers : {layers, without_flatten, token_net()}) {
    for (const auto type : {kernels::ElementType::f32, kernels::ElementType::bf16})
      for (const bool fuse : {false, true}) {
        SCOPED_TRACE(std::string(kernels::element_type_name(type)) + (fuse ? ", fused" : ", apart") +
                     (model_layers.size() < layers.size() ? ", dense on 4-D" : ", flatten"));
        const FusionRun nchw = run_fused_or_not(model_layers, input, x, labels, fuse, input.n - 1, false, type),
                        nhwc = run_fused_or_not(model_layers, input, x, labels, fuse, input.n - 1, true, type);
        EXPECT_EQ(nhwc.summary, nchw.summary);
        EXPECT_EQ(nhwc.train_logits, nchw.train_logits);
        EXPECT_EQ(nhwc.eval_logits, nchw.eval_logits);
        EXPECT_EQ(nhwc.states, nchw.states);
        EXPECT_EQ(nhwc.grads, nchw.grads);
        EXPECT_GT(std::count_if(nhwc.grads.begin(), nhwc.grads.end(), [](float g) { return g != 0.0f; }), 100);
      }
  }
}

// A network storing its activations in bf16 or fp16 (mixed precision) takes fp32 input and gives fp32 logits and
// takes their fp32 gradient, converting at its boundary; inside, every layer, residual join and gradient sum runs
// on 16-bit tensors. Against fp32 storage from the same start: logits and gradients within the type's rounding
// compounded over a dozen layers (measured 0.7 % and 1.4 % of the largest for bf16, bounded at 3 %; 0.11 % and
// 0.08 % for fp16, bounded at 0.3 %), less activation memory, and the same bits on a second run.
TEST(Network, SixteenBitActivationsMeetFp32AtTheBoundary) {
  const std::vector<LayerSpec> layers = residual_net({layer("flatten"), layer("dense", 3)});
  const model::Shape input{5, 2, 6, 6};
  const std::vector<float> x = normal_values(input.elements(), 31, 1.0f);
  const std::vector<int32_t> labels{0, 1, 2, 1, 0};
  struct Run {
    std::vector<float> logits, grads;
    double activation_bytes = 0;
  };
  const auto run = [&](kernels::ElementType type) {
    backend::CpuBackend cpu(1);
    model::Network net(layers, cpu, input, 3, {.share_memory = true, .fuse = true, .budget = {}, .activations = type});
    const auto params = net.initial_params(4), states = net.initial_states();
    std::copy(params.begin(), params.end(), net.params());
    std::copy(states.begin(), states.end(), net.states());
    std::fill(net.grads(), net.grads() + net.param_count(), 0.0f);
    const auto logits = net.forward({const_cast<float*>(x.data()), input}, model::Mode::train, 1);
    EXPECT_EQ(logits.type, kernels::ElementType::f32);
    Run r{{logits.as<float>(), logits.as<float>() + logits.shape.elements()}, {}, net.memory_need().activations};
    std::vector<float> dlogits(r.logits.size());
    loss_of(net, logits, labels, dlogits.data());
    net.backward({dlogits.data(), logits.shape}, nullptr);
    r.grads.assign(net.grads(), net.grads() + net.param_count());
    return r;
  };
  const auto largest_difference = [](const std::vector<float>& a, const std::vector<float>& b) {
    return ringtrain::testing::largest_difference(a, b).relative();
  };
  const Run fp32 = run(kernels::ElementType::f32);
  for (const auto& [type, bound] :
       {std::pair{kernels::ElementType::bf16, 3e-2}, std::pair{kernels::ElementType::f16, 3e-3}}) {
    SCOPED_TRACE(kernels::element_type_name(type));
    const Run half = run(type);
    EXPECT_NE(half.logits, fp32.logits) << "activations should round";
    EXPECT_LE(largest_difference(half.logits, fp32.logits), bound);
    EXPECT_LE(largest_difference(half.grads, fp32.grads), bound);
    EXPECT_LT(half.activation_bytes, fp32.activation_bytes);
    const Run again = run(type);
    EXPECT_EQ(again.logits, half.logits);
    EXPECT_EQ(again.grads, half.grads);
  }
}

// A backend that stores activations in fp32 only (the CUDA backend today) is never handed a 16-bit network.
TEST(Network, ABackendWithoutTheElementTypeIsRefusedBeforeAnythingRuns) {
  struct Fp32Only final : backend::CpuBackend {
    using CpuBackend::CpuBackend;
    bool stores_activations_in(kernels::ElementType type) const override { return type == kernels::ElementType::f32; }
  } cpu(1);
  try {
    model::Network net({layer("dense", 3)}, cpu, {2, 4, 1, 1}, 3,
                       {.share_memory = true, .fuse = true, .budget = {}, .activations = kernels::ElementType::bf16});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stores no bf16 activations"), std::string::npos) << e.what();
  }
}

// The layer profile says how each convolution runs (Network::methods): the CPU backend names oneDNN's implementation
// where oneDNN runs it (16 or more input channels), the direct kernel on one thread for a few-channel stride-1 layer
// (in an AVX-512 build) and im2col + OpenBLAS elsewhere; identical lines count once.
TEST(Network, MethodsNameHowTheBackendRunsEachConvolution) {
  backend::CpuBackend cpu(1);
  const bool direct = kernels::cpu::conv2d_direct_takes({2, 1, 8, 8, 16, 3, 3, 1, 1});
  const std::vector<LayerSpec> layers{layer("conv2d", 16, 3, 1, 1), layer("conv2d", 16, 3, 1, 1),
                                      layer("conv2d", 16, 3, 1, 1), layer("flatten"),
                                      layer("dense", 3)};
  const model::Network net(layers, cpu, {2, 1, 8, 8}, 3);
  const std::string methods = net.methods();
  EXPECT_NE(methods.find(direct ? " 1x8x8 in: direct kernel; im2col + OpenBLAS SGEMM for the data gradient\n"
                                 : " 1x8x8 in: im2col + OpenBLAS SGEMM\n"),
            std::string::npos)
      << methods;
  EXPECT_NE(methods.find("16x8x8 in: oneDNN "), std::string::npos) << methods;
  EXPECT_NE(methods.find(" (x2)\n"), std::string::npos) << methods;
  EXPECT_EQ(methods.find("dense"), std::string::npos) << "a layer with nothing to tell is left out: " << methods;
}

// The fusion pass: batch norm takes on the ReLU or the ReLU6 right after it in its chain, and a 2x2/2 max pool after
// a ReLU (here on 7 x 7 planes, whose last row and column are in no window), a residual body's last batch norm takes
// on the join (its add and ReLU), and nothing else fuses (a ReLU after a convolution or a dense layer, a batch norm
// before a pool). Fused or not, logits in training and in evaluation, every gradient and the
// running statistics are the same bits.
TEST(Network, FusingBatchNormWithItsReluAndPoolChangesNoNumber) {
  auto block = layer("residual");
  block.body = {layer("conv2d", 4, 3, 1, 1), layer("batchnorm"), layer("relu"),
                layer("conv2d", 4, 3, 1, 1), layer("batchnorm")};  // bn with the join
  const std::vector<LayerSpec> layers{layer("conv2d", 4, 3, 1, 1), layer("batchnorm"),
                                      layer("relu"),  // fuses
                                      block,
                                      layer("conv2d", 4, 1, 1, 0), layer("batchnorm"),
                                      layer("relu6"),  // fuses
                                      layer("conv2d", 4, 3, 1, 1), layer("batchnorm"),
                                      layer("relu"), layer("maxpool", 2),  // all three fuse
                                      layer("conv2d", 4, 3, 1, 1), layer("relu"),  // does not
                                      layer("batchnorm"), layer("maxpool", 2),    // does not
                                      layer("flatten"), layer("dense", 8), layer("relu"),
                                      layer("dense", 3)};
  const model::Shape input{4, 2, 7, 7};
  const std::vector<float> x = normal_values(input.elements(), 5, 0.5f);  // a mean off zero: the ReLUs cut a good share
  const std::vector<int32_t> labels{0, 2, 1, 2};

  const FusionRun apart = run_fused_or_not(layers, input, x, labels, false, input.n),
                  fused = run_fused_or_not(layers, input, x, labels, true, input.n);
  const auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(fused.summary, "batchnorm + relu, fused"), 2u) << fused.summary;  // the first, the block's first
  EXPECT_EQ(count(fused.summary, "batchnorm + relu + maxpool 2 s2, fused"), 1u) << fused.summary;
  EXPECT_EQ(count(fused.summary, "batchnorm + add shortcut + relu, fused"), 1u) << fused.summary;
  EXPECT_EQ(count(fused.summary, "batchnorm + relu6, fused"), 1u) << fused.summary;
  EXPECT_EQ(count(apart.summary, "fused"), 0u) << apart.summary;
  EXPECT_EQ(fused.train_logits, apart.train_logits);
  EXPECT_EQ(fused.eval_logits, apart.eval_logits);
  EXPECT_EQ(fused.states, apart.states);
  ASSERT_EQ(fused.grads.size(), apart.grads.size());
  for (size_t i = 0; i < fused.grads.size(); ++i) ASSERT_EQ(fused.grads[i], apart.grads[i]) << "gradient " << i;
  EXPECT_GT(std::count_if(fused.grads.begin(), fused.grads.end(), [](float g) { return g != 0.0f; }), 100);
}

// In bf16 and fp16 too, a fused pool gives the pool's winners apart: its windows compare the activated values as
// stored, so values that round to one 16-bit value tie and the first wins, as in the pool apart (and on a GPU, which
// does not fuse the pool). Picked among the fp32 values, 143 of this case's bf16 gradients and 58 of its fp16 ones
// differed. NCHW: 8 channels, below oneDNN's convolutions (whose blocked 16-bit kernels are not the plain ones' bits).
TEST(Network, A16BitFusedPoolPicksTheWinnersOfThePoolApart) {
  for (const auto type : {kernels::ElementType::bf16, kernels::ElementType::f16}) {
    SCOPED_TRACE(kernels::element_type_name(type));
    const std::vector<LayerSpec> layers{layer("conv2d", 8, 3, 1, 1), layer("batchnorm"), layer("relu"),
                                        layer("maxpool", 2), layer("flatten"), layer("dense", 3)};
    const model::Shape input{16, 3, 32, 32};
    const std::vector<float> x = normal_values(input.elements(), 7, 0.5f);
    std::vector<int32_t> labels(static_cast<std::size_t>(input.n));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 3);
    const FusionRun apart = run_fused_or_not(layers, input, x, labels, false, input.n, false, type),
                    fused = run_fused_or_not(layers, input, x, labels, true, input.n, false, type);
    ASSERT_NE(fused.summary.find("batchnorm + relu + maxpool 2 s2, fused"), std::string::npos) << fused.summary;
    EXPECT_EQ(fused.train_logits, apart.train_logits);
    EXPECT_EQ(fused.states, apart.states);
    ASSERT_EQ(fused.grads.size(), apart.grads.size());
    for (std::size_t i = 0; i < fused.grads.size(); ++i) ASSERT_EQ(fused.grads[i], apart.grads[i]) << "gradient " << i;
  }
}

// A convolution on oneDNN hands the batch norm after it its output in oneDNN's blocked layout (and takes the
// gradient back so) where the batch norm took on a ReLU and a pool, and that batch norm hands the convolution after
// it its pooled output so; a batch norm alone or with its ReLU only, and a convolution whose output goes to a
// residual join, keep NCHW. Blocked or not, the same bits: training and evaluation logits (evaluation at a smaller
// batch, as the last test batch is), every gradient, the running statistics.
TEST(Network, ConvolutionsAndBatchNormsPassBlockedLayoutsWithTheSameBits) {
  auto block = layer("residual");
  block.body = {layer("conv2d", 16, 3, 1, 1), layer("batchnorm"), layer("relu"),
                layer("conv2d", 16, 3, 1, 1)};  // into the join: stays NCHW
  const std::vector<LayerSpec> layers{layer("conv2d", 16, 3, 1, 1), layer("relu"),
                                      layer("conv2d", 32, 3, 1, 1), layer("batchnorm"),
                                      layer("relu"), layer("maxpool", 2),  // + relu + pool
                                      layer("conv2d", 16, 3, 1, 1),  // blocked in, NCHW out
                                      layer("batchnorm"),            // alone
                                      block,
                                      layer("flatten"), layer("dense", 3)};
  const model::Shape input{6, 3, 10, 10};
  const std::vector<float> x = normal_values(input.elements(), 21, 0.3f);
  const std::vector<int32_t> labels{0, 2, 1, 2, 0, 1};
  const FusionRun apart = run_fused_or_not(layers, input, x, labels, false, 4),
                  blocked = run_fused_or_not(layers, input, x, labels, true, 4);
  backend::CpuBackend probe(1);
  const int offered = probe.conv2d_output_block({6, 16, 10, 10, 32, 3, 3, 1, 1});
  const int read = probe.conv2d_input_block({6, 32, 5, 5, 16, 3, 3, 1, 1});
  const auto count = [&](const std::string& tag) {
    size_t n = 0;
    for (size_t at = blocked.summary.find(tag); at != std::string::npos; at = blocked.summary.find(tag, at + 1)) ++n;
    return n;
  };
  if (offered > 1 && read == offered) {
    const std::string tag = kernels::blocked_layout_name(offered, 32);  // NHWC where oneDNN runs it so
    // The convolution before batch norm + ReLU + pool, and that batch norm, write blocked; the next one reads it.
    EXPECT_EQ(count("-> " + tag), 2u) << blocked.summary;
    EXPECT_EQ(count(tag + " in"), 1u) << blocked.summary;
  } else if (offered > 1) {
    EXPECT_EQ(count("-> " + kernels::blocked_layout_name(offered, 32)), 1u) << blocked.summary;
  } else {
    std::printf("this CPU's oneDNN writes no blocked layout for the convolution: only the NCHW path ran\n");
  }
  EXPECT_EQ(apart.summary.find("-> nChw"), std::string::npos) << apart.summary;
  EXPECT_EQ(apart.summary.find("-> NHWC"), std::string::npos) << apart.summary;
  EXPECT_EQ(blocked.train_logits, apart.train_logits);
  EXPECT_EQ(blocked.eval_logits, apart.eval_logits);
  EXPECT_EQ(blocked.states, apart.states);
  ASSERT_EQ(blocked.grads.size(), apart.grads.size());
  for (size_t i = 0; i < blocked.grads.size(); ++i) ASSERT_EQ(blocked.grads[i], apart.grads[i]) << "gradient " << i;
}

}  // namespace

// A CPU backend whose convolutions ask for scratch, as cuDNN's do, and fill it with NaN before and after they
// run: if the memory plan let a step's scratch share memory with anything live at that step (its input, its
// output, a tensor kept for backward), the numbers would change.
class ScratchPoisoningCpu final : public backend::CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  model::ScratchBytes conv2d_prepare(const model::Conv2dShape& s) override {
    CpuBackend::conv2d_prepare(s);
    const auto input_bytes = static_cast<std::size_t>(s.batch) * s.in_channels * s.in_h * s.in_w * sizeof(float);
    return {.forward = input_bytes, .backward = 2 * input_bytes};
  }
  void conv2d_forward(const model::Conv2dShape& s, const void* x, const float* w, const float* bias, void* y,
                      model::Scratch scratch) override {
    poison(scratch);
    CpuBackend::conv2d_forward(s, x, w, bias, y, scratch);
    poison(scratch);
  }
  void conv2d_backward(const model::Conv2dShape& s, const void* x, const void* dy, const float* w, void* dx,
                       float* dw, float* dbias, model::Scratch scratch) override {
    poison(scratch);
    CpuBackend::conv2d_backward(s, x, dy, w, dx, dw, dbias, scratch);
    poison(scratch);
  }
  int poisoned = 0;

 private:
  void poison(model::Scratch scratch) {
    ASSERT_NE(scratch.data, nullptr) << "a convolution that asked for scratch got none";
    std::fill_n(static_cast<float*>(scratch.data), scratch.bytes / sizeof(float), std::nanf(""));
    ++poisoned;
  }
};

TEST(Network, ScratchInTheArenaOverlapsNothingLiveAtItsStep) {
  const std::vector<LayerSpec> layers =
      residual_net({layer("conv2d", 6, 3, 2, 1), layer("relu"), layer("flatten"),
                    layer("dense", 3)});
  const model::Shape input{3, 2, 8, 8};
  std::vector<float> x = normal_values(input.elements(), 11);
  const std::vector<int32_t> labels{2, 0, 1};

  struct Result {
    std::vector<float> logits, grads;
    std::string memory;
    int64_t arena_bytes = 0;
  };
  auto run = [&](backend::CpuBackend& cpu) {
    model::Network net(layers, cpu, input, 3);
    const auto params = net.initial_params(6), states = net.initial_states();
    std::copy(params.begin(), params.end(), net.params());
    std::copy(states.begin(), states.end(), net.states());
    std::fill(net.grads(), net.grads() + net.param_count(), 0.0f);
    Result r;
    for (uint64_t step = 1; step <= 2; ++step) {  // twice: the second pass finds the buffers holding the first's
      const auto logits = net.forward({x.data(), input}, model::Mode::train, step);
      r.logits.assign(logits.as<float>(), logits.as<float>() + logits.shape.elements());
      std::vector<float> dlogits(r.logits.size());
      loss_of(net, logits, labels, dlogits.data());
      net.backward({dlogits.data(), logits.shape}, nullptr);
    }
    r.grads.assign(net.grads(), net.grads() + net.param_count());
    r.memory = net.memory_plan().summary();
    r.arena_bytes = net.memory_plan().arena_bytes();
    for (const auto& b : net.memory_plan().buffers()) {
      if (b.scratch) {
        EXPECT_EQ(b.first, b.last) << "scratch lives for its step alone";
      }
    }
    return r;
  };
  backend::CpuBackend plain(1);
  ScratchPoisoningCpu poisoning(1);
  const Result without = run(plain), with = run(poisoning);
  EXPECT_EQ(poisoning.poisoned, 4 * 2 * 2 * 2) << "4 convolutions, forward and backward, 2 steps, before and after";
  EXPECT_EQ(without.logits, with.logits);
  ASSERT_EQ(without.grads.size(), with.grads.size());
  for (size_t i = 0; i < with.grads.size(); ++i) ASSERT_EQ(without.grads[i], with.grads[i]) << "gradient " << i;
  EXPECT_NE(with.memory.find("8 scratch"), std::string::npos) << with.memory;
  EXPECT_EQ(without.memory.find("scratch"), std::string::npos) << without.memory;
  EXPECT_GE(with.arena_bytes, without.arena_bytes);
}
