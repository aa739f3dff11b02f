// Proves how the CPU twin's activation layout is chosen and used (run.cpu_layout): under auto, NHWC only for a model
// of which no layer would run between reorders (batch norm, grouped convolutions) and whose products run in bf16 on
// oneDNN or, with fp32 tensors, are all over positions or patches; the key's nchw and nhwc as asked. With NHWC stored
// and native convolutions, oneDNN convolutions read the tensors as stored and pointwise ones run as matrix products
// over the positions; staged, neither; patch embeddings run as matrix products over their patches where pointwise
// ones do (test_layers' cpu_nhwc_native and cpu_bf16_nhwc_native cases check the numbers of both routes against the
// double reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_setup.h"
#include "config/job_config.h"
#include "model/network.h"
#include "tests/core/layer_specs.h"
#include "tests/support/largest_difference.h"

using namespace ringtrain;
using test_specs::layer;
using test_specs::residual;

namespace {

config::JobConfig job_of(std::vector<config::LayerSpec> layers, config::CpuLayout layout = config::CpuLayout::auto_detect) {
  config::JobConfig job;
  job.model.layers = std::move(layers);
  job.run.cpu_layout = layout;
  return job;
}

config::LayerSpec grouped_conv(int filters, int groups) {
  config::LayerSpec conv = layer("conv2d", filters, 3, 1, 1);
  conv.values["groups"] = int64_t{groups};
  return conv;
}

TEST(CpuLayout, AutoStoresNhwcForBf16ModelsWithoutBatchNormOrGroupedConvolutions) {
  const std::vector<config::LayerSpec> tokens{
      layer("conv2d", 32, 4, 4, 0), residual({layer("conv2d", 64, 1), layer("gelu"), layer("conv2d", 32, 1)}),
      layer("flatten"), layer("dense", 10)};
  EXPECT_TRUE(backend::cpu_stores_nhwc(job_of(tokens), true));

  auto with_norm = tokens;
  with_norm.at(1).body.push_back(layer("batchnorm"));
  EXPECT_FALSE(backend::cpu_stores_nhwc(job_of(with_norm), true)) << "a batch norm inside a residual body";
  auto with_norm_in_shortcut = tokens;
  with_norm_in_shortcut.at(1).shortcut = {layer("conv2d", 32, 1), layer("batchnorm")};
  EXPECT_FALSE(backend::cpu_stores_nhwc(job_of(with_norm_in_shortcut), true)) << "a batch norm in a shortcut";
  auto with_depthwise = tokens;
  with_depthwise.insert(with_depthwise.begin() + 1, grouped_conv(32, 32));
  EXPECT_FALSE(backend::cpu_stores_nhwc(job_of(with_depthwise), true)) << "a depthwise convolution";
  auto with_ungrouped = tokens;
  with_ungrouped.insert(with_ungrouped.begin() + 1, grouped_conv(32, 1));
  EXPECT_TRUE(backend::cpu_stores_nhwc(job_of(with_ungrouped), true)) << "groups = 1 is an ordinary convolution";
}

TEST(CpuLayout, AutoStoresNhwcForFp32TokenModelsOnly) {
  const std::vector<config::LayerSpec> tokens{
      layer("conv2d", 32, 4, 4, 0), residual({layer("conv2d", 64, 1), layer("gelu"), layer("conv2d", 32, 1)}),
      layer("flatten"), layer("dense", 10)};
  EXPECT_TRUE(backend::cpu_stores_nhwc(job_of(tokens), false)) << "a patch embedding and pointwise convolutions";
  auto tf32 = job_of(tokens);
  tf32.train.precision = config::Precision::tf32;
  EXPECT_TRUE(backend::cpu_stores_nhwc(tf32, false)) << "tf32 keeps fp32 tensors on the CPU";
  auto rounded = job_of(tokens);
  rounded.train.precision = config::Precision::fp16;
  EXPECT_FALSE(backend::cpu_stores_nhwc(rounded, false)) << "fp16 tensors, products on rounded fp32 operands";

  auto padded = tokens;
  padded.insert(padded.begin() + 1, layer("conv2d", 32, 3, 1, 1));
  EXPECT_FALSE(backend::cpu_stores_nhwc(job_of(padded), false)) << "a 3x3 convolution";
  auto overlapping = tokens;
  overlapping.at(0) = layer("conv2d", 32, 4, 2, 0);
  EXPECT_FALSE(backend::cpu_stores_nhwc(job_of(overlapping), false)) << "a strided convolution whose windows overlap";
  auto pooled = tokens;
  pooled.at(1).body.push_back(layer("maxpool", 2));
  EXPECT_FALSE(backend::cpu_stores_nhwc(job_of(pooled), false)) << "pooling inside a residual body";
  EXPECT_TRUE(backend::cpu_stores_nhwc(job_of(padded), true)) << "bf16 products: any convolution oneDNN runs";
}

TEST(CpuLayout, TheKeyOverridesTheRule) {
  const std::vector<config::LayerSpec> normed{layer("conv2d", 16, 3, 1, 1), layer("batchnorm"), layer("relu")};
  EXPECT_TRUE(backend::cpu_stores_nhwc(job_of(normed, config::CpuLayout::nhwc), false));
  EXPECT_FALSE(backend::cpu_stores_nhwc(job_of({layer("dense", 4)}, config::CpuLayout::nchw), true));
  EXPECT_EQ(config::JobConfig().run.cpu_layout, config::CpuLayout::auto_detect);
}

// The route each convolution takes, as the layer profile prints it.
TEST(CpuLayout, NativeNhwcConvolutionsRunOnOneDnnAsStored) {
  model::Conv2dShape pointwise{.batch = 2, .in_channels = 32, .in_h = 7, .in_w = 7, .filters = 64, .kernel_h = 1,
                               .kernel_w = 1};
  model::Conv2dShape spatial = pointwise;
  spatial.kernel_h = spatial.kernel_w = 3, spatial.padding = 1;
  model::Conv2dShape few_channels = spatial;
  few_channels.in_channels = 3;
  model::Conv2dShape patches = few_channels;
  patches.in_h = patches.in_w = 8, patches.kernel_h = patches.kernel_w = patches.stride = 4, patches.padding = 0;

  backend::CpuBackend native(1), staged(1);
  native.store_nhwc(true, backend::CpuBackend::NhwcConvolutions::native);
  staged.store_nhwc(true);
  EXPECT_EQ(native.conv2d_method(pointwise), "oneDNN matmul over the NHWC positions");
  EXPECT_EQ(native.conv2d_method(spatial).rfind("oneDNN on NHWC ", 0), 0u) << native.conv2d_method(spatial);
  EXPECT_EQ(native.conv2d_method(few_channels).find("NHWC"), std::string::npos)
      << "few input channels stay on im2col, between reorders";
  for (const auto& s : {pointwise, spatial})
    EXPECT_EQ(staged.conv2d_method(s).find("NHWC"), std::string::npos) << staged.conv2d_method(s);
  EXPECT_EQ(native.conv2d_method(patches), "oneDNN matmul over the NHWC patches");
  EXPECT_EQ(staged.conv2d_method(patches).find("patches"), std::string::npos) << staged.conv2d_method(patches);
  EXPECT_EQ(native.conv2d_output_block(spatial), 1) << "NHWC is the layout between layers, never a channel block";
}

// NCHW in bf16 on oneDNN, a pointwise convolution over planes of at most 4 positions runs as a product over them
// between reorders (no channel blocks around it); a larger plane stays on oneDNN's convolution.
TEST(CpuLayout, Bf16PointwiseConvolutionsOverTinyPlanesRunAsProducts) {
  if (!kernels::cpu::DnnlOps::bf16_available()) GTEST_SKIP() << "this CPU has no AVX512_BF16: no oneDNN bf16 products";
  backend::CpuBackend bf16(1, kernels::cpu::DnnlMath::bf16, kernels::cpu::OperandRounding::none), fp32(1);
  model::Conv2dShape tiny{.batch = 32, .in_channels = 320, .in_h = 2, .in_w = 2, .filters = 1280, .kernel_h = 1,
                          .kernel_w = 1};
  tiny.data = kernels::ElementType::bf16;
  model::Conv2dShape larger = tiny;
  larger.in_h = larger.in_w = 4;
  EXPECT_EQ(bf16.conv2d_method(tiny), "oneDNN matmul over the positions, between NHWC reorders");
  EXPECT_EQ(bf16.conv2d_output_block(tiny), 1);
  EXPECT_EQ(bf16.conv2d_input_block(tiny), 1);
  EXPECT_EQ(bf16.conv2d_method(larger).find("positions"), std::string::npos) << bf16.conv2d_method(larger);
  tiny.data = kernels::ElementType::f32;
  EXPECT_EQ(fp32.conv2d_method(tiny).find("positions"), std::string::npos) << "fp32: oneDNN's convolution";
}

// The run header names the layout the twin chose (Backend::description).
TEST(CpuLayout, TheBackendDescriptionNamesTheLayout) {
  backend::CpuBackend nchw(1), native(1);
  native.store_nhwc(true, backend::CpuBackend::NhwcConvolutions::native);
  EXPECT_EQ(nchw.description().find("NHWC"), std::string::npos) << nchw.description();
  EXPECT_NE(native.description().find("activations NHWC (run.cpu_layout)"), std::string::npos) << native.description();
}

// A small ViT (16-pixel patches of 3 channels on oneDNN, two encoder blocks whose 1x1 convolutions read 32 channels)
// trained one step with the token path NHWC and native convolutions gives the NCHW run's logits and gradients to
// within fp32 rounding of their reordered sums: the input boundary, the token views and the readout agree.
struct StepResult {
  std::vector<float> logits, grads;
};
StepResult one_step(backend::CpuBackend& cpu) {
  const auto mha = config::layer_spec("multi_head_attention", {{"heads", 2}}, "test");
  const std::vector<config::LayerSpec> vit{
      layer("conv2d", 32, 4, 4, 0), layer("tokens"), layer("class_token"), layer("position_embedding"),
      residual({layer("layer_norm"), mha}, {}, false),
      residual({layer("layer_norm"), layer("conv2d", 64, 1), layer("gelu"), layer("conv2d", 32, 1)}, {}, false),
      layer("layer_norm"), layer("class_token_output"), layer("flatten"), layer("dense", 3)};
  const model::Shape input{4, 3, 8, 8};
  model::Network net(vit, cpu, input, 3);
  const auto params = net.initial_params(5);
  std::copy(params.begin(), params.end(), net.params());
  std::fill(net.grads(), net.grads() + net.param_count(), 0.0f);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(input.elements()));
  for (auto& v : x) v = normal(rng);
  const auto logits = net.forward({x.data(), input}, model::Mode::train, 1);
  StepResult r{{logits.as<float>(), logits.as<float>() + logits.shape.elements()}, {}};
  std::vector<float> dlogits(r.logits.size());
  const std::vector<int32_t> labels{0, 2, 1, 2};
  model::LossTotals totals;
  cpu.softmax_cross_entropy(input.n, 3, logits.as<float>(), labels.data(), {}, dlogits.data(), &totals);
  net.backward({dlogits.data(), logits.shape}, nullptr);
  r.grads.assign(net.grads(), net.grads() + net.param_count());
  return r;
}

double largest_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  return ringtrain::testing::largest_difference(a, b).relative();
}

TEST(CpuLayout, AVisionTransformerStepOnNativeNhwcMatchesNchw) {
  backend::CpuBackend nchw(1), nhwc(1);
  nhwc.store_nhwc(true, backend::CpuBackend::NhwcConvolutions::native);
  const StepResult want = one_step(nchw), got = one_step(nhwc);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  ASSERT_EQ(got.grads.size(), want.grads.size());
  EXPECT_LE(largest_relative_difference(got.logits, want.logits), 1e-5);
  EXPECT_LE(largest_relative_difference(got.grads, want.grads), 1e-4);
  EXPECT_GT(std::count_if(got.grads.begin(), got.grads.end(), [](float g) { return g != 0.0f; }), 1000);
  EXPECT_NE(got.grads, want.grads) << "the native route should run other kernels than the NCHW one";
}

}  // namespace
