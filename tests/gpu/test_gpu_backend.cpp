// Tests of the CUDA backend's own pieces against the CPU backend: device choice, version report, memory and
// copies, element-wise work, layer normalisation, input normalisation, the loss and the optimizer update. Device
// choice, the version report and the no-device error run without a GPU; the rest skip when none is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <span>

#include "backend/cuda/cuda_versions.h"
#include "backend/cuda/nccl_reducer.h"
#include "common/error.h"
#include "dist/batch_statistics_group.h"
#include "kernels/cuda/diagnostics.h"
#include "gpu_test_support.h"

namespace ringtrain::gpu_test {
namespace {

using backend::choose_device;

TEST(ChooseDevice, OneVisibleDeviceIsAlwaysDeviceZero) {
  EXPECT_EQ(choose_device(1, 0, 1, "n1"), 0);
  EXPECT_EQ(choose_device(1, 3, 4, "n1"), 0);  // Slurm binding: each task sees only its GPU
}

TEST(ChooseDevice, EveryGpuVisibleMeansLocalRank) {
  EXPECT_EQ(choose_device(4, 0, 4, "n1"), 0);
  EXPECT_EQ(choose_device(4, 3, 4, "n1"), 3);
  EXPECT_EQ(choose_device(8, 1, 2, "n1"), 1);
}

TEST(ChooseDevice, MoreRanksThanGpusIsAJobFileErrorNamingHostAndCounts) {
  try {
    choose_device(2, 1, 4, "node07");
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("node07"), std::string::npos) << m;
    EXPECT_NE(m.find("4 ranks"), std::string::npos) << m;
    EXPECT_NE(m.find("only 2 GPUs"), std::string::npos) << m;
  }
  EXPECT_THROW(choose_device(0, 0, 1, "node07"), JobFileError);
}

// gpu.share_device (tests only): more ranks than GPUs share them round-robin, each its own host to NCCL.
TEST(ChooseDevice, SharingOptInSpreadsRanksOverTheGpus) {
  EXPECT_EQ(choose_device(1, 3, 4, "n1", true), 0);
  EXPECT_EQ(choose_device(2, 3, 4, "n1", true), 1);
  EXPECT_EQ(choose_device(2, 2, 4, "n1", true), 0);
  EXPECT_EQ(choose_device(4, 3, 4, "n1", true), 3) << "enough GPUs: sharing changes nothing";
  EXPECT_THROW(choose_device(0, 0, 2, "n1", true), JobFileError);
  EXPECT_NE(backend::emulated_host_id("n1", 0), backend::emulated_host_id("n1", 1));
  EXPECT_EQ(backend::emulated_host_id("n1", 3), "n1/rank3");
}

TEST(CudaVersions, ReportEveryLibraryWithoutThrowing) {
  std::map<std::string, std::string> v;
  for (auto& [name, version] : backend::cuda_versions()) v[name] = version;
  for (const char* name :
       {"CUDA runtime", "CUDA driver", "cuDNN", "cudnn-frontend", "cuBLAS", "NCCL", "nvJPEG", "GPUs"}) {
    ASSERT_TRUE(v.count(name)) << name;
    EXPECT_FALSE(v[name].empty()) << name;
  }
  EXPECT_EQ(v["cuDNN"].substr(0, 2), "9.");
  EXPECT_EQ(v["NCCL"].substr(0, 2), "2.");
#ifdef RINGTRAIN_HAVE_NVJPEG
  EXPECT_EQ(v["nvJPEG"].substr(0, 3), "13.") << "the library's own query, which needs no device";
#endif
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    EXPECT_EQ(v["CUDA driver"], "no driver");
  }
  EXPECT_EQ(backend::cuda_device_visible(), v["GPUs"].rfind("none visible", 0) != 0) << v["GPUs"];
}

TEST(CudaBackendStart, WithoutADeviceIsAJobFileError) {
  if (backend::cuda_device_visible()) GTEST_SKIP() << "a CUDA device is visible; this checks the message without one";
  try {
    backend::CudaBackend b(0, 1, "node07");
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    EXPECT_NE(std::string(e.what()).find("node07"), std::string::npos) << e.what();
  }
}

class CudaBackendTest : public GpuSuite {};

// 16-bit NHWC convolutions take cuDNN's graph API in all three directions where the build has cudnn-frontend
// (gpu.cudnn_graphs), and the legacy API when it is switched off; the layer tests check their numbers
// (test_layers */cuda_*_nhwc*). On Hopper with cuDNN 9.14 every ResNet-50 shape builds a plan (the fusion probe).
TEST_F(CudaBackendTest, NhwcSixteenBitConvolutionsRunOnCudnnGraphs) {
  std::map<std::string, std::string> versions;
  for (auto& [name, version] : backend::cuda_versions()) versions[name] = version;
  const bool built = versions["cudnn-frontend"].rfind("not built", 0) != 0;
  const model::Conv2dShape shapes[] = {{.batch = 32, .in_channels = 64, .in_h = 28, .in_w = 28, .filters = 64,
                                        .kernel_h = 3, .kernel_w = 3, .stride = 1, .padding = 1},
                                       {.batch = 32, .in_channels = 3, .in_h = 32, .in_w = 32, .filters = 16,
                                        .kernel_h = 7, .kernel_w = 7, .stride = 2, .padding = 3}};
  for (const auto type : {kernels::ElementType::bf16, kernels::ElementType::f16})
    for (const bool graphs : {true, false}) {
      backend::CudaOptions options;
      options.activations = type, options.nhwc = true, options.conv_graphs = graphs;
      options.few_channel_gemm = false;  // the stem shape's 3 channels would take im2col + GEMM
      backend::CudaBackend gpu(0, 1, "test-host", options);
      for (model::Conv2dShape s : shapes) {
        s.data = type;
        const std::string method = gpu.conv2d_method(s);
        SCOPED_TRACE(std::string(kernels::element_type_name(type)) + (graphs ? " graphs: " : " legacy: ") + method);
        std::size_t runs = 0;
        for (std::size_t at = method.find("graph "); at != std::string::npos; at = method.find("graph ", at + 1))
          ++runs;
        EXPECT_EQ(runs, graphs && built ? 3u : 0u);
      }
    }
}

// 16-bit NHWC convolutions on input channels that are not a multiple of 8 run as im2col + GEMM (gpu.few_channel_gemm)
// and the others on cuDNN; the layer tests check the numbers (test_layers */cuda_*_nhwc, the cuDNN path in
// */cuda_bf16_nhwc_legacy). Rows made a chunk of images at a time give every image's output and data gradient the
// same bits whatever the chunk, and the weight gradient the same sum up to its fp32 order.
TEST_F(CudaBackendTest, FewChannelNhwcConvolutionsRunAsGemmInChunks) {
  model::Conv2dShape s{.batch = 5, .in_channels = 3, .in_h = 19, .in_w = 17, .filters = 16, .kernel_h = 7,
                       .kernel_w = 7, .stride = 2, .padding = 3};
  s.data = kernels::ElementType::bf16;
  model::Conv2dShape many = s;
  many.in_channels = 16;
  struct Result {
    std::vector<float> y, dx, dw, dbias;
  };
  const auto run = [&](std::size_t im2col_bytes) {
    backend::CudaOptions options;
    options.activations = s.data, options.nhwc = true, options.im2col_bytes = im2col_bytes;
    backend::CudaBackend gpu(0, 1, "test-host", options);
    EXPECT_NE(gpu.conv2d_method(s).find("im2col + cuBLAS GEMM"), std::string::npos) << gpu.conv2d_method(s);
    EXPECT_EQ(gpu.conv2d_method(many).find("im2col"), std::string::npos) << gpu.conv2d_method(many);
    const int64_t in = int64_t{s.batch} * s.in_h * s.in_w * s.in_channels;
    const int64_t out = int64_t{s.batch} * s.out_h() * s.out_w() * s.filters;
    const auto to16 = [&](const std::vector<float>& v) {
      model::DeviceBuffer wide = upload(v, &gpu), narrow = gpu.allocate(v.size() * 2);
      gpu.cast({static_cast<int64_t>(v.size()), kernels::ElementType::f32}, wide.as<void>(), s.data,
               narrow.as<void>());
      return narrow;
    };
    const auto to32 = [&](const model::DeviceBuffer& narrow, int64_t n) {
      model::DeviceBuffer wide = gpu.allocate(static_cast<std::size_t>(n) * sizeof(float));
      gpu.cast({n, s.data}, narrow.as<void>(), kernels::ElementType::f32, wide.as<void>());
      return download(wide.as<float>(), n, &gpu);
    };
    model::DeviceBuffer x = to16(random_vector(static_cast<size_t>(in), 11));
    model::DeviceBuffer dy = to16(random_vector(static_cast<size_t>(out), 12));
    model::DeviceBuffer w = upload(random_vector(static_cast<size_t>(s.weight_elements()), 13), &gpu);
    model::DeviceBuffer bias = upload(random_vector(static_cast<size_t>(s.filters), 14), &gpu);
    model::DeviceBuffer dw = upload(std::vector<float>(static_cast<size_t>(s.weight_elements()), 0.5f), &gpu);
    model::DeviceBuffer dbias = upload(std::vector<float>(static_cast<size_t>(s.filters), 0.25f), &gpu);
    model::DeviceBuffer y = gpu.allocate(static_cast<std::size_t>(out) * 2);
    model::DeviceBuffer dx = gpu.allocate(static_cast<std::size_t>(in) * 2);
    gpu.conv2d_prepare(s);
    gpu.conv2d_forward(s, x.as<void>(), w.as<float>(), bias.as<float>(), y.as<void>(), {});
    gpu.conv2d_backward(s, x.as<void>(), dy.as<void>(), w.as<float>(), dx.as<void>(), dw.as<float>(),
                        dbias.as<float>(), {});
    return Result{to32(y, out), to32(dx, in), download(dw.as<float>(), s.weight_elements(), &gpu),
                  download(dbias.as<float>(), s.filters, &gpu)};
  };
  const Result whole = run(std::size_t{128} << 20), one_image = run(1);
  EXPECT_EQ(one_image.y, whole.y);
  EXPECT_EQ(one_image.dx, whole.dx);
  EXPECT_EQ(one_image.dbias, whole.dbias);
  EXPECT_TRUE(all_close(one_image.dw, whole.dw, 1e-5, 1e-6));
  EXPECT_NE(whole.dw, std::vector<float>(whole.dw.size(), 0.5f)) << "the weight gradient was added";
}

// Under gpu.candidate_kernels depthwise convolutions run on our kernels (kernels/cuda/depthwise_conv.h): they agree
// with cuDNN's grouped convolution (the proven path), in fp32 NCHW and bf16 and fp16 NHWC, on shapes large enough
// that the filter gradient is cut into many position chunks (the layer tests' planes fit in one), and a second run
// gives the same bits: the chunks' partial sums are added in a fixed order, with no atomics.
TEST_F(CudaBackendTest, CandidateDepthwiseConvolutionsMatchCudnnAndRepeatBitForBit) {
  const model::Conv2dShape shapes[] = {{.batch = 16, .in_channels = 96, .in_h = 28, .in_w = 28, .filters = 96,
                                        .kernel_h = 7, .kernel_w = 7, .stride = 1, .padding = 3, .groups = 96},
                                       {.batch = 16, .in_channels = 40, .in_h = 15, .in_w = 17, .filters = 40,
                                        .kernel_h = 5, .kernel_w = 5, .stride = 2, .padding = 2, .groups = 40},
                                       {.batch = 9, .in_channels = 27, .in_h = 13, .in_w = 13, .filters = 27,
                                        .kernel_h = 3, .kernel_w = 3, .stride = 1, .padding = 1, .groups = 27}};
  struct Result {
    std::vector<float> y, dx, dw, dbias;
  };
  for (const auto type : {kernels::ElementType::f32, kernels::ElementType::bf16, kernels::ElementType::f16}) {
    backend::CudaOptions options;
    options.activations = type, options.nhwc = type != kernels::ElementType::f32;
    backend::CudaBackend cudnn(0, 1, "test-host", options);
    options.candidate_kernels = true;
    backend::CudaBackend candidate(0, 1, "test-host", options);
    for (model::Conv2dShape s : shapes) {
      s.data = type;
      const auto run = [&](backend::CudaBackend& gpu) {
        const std::string method = gpu.conv2d_method(s);
        EXPECT_EQ(method.find("our depthwise kernels") != std::string::npos, &gpu == &candidate) << method;
        const int64_t in = int64_t{s.batch} * s.in_h * s.in_w * s.in_channels;
        const int64_t out = int64_t{s.batch} * s.out_h() * s.out_w() * s.filters;
        const auto stored = [&](const std::vector<float>& v) {
          const kernels::Elements n{static_cast<int64_t>(v.size()), type};
          model::DeviceBuffer wide = upload(v, &gpu), narrow = gpu.allocate(n.bytes());
          gpu.cast({n.n, kernels::ElementType::f32}, wide.as<void>(), type, narrow.as<void>());
          return narrow;
        };
        const auto widened = [&](const model::DeviceBuffer& narrow, int64_t n) {
          model::DeviceBuffer wide = gpu.allocate(static_cast<std::size_t>(n) * sizeof(float));
          gpu.cast({n, type}, narrow.as<void>(), kernels::ElementType::f32, wide.as<void>());
          return download(wide.as<float>(), n, &gpu);
        };
        model::DeviceBuffer x = stored(random_vector(static_cast<size_t>(in), 21));
        model::DeviceBuffer dy = stored(random_vector(static_cast<size_t>(out), 22));
        model::DeviceBuffer w = upload(random_vector(static_cast<size_t>(s.weight_elements()), 23), &gpu);
        model::DeviceBuffer bias = upload(random_vector(static_cast<size_t>(s.filters), 24), &gpu);
        model::DeviceBuffer dw = upload(std::vector<float>(static_cast<size_t>(s.weight_elements()), 0.5f), &gpu);
        model::DeviceBuffer dbias = upload(std::vector<float>(static_cast<size_t>(s.filters), 0.25f), &gpu);
        model::DeviceBuffer y = gpu.allocate(kernels::Elements{out, type}.bytes());
        model::DeviceBuffer dx = gpu.allocate(kernels::Elements{in, type}.bytes());
        gpu.conv2d_prepare(s);
        gpu.conv2d_forward(s, x.as<void>(), w.as<float>(), bias.as<float>(), y.as<void>(), {});
        gpu.conv2d_backward(s, x.as<void>(), dy.as<void>(), w.as<float>(), dx.as<void>(), dw.as<float>(),
                            dbias.as<float>(), {});
        return Result{widened(y, out), widened(dx, in), download(dw.as<float>(), s.weight_elements(), &gpu),
                      download(dbias.as<float>(), s.filters, &gpu)};
      };
      SCOPED_TRACE(std::string(kernels::element_type_name(type)) + " " + std::to_string(s.kernel_h) + "x" +
                   std::to_string(s.kernel_w) + " stride " + std::to_string(s.stride) + " on " +
                   std::to_string(s.in_channels) + " channels");
      const Result proven = run(cudnn), ours = run(candidate), again = run(candidate);
      // 16 bits: both round y and dx to the type, and cuDNN rounds its filter gradient to it before adding it.
      const double rtol = type == kernels::ElementType::f32 ? 1e-4 : 2e-2;
      const double atol = type == kernels::ElementType::f32 ? 1e-4 : 1e-2;
      EXPECT_TRUE(all_close(ours.y, proven.y, rtol, atol)) << "forward";
      EXPECT_TRUE(all_close(ours.dx, proven.dx, rtol, atol)) << "data gradient";
      EXPECT_TRUE(all_close(ours.dw, proven.dw, rtol, atol)) << "filter gradient";
      EXPECT_TRUE(all_close(ours.dbias, proven.dbias, rtol, atol)) << "bias gradient";
      EXPECT_EQ(again.y, ours.y);
      EXPECT_EQ(again.dx, ours.dx);
      EXPECT_EQ(again.dw, ours.dw);
      EXPECT_EQ(again.dbias, ours.dbias);
      EXPECT_NE(ours.dw, std::vector<float>(ours.dw.size(), 0.5f)) << "the filter gradient was added";
    }
  }
}

TEST_F(CudaBackendTest, AllocateIsZeroFilledAndCopiesRoundTrip) {
  model::DeviceBuffer b = cuda().allocate(1000 * sizeof(float));
  EXPECT_EQ(download(b.as<float>(), 1000), std::vector<float>(1000, 0.0f));
  const auto data = random_vector(1000, 1);
  cuda().to_device(b.as<void>(), data.data(), data.size() * sizeof(float));
  EXPECT_EQ(download(b.as<float>(), 1000), data);
  EXPECT_EQ(cuda().name(), "cuda");
  EXPECT_NE(cuda().description().find("GPU"), std::string::npos);
}

TEST_F(CudaBackendTest, StagedUploadsMayReuseTheHostBufferAtOnce) {
  // to_device returns once the source may be overwritten: refill one host vector between three uploads.
  std::vector<model::DeviceBuffer> bufs;
  std::vector<float> host(5000);
  for (int k = 0; k < 3; ++k) {
    std::fill(host.begin(), host.end(), static_cast<float>(k + 1));
    bufs.push_back(cuda().allocate(host.size() * sizeof(float)));
    cuda().to_device(bufs.back().as<void>(), host.data(), host.size() * sizeof(float));
  }
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(download(bufs[static_cast<size_t>(k)].as<float>(), 5000), std::vector<float>(5000, static_cast<float>(k + 1)));
}

TEST_F(CudaBackendTest, ElementwiseWorkMatchesCpu) {
  const int64_t n = 100003;  // not a multiple of any block size
  const auto a = random_vector(n, 2), b = random_vector(n, 3);
  auto da = upload(a), db = upload(b);
  model::DeviceBuffer dy = cuda().allocate(n * sizeof(float));
  std::vector<float> want(static_cast<size_t>(n));

  cuda().add_relu(n, da.as<float>(), db.as<float>(), dy.as<float>());
  cpu().add(n, a.data(), b.data(), want.data());
  cpu().relu_forward(n, want.data(), want.data());
  EXPECT_EQ(download(dy.as<float>(), n), want) << "add_relu: add, then relu_forward";

  cuda().add(n, da.as<float>(), db.as<float>(), dy.as<float>());
  cpu().add(n, a.data(), b.data(), want.data());
  EXPECT_EQ(download(dy.as<float>(), n), want);

  cuda().accumulate(n, da.as<float>(), dy.as<float>());
  cpu().accumulate(n, a.data(), want.data());
  EXPECT_EQ(download(dy.as<float>(), n), want);

  cuda().relu_forward(n, da.as<float>(), dy.as<float>());
  cpu().relu_forward(n, a.data(), want.data());
  const auto relu_y = want;
  EXPECT_EQ(download(dy.as<float>(), n), want);

  model::DeviceBuffer dx = cuda().allocate(n * sizeof(float));
  cuda().relu_backward(n, dy.as<float>(), db.as<float>(), dx.as<float>());
  cpu().relu_backward(n, relu_y.data(), b.data(), want.data());
  EXPECT_EQ(download(dx.as<float>(), n), want);

  cuda().fill(n, 0.25f, dx.as<float>());
  EXPECT_EQ(download(dx.as<float>(), n), std::vector<float>(static_cast<size_t>(n), 0.25f));
}

// Mixed precision's element-wise work on 16-bit activations: both backends widen to fp32, compute, and round to
// nearest even once, so the bits agree; the casts at the network's boundary likewise.
TEST_F(CudaBackendTest, SixteenBitElementwiseWorkAndCastsMatchCpuBitForBit) {
  const int64_t n = 100003;
  const auto a = random_vector(n, 4, -3.0f, 3.0f), b = random_vector(n, 5, -3.0f, 3.0f);
  auto da = upload(a), db = upload(b);
  for (const kernels::ElementType type : {kernels::ElementType::bf16, kernels::ElementType::f16}) {
    SCOPED_TRACE(kernels::element_type_name(type));
    const kernels::Elements e{n, type};
    std::vector<std::byte> ha(e.bytes()), hb(e.bytes()), want(e.bytes()), got(e.bytes());
    model::DeviceBuffer a16 = cuda().allocate(e.bytes()), b16 = cuda().allocate(e.bytes());
    model::DeviceBuffer y16 = cuda().allocate(e.bytes());
    const auto device_bits = [&](const model::DeviceBuffer& t) {
      cuda().to_host(got.data(), t.as<void>(), got.size());
      return got;
    };
    cuda().cast({n, kernels::ElementType::f32}, da.as<void>(), type, a16.as<void>());
    cuda().cast({n, kernels::ElementType::f32}, db.as<void>(), type, b16.as<void>());
    cpu().cast({n, kernels::ElementType::f32}, a.data(), type, ha.data());
    cpu().cast({n, kernels::ElementType::f32}, b.data(), type, hb.data());
    EXPECT_EQ(device_bits(a16), ha) << "cast from fp32";

    cuda().add_relu(e, a16.as<void>(), b16.as<void>(), y16.as<void>());
    cpu().add(e, ha.data(), hb.data(), want.data());
    cpu().relu_forward(e, want.data(), want.data());
    EXPECT_EQ(device_bits(y16), want) << "add_relu: add, then relu_forward";
    cuda().add(e, a16.as<void>(), b16.as<void>(), y16.as<void>());
    cpu().add(e, ha.data(), hb.data(), want.data());
    EXPECT_EQ(device_bits(y16), want) << "add";
    cuda().accumulate(e, a16.as<void>(), y16.as<void>());
    cpu().accumulate(e, ha.data(), want.data());
    EXPECT_EQ(device_bits(y16), want) << "accumulate";
    cuda().relu_forward(e, a16.as<void>(), y16.as<void>());
    cpu().relu_forward(e, ha.data(), want.data());
    EXPECT_EQ(device_bits(y16), want) << "relu forward";
    const std::vector<std::byte> relu_y = want;
    model::DeviceBuffer dx16 = cuda().allocate(e.bytes());
    cuda().relu_backward(e, y16.as<void>(), b16.as<void>(), dx16.as<void>());
    cpu().relu_backward(e, relu_y.data(), hb.data(), want.data());
    EXPECT_EQ(device_bits(dx16), want) << "relu backward";

    model::DeviceBuffer wide = cuda().allocate(n * sizeof(float));
    std::vector<float> wide_want(static_cast<size_t>(n));
    cuda().cast(e, a16.as<void>(), kernels::ElementType::f32, wide.as<void>());
    cpu().cast(e, ha.data(), kernels::ElementType::f32, wide_want.data());
    EXPECT_EQ(download(wide.as<float>(), n), wide_want) << "cast to fp32";
  }
}

// The loader's uint8 batch normalised on the GPU equals the CPU twin's (and so the loader's own) output bit for
// bit: both evaluate kernels/pixel_norm.h with IEEE fp32 division. Shapes: a usual batch; more (sample,
// channel) planes than one grid holds rows (65535), so the kernel's row stride runs; an odd plane size.
TEST_F(CudaBackendTest, NormalizePixelsMatchesCpuBitForBit) {
  const model::PixelShape shapes[] = {{5, 3, 17 * 13}, {70000, 1, 2}, {2, 4, 1}};
  for (const model::PixelShape& s : shapes) {
    std::vector<uint8_t> pixels(static_cast<size_t>(s.elements()));
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    std::vector<float> mean, stddev;
    for (int c = 0; c < s.channels; ++c) mean.push_back(100.3f + 7.1f * c), stddev.push_back(49.7f + 3.3f * c);
    std::vector<float> want(pixels.size());
    cpu().normalize_pixels(s, pixels.data(), mean.data(), stddev.data(), want.data());

    model::DeviceBuffer dx = cuda().allocate(pixels.size());
    cuda().to_device(dx.as<void>(), pixels.data(), pixels.size());
    auto dmean = upload(mean), dstd = upload(stddev);
    model::DeviceBuffer dy = cuda().allocate(want.size() * sizeof(float));
    cuda().normalize_pixels(s, dx.as<uint8_t>(), dmean.as<float>(), dstd.as<float>(), dy.as<float>());
    const auto got = download(dy.as<float>(), s.elements());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
        << s.samples << "x" << s.channels << "x" << s.plane;
  }
}

void check_loss(backend::CudaBackend& cuda, backend::CpuBackend& cpu, int batch, int classes, bool with_grad,
                float smoothing = 0) {
  const auto logits = random_vector(static_cast<size_t>(batch) * classes, 10u + static_cast<uint32_t>(classes), -4, 4);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = (i * 7 + 3) % classes;
  const float scale = 1.0f / 256;
  std::vector<float> want_grad(logits.size());
  model::LossTotals want;
  cpu.softmax_cross_entropy(batch, classes, logits.data(), labels.data(), {scale, smoothing},
                            with_grad ? want_grad.data() : nullptr, &want);

  model::DeviceBuffer dl = cuda.allocate(logits.size() * sizeof(float));
  cuda.to_device(dl.as<void>(), logits.data(), logits.size() * sizeof(float));
  model::DeviceBuffer dlab = cuda.allocate(labels.size() * sizeof(int32_t));
  cuda.to_device(dlab.as<void>(), labels.data(), labels.size() * sizeof(int32_t));
  model::DeviceBuffer dgrad = cuda.allocate(logits.size() * sizeof(float));
  model::DeviceBuffer dtotals = cuda.allocate(sizeof(model::LossTotals));
  cuda.softmax_cross_entropy(batch, classes, dl.as<float>(), dlab.as<int32_t>(), {scale, smoothing},
                             with_grad ? dgrad.as<float>() : nullptr, dtotals.as<model::LossTotals>());
  model::LossTotals got;
  cuda.to_host(&got, dtotals.as<void>(), sizeof got);
  // Per-sample terms in fp32 on the GPU, fp64 on the CPU; both summed in fp64.
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 2e-5 * std::abs(want.loss_sum) + 1e-5) << batch << "x" << classes;
  EXPECT_EQ(got.correct, want.correct) << batch << "x" << classes;
  if (with_grad) {
    std::vector<float> grad(logits.size());
    cuda.to_host(grad.data(), dgrad.as<float>(), grad.size() * sizeof(float));
    EXPECT_TRUE(all_close(grad, want_grad, 1e-5, 1e-6)) << batch << "x" << classes;
  }
}

TEST_F(CudaBackendTest, SoftmaxCrossEntropyMatchesCpu) {
  check_loss(cuda(), cpu(), 64, 10, true);
  check_loss(cuda(), cpu(), 37, 10, false);    // evaluation: no gradient; a batch that leaves a block part-full
  check_loss(cuda(), cpu(), 300, 1000, true);  // many classes per lane; more rows than the reduction's threads
  check_loss(cuda(), cpu(), 5, 3, true);       // fewer classes than lanes
  check_loss(cuda(), cpu(), 64, 10, true, 0.1f);     // label smoothing
  check_loss(cuda(), cpu(), 300, 1000, true, 0.2f);
}

// Mixed pairs' soft targets (lam on one label, 1 - lam on another; the last row without a target, as a bad label
// leaves it) against the CPU twin's soft-target loss: loss, accuracy against the dominant class, bad rows, gradient.
void check_soft_loss(backend::CudaBackend& cuda, backend::CpuBackend& cpu, int batch, int classes, float smoothing) {
  const auto logits = random_vector(static_cast<size_t>(batch) * classes, 20u + static_cast<uint32_t>(classes), -4, 4);
  std::vector<float> targets(logits.size(), 0.0f);
  for (int i = 0; i + 1 < batch; ++i) {
    const double lam = (i * 37 % 101) / 100.0;
    const size_t row = static_cast<size_t>(i) * static_cast<size_t>(classes);
    targets[row + static_cast<size_t>((i * 7 + 3) % classes)] += static_cast<float>(lam);
    targets[row + static_cast<size_t>((i * 5 + 1) % classes)] += static_cast<float>(1.0 - lam);
  }
  const float scale = 1.0f / 256;
  std::vector<float> want_grad(logits.size());
  model::LossTotals want;
  cpu.soft_target_cross_entropy(batch, classes, logits.data(), targets.data(), {scale, smoothing}, want_grad.data(),
                                &want);

  model::DeviceBuffer dl = cuda.allocate(logits.size() * sizeof(float));
  cuda.to_device(dl.as<void>(), logits.data(), logits.size() * sizeof(float));
  model::DeviceBuffer dt = cuda.allocate(targets.size() * sizeof(float));
  cuda.to_device(dt.as<void>(), targets.data(), targets.size() * sizeof(float));
  model::DeviceBuffer dgrad = cuda.allocate(logits.size() * sizeof(float));
  model::DeviceBuffer dtotals = cuda.allocate(sizeof(model::LossTotals));
  cuda.soft_target_cross_entropy(batch, classes, dl.as<float>(), dt.as<float>(), {scale, smoothing}, dgrad.as<float>(),
                                 dtotals.as<model::LossTotals>());
  model::LossTotals got;
  cuda.to_host(&got, dtotals.as<void>(), sizeof got);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 2e-5 * std::abs(want.loss_sum) + 1e-5) << batch << "x" << classes;
  EXPECT_EQ(got.correct, want.correct) << batch << "x" << classes;
  EXPECT_EQ(got.bad_labels, 1) << batch << "x" << classes;
  EXPECT_EQ(want.bad_labels, 1) << batch << "x" << classes;
  std::vector<float> grad(logits.size());
  cuda.to_host(grad.data(), dgrad.as<float>(), grad.size() * sizeof(float));
  EXPECT_TRUE(all_close(grad, want_grad, 1e-5, 1e-6)) << batch << "x" << classes;
}

TEST_F(CudaBackendTest, SoftTargetCrossEntropyMatchesCpu) {
  check_soft_loss(cuda(), cpu(), 64, 10, 0.0f);
  check_soft_loss(cuda(), cpu(), 37, 10, 0.1f);     // a batch that leaves a block part-full; label smoothing
  check_soft_loss(cuda(), cpu(), 300, 1000, 0.0f);  // many classes per lane; more rows than the reduction's threads
  check_soft_loss(cuda(), cpu(), 5, 3, 0.2f);       // fewer classes than lanes
}

// Out-of-range labels are counted on the device (the trainer reports them); the totals add up over batches,
// through a readback that does not wait for the stream until asked.
TEST_F(CudaBackendTest, OutOfRangeLabelsAreCountedAndTotalsAccumulateThroughAReadback) {
  const std::vector<float> logits(4 * 10, 0.5f);
  const std::vector<int32_t> labels{0, 3, 10, 9};
  model::DeviceBuffer dl = cuda().allocate(logits.size() * sizeof(float));
  cuda().to_device(dl.as<void>(), logits.data(), logits.size() * sizeof(float));
  model::DeviceBuffer dlab = cuda().allocate(labels.size() * sizeof(int32_t));
  cuda().to_device(dlab.as<void>(), labels.data(), labels.size() * sizeof(int32_t));
  model::DeviceBuffer dtotals = cuda().allocate(sizeof(model::LossTotals));
  auto readback = cuda().make_readback(sizeof(model::LossTotals));
  for (int batch = 0; batch < 2; ++batch)
    cuda().softmax_cross_entropy(4, 10, dl.as<float>(), dlab.as<int32_t>(), {}, nullptr,
                                 dtotals.as<model::LossTotals>());
  readback->start(dtotals.as<void>());
  model::LossTotals got;
  std::memcpy(&got, readback->wait(), sizeof got);
  EXPECT_TRUE(readback->ready());
  EXPECT_EQ(got.bad_labels, 2);
  EXPECT_NEAR(got.loss_sum, 2 * 3 * std::log(10.0), 1e-4);
}

// Clock marks are dated by the device: a mark after a busy kernel is later by the kernel's time.
TEST_F(CudaBackendTest, ClockMarksMeasureDeviceTime) {
  auto clock = cuda().make_clock(2);
  clock->mark(0);
  kernels::cuda::busy_wait(20'000'000, cuda().stream());  // 20 ms
  clock->mark(1);
  const double elapsed = clock->elapsed(0, 1);
  EXPECT_GT(elapsed, 0.019);
  EXPECT_LT(elapsed, 0.5);
  EXPECT_NEAR(clock->host_time(1) - clock->host_time(0), elapsed, 1e-3);
}

// The token operations (a ViT's class token, position table and readout) give the CPU twin's bits: fp32 stored
// NCHW, and bf16 stored NHWC (gpu.nhwc, against the twin storing NHWC); copies move stored values, the table's add
// rounds once, and its gradient adds the samples in the same order in double. Spans at the start, in the middle
// and at the end of the tokens, between tensors of different token counts.
TEST_F(CudaBackendTest, TokenOperationsMatchCpuBitForBit) {
  const int64_t samples = 5, features = 24, tokens = 37;
  for (const bool nhwc : {false, true}) {
    const kernels::ElementType type = nhwc ? kernels::ElementType::bf16 : kernels::ElementType::f32;
    SCOPED_TRACE(nhwc ? "bf16 NHWC" : "fp32 NCHW");
    backend::CudaOptions options;
    options.activations = type, options.nhwc = nhwc;
    backend::CudaBackend gpu(0, 1, "test-host", options);
    backend::CpuBackend twin(1);
    twin.store_nhwc(nhwc);
    ASSERT_EQ(gpu.activation_layout(type), twin.activation_layout(type));
    const kernels::Planes x_planes{samples, features, tokens, type}, y_planes{samples, features, tokens + 3, type};
    const kernels::Elements xe{x_planes.elements(), type}, ye{y_planes.elements(), type};
    // The tensors as stored bits on both sides.
    auto stored = [&](const std::vector<float>& values, kernels::Elements e) {
      std::vector<std::byte> bits(e.bytes());
      twin.cast({e.n, kernels::ElementType::f32}, values.data(), type, bits.data());
      return bits;
    };
    auto to_gpu = [&](const std::vector<std::byte>& bits) {
      model::DeviceBuffer b = gpu.allocate(bits.size());
      gpu.to_device(b.as<void>(), bits.data(), bits.size());
      return b;
    };
    auto from_gpu = [&](const model::DeviceBuffer& b, std::size_t bytes) {
      std::vector<std::byte> bits(bytes);
      gpu.to_host(bits.data(), b.as<void>(), bytes);
      return bits;
    };
    const std::vector<std::byte> x = stored(random_vector(static_cast<size_t>(xe.n), 31), xe);
    std::vector<std::byte> y = stored(random_vector(static_cast<size_t>(ye.n), 32), ye);
    const std::vector<float> table = random_vector(static_cast<size_t>((tokens + 3) * features), 33);
    const model::DeviceBuffer dx = to_gpu(x), dtable = upload(table, &gpu);
    model::DeviceBuffer dy = to_gpu(y);

    for (const kernels::TokenCopy& c : {kernels::TokenCopy{x_planes, y_planes, 0, 1, tokens},
                                       kernels::TokenCopy{y_planes, x_planes, 3, 0, tokens},
                                       kernels::TokenCopy{x_planes, y_planes, 5, 9, 11}}) {
      const bool into_y = c.to.hw == y_planes.hw;
      std::vector<std::byte> want = into_y ? y : x;
      twin.copy_tokens(c, into_y ? x.data() : y.data(), want.data());
      model::DeviceBuffer out = to_gpu(into_y ? y : x);
      gpu.copy_tokens(c, (into_y ? dx : dy).as<void>(), out.as<void>());
      EXPECT_EQ(from_gpu(out, want.size()), want) << "copy_tokens from " << c.from_first << " to " << c.to_first;
    }
    for (const kernels::TokenSpan& s : {kernels::TokenSpan{y_planes, 0, tokens + 3}, kernels::TokenSpan{y_planes, 0, 1},
                                       kernels::TokenSpan{y_planes, 7, 4}}) {
      for (const bool with_x : {true, false}) {
        std::vector<std::byte> want = y;
        twin.add_token_table(s, with_x ? y.data() : nullptr, table.data(), want.data());
        model::DeviceBuffer out = to_gpu(y);
        gpu.add_token_table(s, with_x ? out.as<void>() : nullptr, dtable.as<float>(), out.as<void>());
        EXPECT_EQ(from_gpu(out, want.size()), want)
            << "add_token_table over tokens " << s.first << " + " << s.count << (with_x ? "" : " without x");
      }
      const std::vector<float> start = random_vector(static_cast<size_t>(s.count * features), 34);
      std::vector<float> want = start;
      twin.token_table_gradient(s, y.data(), want.data());
      model::DeviceBuffer got = upload(start, &gpu);
      gpu.token_table_gradient(s, dy.as<void>(), got.as<float>());
      EXPECT_EQ(download(got.as<float>(), s.count * features, &gpu), want)
          << "token_table_gradient over tokens " << s.first << " + " << s.count;
    }
  }
}

// Gradient clipping's sum of squares: the CPU twin's value within double rounding (another order), and the same
// bits on every call (every rank must find the same norm).
TEST_F(CudaBackendTest, SumSquaresMatchesCpuAndRepeatsItsBits) {
  const int64_t n = 3000001;
  const auto x = random_vector(n, 23);
  auto dx = upload(x);
  model::DeviceBuffer total = cuda().allocate(sizeof(double));
  double first = 0, again = 0, want = 0;
  cuda().sum_squares(n, dx.as<float>(), total.as<double>());
  cuda().to_host(&first, total.as<void>(), sizeof first);
  cuda().sum_squares(n, dx.as<float>(), total.as<double>());
  cuda().to_host(&again, total.as<void>(), sizeof again);
  cpu().sum_squares(n, x.data(), &want);
  EXPECT_NEAR(first, want, 1e-12 * want);
  EXPECT_EQ(first, again);
}

// Layer normalisation over channels (kernels/layer_norm.h's formula on both): the CUDA kernels against the CPU twin
// on an image (positions strided by H x W in NCHW) and on tokens, in each element type the two store alike; the
// parameter gradients accumulate onto what was there. One formula and double sums on both sides: only fp32 rounding
// in another order (and contracted multiply-adds), and the 16-bit outputs' last rounding, may differ. NHWC storage
// is held to the double reference by test_layers' cuda_*_nhwc cases.
TEST_F(CudaBackendTest, LayerNormMatchesCpu) {
  for (const model::Shape shape : {model::Shape{3, 96, 5, 7}, model::Shape{2, 64, 13, 1}}) {
    for (const kernels::ElementType type :
         {kernels::ElementType::f32, kernels::ElementType::bf16, kernels::ElementType::f16}) {
      if (cuda().activation_layout(type) != cpu().activation_layout(type)) continue;
      SCOPED_TRACE(shape.str() + " in " + kernels::element_type_name(type));
      const kernels::Planes p = model::planes_of(shape, type);
      const int64_t n = p.elements(), positions = p.n * p.hw, c = p.c;
      const double tol = type == kernels::ElementType::f32 ? 1e-5 : type == kernels::ElementType::bf16 ? 8e-3 : 1e-3;
      const auto x = random_vector(n, 31, -2.0f, 3.0f), dy = random_vector(n, 32);
      const auto gamma = random_vector(c, 33, 0.5f, 1.5f), beta = random_vector(c, 34);
      const auto dgamma0 = random_vector(c, 35), dbeta0 = random_vector(c, 36);
      // Both sides' inputs in `type`: cast on each backend from the same fp32 values.
      const kernels::Elements e{n, type};
      std::vector<std::byte> hx(e.bytes()), hdy(e.bytes()), hy(e.bytes()), hdx(e.bytes());
      cpu().cast({n, kernels::ElementType::f32}, x.data(), type, hx.data());
      cpu().cast({n, kernels::ElementType::f32}, dy.data(), type, hdy.data());
      auto x32 = upload(x), dy32 = upload(dy), dg = upload(gamma), db = upload(beta);
      auto ddgamma = upload(dgamma0), ddbeta = upload(dbeta0);
      model::DeviceBuffer dx16 = cuda().allocate(e.bytes()), ddy = cuda().allocate(e.bytes()),
                          dy_out = cuda().allocate(e.bytes()), ddx = cuda().allocate(e.bytes()),
                          stats = cuda().allocate(2 * sizeof(float) * static_cast<size_t>(positions));
      cuda().cast({n, kernels::ElementType::f32}, x32.as<void>(), type, dx16.as<void>());
      cuda().cast({n, kernels::ElementType::f32}, dy32.as<void>(), type, ddy.as<void>());
      std::vector<float> host_stats(2 * static_cast<size_t>(positions)), dgamma = dgamma0, dbeta = dbeta0;
      const model::LayerNormTensors on_gpu{dg.as<float>(), db.as<float>(), stats.as<float>(),
                                           stats.as<float>() + positions};
      const model::LayerNormTensors on_cpu{gamma.data(), beta.data(), host_stats.data(),
                                           host_stats.data() + positions};

      cuda().layer_norm_forward(p, 1e-6f, dx16.as<void>(), on_gpu, dy_out.as<void>());
      cpu().layer_norm_forward(p, 1e-6f, hx.data(), on_cpu, hy.data());
      cuda().layer_norm_backward(p, dx16.as<void>(), ddy.as<void>(), on_gpu, ddx.as<void>(), ddgamma.as<float>(),
                                 ddbeta.as<float>());
      cpu().layer_norm_backward(p, hx.data(), hdy.data(), on_cpu, hdx.data(), dgamma.data(), dbeta.data());

      const auto widened = [&](const void* device_or_host, bool on_device) {
        model::DeviceBuffer wide = cuda().allocate(static_cast<size_t>(n) * sizeof(float));
        std::vector<float> out(static_cast<size_t>(n));
        if (on_device) {
          cuda().cast(e, device_or_host, kernels::ElementType::f32, wide.as<void>());
          return download(wide.as<float>(), n);
        }
        cpu().cast(e, device_or_host, kernels::ElementType::f32, out.data());
        return out;
      };
      EXPECT_TRUE(all_close(widened(dy_out.as<void>(), true), widened(hy.data(), false), tol, tol)) << "y";
      EXPECT_TRUE(all_close(download(stats.as<float>(), 2 * positions), host_stats, 1e-5, 1e-6)) << "mean and rstd";
      EXPECT_TRUE(all_close(widened(ddx.as<void>(), true), widened(hdx.data(), false), tol, tol)) << "dx";
      EXPECT_TRUE(all_close(download(ddgamma.as<float>(), c), dgamma, 1e-4, 1e-5)) << "accumulated dgamma";
      EXPECT_TRUE(all_close(download(ddbeta.as<float>(), c), dbeta, 1e-4, 1e-5)) << "accumulated dbeta";
    }
  }
}

// Layer norm's outputs on a backend: y, dx and the statistics widened to fp32, and dgamma, dbeta accumulated onto
// values that were there.
struct LayerNormRun {
  std::vector<float> y, stats, dx, dgamma, dbeta;
};

// gpu.candidate_kernels: layer norm's row kernels (one warp per position, channels contiguous: NHWC, or one position
// per sample) against the proven kernels, which LayerNormMatchesCpu holds to the CPU twin, in the same layout.
// Channel counts of ViT-S and ConvNeXt, ones that only narrower packs divide, and one past the row kernels' limit
// (which stays on the proven kernels). The sums are added in another order: the 16-bit outputs may differ by their
// last rounding, the rest by fp32 rounding.
TEST_F(CudaBackendTest, LayerNormCandidateRowKernelsMatchTheProvenKernels) {
  // Inputs cast on the device from the same fp32 values on every backend.
  const auto run = [](backend::CudaBackend& gpu, const model::Shape& shape, kernels::ElementType type) {
    const kernels::Planes p = model::planes_of(shape, type);
    const int64_t n = p.elements(), positions = p.n * p.hw, c = p.c;
    const kernels::Elements e{n, type};
    auto x32 = upload(random_vector(static_cast<size_t>(n), 31, -2.0f, 3.0f), &gpu);
    auto dy32 = upload(random_vector(static_cast<size_t>(n), 32), &gpu);
    auto gamma = upload(random_vector(static_cast<size_t>(c), 33, 0.5f, 1.5f), &gpu);
    auto beta = upload(random_vector(static_cast<size_t>(c), 34), &gpu);
    auto dgamma = upload(random_vector(static_cast<size_t>(c), 35), &gpu);
    auto dbeta = upload(random_vector(static_cast<size_t>(c), 36), &gpu);
    model::DeviceBuffer x = gpu.allocate(e.bytes()), dy = gpu.allocate(e.bytes()), y = gpu.allocate(e.bytes()),
                        dx = gpu.allocate(e.bytes()), wide = gpu.allocate(static_cast<size_t>(n) * sizeof(float)),
                        stats = gpu.allocate(2 * sizeof(float) * static_cast<size_t>(positions));
    gpu.cast({n, kernels::ElementType::f32}, x32.as<void>(), type, x.as<void>());
    gpu.cast({n, kernels::ElementType::f32}, dy32.as<void>(), type, dy.as<void>());
    const model::LayerNormTensors t{gamma.as<float>(), beta.as<float>(), stats.as<float>(),
                                    stats.as<float>() + positions};
    gpu.layer_norm_forward(p, 1e-6f, x.as<void>(), t, y.as<void>());
    gpu.layer_norm_backward(p, x.as<void>(), dy.as<void>(), t, dx.as<void>(), dgamma.as<float>(), dbeta.as<float>());
    const auto widened = [&](const model::DeviceBuffer& b) {
      gpu.cast(e, b.as<void>(), kernels::ElementType::f32, wide.as<void>());
      return download(wide.as<float>(), n, &gpu);
    };
    return LayerNormRun{widened(y), download(stats.as<float>(), 2 * positions, &gpu), widened(dx),
                        download(dgamma.as<float>(), c, &gpu), download(dbeta.as<float>(), c, &gpu)};
  };
  // Also: 1024 channels, the row kernels' limit; 97, which only single values divide, over several rounds of a warp;
  // ConvNeXt's first stage at 147,456 positions, past the column sums' smallest chunks and their cap.
  const model::Shape shapes[] = {{3, 96, 5, 7}, {2, 64, 13, 1}, {8, 384, 197, 1}, {2, 768, 3, 3},
                                 {3, 36, 5, 4}, {4, 6, 3, 1},   {2, 1040, 3, 1},  {5, 12, 1, 1},
                                 {2, 1024, 3, 1}, {3, 97, 5, 1}, {64, 96, 48, 48}};
  for (const kernels::ElementType type : {kernels::ElementType::bf16, kernels::ElementType::f16}) {
    backend::CudaOptions options;
    options.activations = type, options.nhwc = true;  // fp32 stays NCHW: its one-position shapes are rows too
    backend::CudaBackend proven(0, 1, "test-host", options);
    options.candidate_kernels = true;
    backend::CudaBackend candidate(0, 1, "test-host", options);
    for (const kernels::ElementType data : {kernels::ElementType::f32, type}) {
      const double tol = data == kernels::ElementType::f32 ? 1e-5 : data == kernels::ElementType::bf16 ? 8e-3 : 1e-3;
      for (const model::Shape& shape : shapes) {
        SCOPED_TRACE(shape.str() + " in " + kernels::element_type_name(data));
        const LayerNormRun want = run(proven, shape, data), got = run(candidate, shape, data);
        EXPECT_TRUE(all_close(got.y, want.y, tol, tol)) << "y";
        EXPECT_TRUE(all_close(got.stats, want.stats, 1e-5, 1e-6)) << "mean and rstd";
        EXPECT_TRUE(all_close(got.dx, want.dx, tol, tol)) << "dx";
        EXPECT_TRUE(all_close(got.dgamma, want.dgamma, 1e-4, 1e-5)) << "accumulated dgamma";
        EXPECT_TRUE(all_close(got.dbeta, want.dbeta, 1e-4, 1e-5)) << "accumulated dbeta";
        const LayerNormRun again = run(candidate, shape, data);
        EXPECT_EQ(again.dgamma, got.dgamma) << "the parameter gradients are reproducible to the bit";
        EXPECT_EQ(again.dbeta, got.dbeta);
        EXPECT_EQ(again.dx, got.dx);
      }
    }
  }
}

TEST_F(CudaBackendTest, SgdUpdateMatchesCpu) {
  const int64_t n = 4099;
  const auto grad = random_vector(n, 20), velocity = random_vector(n, 21), param = random_vector(n, 22);
  // Decay on two runs that start and end inside mask words; none elsewhere.
  const auto mask = kernels::make_decay_mask(n, {{3, 1000}, {1500, 2000}});
  model::DeviceBuffer dmask = cuda().allocate(mask.size() * sizeof(uint32_t));
  cuda().to_device(dmask.as<void>(), mask.data(), mask.size() * sizeof(uint32_t));
  for (const bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "Nesterov" : "plain momentum");
    auto dv = upload(velocity), dp = upload(param);
    auto want_v = velocity, want_p = param;
    const kernels::SgdStep step_settings{0.05f, 0.9f, 5e-4f, nesterov};
    for (int step = 0; step < 3; ++step) {  // each update consumes its gradients: fresh copies every step
      auto dg = upload(grad);
      auto g = grad;
      cuda().sgd_update(n, step_settings, dmask.as<uint32_t>(), dg.as<float>(), dv.as<float>(), dp.as<float>());
      cpu().sgd_update(n, step_settings, mask.data(), g.data(), want_v.data(), want_p.data());
      EXPECT_EQ(download(dg.as<float>(), n), std::vector<float>(static_cast<size_t>(n), 0.0f)) << "gradients consumed";
    }
    // Same formula; only the compilers' fused multiply-adds may differ in the last bit.
    EXPECT_TRUE(all_close(download(dv.as<float>(), n), want_v, 1e-6, 1e-7));
    EXPECT_TRUE(all_close(download(dp.as<float>(), n), want_p, 1e-6, 1e-7));
  }
}

// The weights' moving average (train.ema_decay) against the CPU twin over three steps of fresh parameters, on a
// count that is not a multiple of the block size.
TEST_F(CudaBackendTest, EmaUpdateMatchesCpu) {
  const int64_t n = 4099;
  auto want = random_vector(n, 30);
  auto dema = upload(want);
  for (uint32_t step = 0; step < 3; ++step) {
    const auto param = random_vector(n, 31 + step);
    auto dparam = upload(param);
    cuda().ema_update(n, kernels::ema_step(0.999), dparam.as<float>(), dema.as<float>());
    cpu().ema_update(n, kernels::ema_step(0.999), param.data(), want.data());
  }
  // One formula (kernels::ema_blend); only the compilers' fused multiply-adds may differ in the last bit.
  EXPECT_TRUE(all_close(download(dema.as<float>(), n), want, 1e-6, 1e-7));
}

// A group of two ranks whose other rank holds the same batch, in one process: the sums come back doubled.
class TwinRankGroup final : public model::BatchStatisticsGroup {
 public:
  void all_reduce(std::span<double> sums) override {
    for (double& v : sums) v *= 2;
  }
};

// One batch norm's buffers on one backend: parameters and statistics in, everything training writes out.
struct BatchNormRun {
  std::vector<float> y, dx, dgamma, dbeta, running_mean, running_var;
};

BatchNormRun train_batchnorm(model::Backend& b, const model::BatchNormShape& s, const std::vector<float>& x,
                             const std::vector<float>& dy) {
  const auto c = static_cast<size_t>(s.channels), n = x.size();
  std::vector<float> zeros(c, 0.0f), ones(c, 1.0f);
  auto put = [&b](const std::vector<float>& host) {
    model::DeviceBuffer d = b.allocate(host.size() * sizeof(float));
    b.to_device(d.as<void>(), host.data(), host.size() * sizeof(float));
    return d;
  };
  auto get = [&b](const model::DeviceBuffer& d, size_t count) {
    std::vector<float> host(count);
    b.to_host(host.data(), d.as<void>(), count * sizeof(float));
    return host;
  };
  model::DeviceBuffer dx_in = put(x), ddy = put(dy), gamma = put(random_vector(c, 61, 0.5f, 1.5f)),
                      beta = put(random_vector(c, 62)), mean = put(zeros), var = put(ones), saved_mean = put(zeros),
                      saved_inv_std = put(zeros), y = put(std::vector<float>(n)), dx = put(std::vector<float>(n)),
                      dgamma = put(zeros), dbeta = put(zeros);
  const model::BatchNormBuffers buffers{gamma.as<float>(), beta.as<float>(), mean.as<float>(), var.as<float>(),
                                        saved_mean.as<float>(), saved_inv_std.as<float>()};
  const model::BatchNormSettings settings;
  b.batchnorm_forward_train(s, settings, dx_in.as<void>(), buffers, y.as<void>());
  b.batchnorm_backward(s, settings, dx_in.as<void>(), y.as<void>(), ddy.as<void>(), buffers, dx.as<void>(),
                       dgamma.as<float>(), dbeta.as<float>());
  return {get(y, n), get(dx, n), get(dgamma, c), get(dbeta, c), get(mean, c), get(var, c)};
}

// fp32 batch norm on our kernels (sums in double) against the CPU twin's: every buffer training writes, dx a little
// looser (its coefficients come from two sums each).
void expect_batchnorm_runs_close(const BatchNormRun& got, const BatchNormRun& want) {
  EXPECT_TRUE(all_close(got.y, want.y, 1e-5, 1e-6)) << "y";
  EXPECT_TRUE(all_close(got.dx, want.dx, 1e-4, 1e-5)) << "dx";
  EXPECT_TRUE(all_close(got.dgamma, want.dgamma, 1e-5, 1e-6)) << "dgamma";
  EXPECT_TRUE(all_close(got.dbeta, want.dbeta, 1e-5, 1e-6)) << "dbeta";
  EXPECT_TRUE(all_close(got.running_mean, want.running_mean, 1e-5, 1e-6)) << "running mean";
  EXPECT_TRUE(all_close(got.running_var, want.running_var, 1e-5, 1e-6)) << "running variance";
}

// One batch's training pass on the CUDA backend and on the CPU twin, each synchronised over a group whose other rank
// holds the same batch (TwinRankGroup).
struct TwinRankRuns {
  BatchNormRun cuda, cpu;
};
TwinRankRuns twin_rank_runs(const model::BatchNormShape& s, const std::vector<float>& x, const std::vector<float>& dy) {
  backend::CudaBackend synced_cuda(0, 1, "test-host");
  backend::CpuBackend synced_cpu(1);
  synced_cuda.synchronise_batchnorm(std::make_shared<TwinRankGroup>());
  synced_cpu.synchronise_batchnorm(std::make_shared<TwinRankGroup>());
  return {train_batchnorm(synced_cuda, s, x, dy), train_batchnorm(synced_cpu, s, x, dy)};
}

// dist.sync_batchnorm_group on the CUDA backend (our kernels at fp32 too, the group's sums through the host) against
// the CPU twin's, over a group whose other rank holds the same batch: both normalise with this batch's statistics,
// put the group's count (2 x N x H x W) into the running variance's unbiased estimate, take dx from the group's sums
// and keep this rank's share of dgamma and dbeta. The unsynchronised CPU run shows the group was used: its running
// variance's count is this rank's alone.
TEST_F(CudaBackendTest, SynchronisedBatchNormOverTwinRanksMatchesTheCpuTwin) {
  const model::BatchNormShape s{.batch = 6, .channels = 5, .spatial = 49};
  const auto x = random_vector(static_cast<size_t>(s.elements()), 63, -2.0f, 3.0f);
  const auto dy = random_vector(static_cast<size_t>(s.elements()), 64);
  const auto [got, want] = twin_rank_runs(s, x, dy);
  expect_batchnorm_runs_close(got, want);
  const BatchNormRun alone = train_batchnorm(cpu(), s, x, dy);
  EXPECT_TRUE(all_close(got.y, alone.y, 1e-5, 1e-6)) << "the twin rank's batch is this one: the same statistics";
  EXPECT_FALSE(all_close(got.running_var, alone.running_var, 1e-7, 0.0)) << "the running variance's count is the group's";
}

// Values far from 0 against their spread (mean 1000, spread 0.2: a pixel-valued input): our fp32 kernels' sums in
// double keep E[x^2] - mean^2 at the CPU twin's two-pass variance (fp32 squares lost 4e-2 of it there). The running
// statistics are compared: y and dx also carry the mean's rounding to float, which the two sides may round apart.
TEST_F(CudaBackendTest, SynchronisedBatchNormOfValuesFarFromZeroKeepsTheCpuTwinsVariance) {
  const model::BatchNormShape s{.batch = 8, .channels = 3, .spatial = 64};
  const auto x = random_vector(static_cast<size_t>(s.elements()), 65, 999.9f, 1000.1f);
  const auto dy = random_vector(static_cast<size_t>(s.elements()), 66);
  const auto [got, want] = twin_rank_runs(s, x, dy);
  EXPECT_TRUE(all_close(got.running_mean, want.running_mean, 1e-6, 0.0)) << "running mean";
  EXPECT_TRUE(all_close(got.running_var, want.running_var, 1e-5, 0.0)) << "running variance";
}

// gpu.candidate_kernels: a group of MPI ranks has its sums added by NCCL on the stream (nccl_batchnorm_sums.h).
// Over a group of this rank alone (MPI_COMM_SELF: one GPU cannot host two NCCL ranks of one host) the sums stay
// this batch's, so the numbers are the unsynchronised CPU twin's: the communicator's bootstrap, its all-reduce of
// the doubles in stream order and its end, without a second rank. The multi-rank sums: test_sync_batchnorm's cuda
// mode.
TEST_F(CudaBackendTest, CandidateNcclBatchNormSumsOverOneRankMatchTheCpuTwin) {
  ensure_mpi();
  backend::CudaOptions options;
  options.candidate_kernels = true;
  backend::CudaBackend synced_cuda(0, 1, "test-host", options);
  synced_cuda.synchronise_batchnorm(std::make_shared<dist::MpiBatchStatisticsGroup>(MPI_COMM_SELF, 1));
  const model::BatchNormShape s{.batch = 6, .channels = 5, .spatial = 49};
  const auto x = random_vector(static_cast<size_t>(s.elements()), 63, -2.0f, 3.0f);
  const auto dy = random_vector(static_cast<size_t>(s.elements()), 64);
  const BatchNormRun got = train_batchnorm(synced_cuda, s, x, dy), want = train_batchnorm(cpu(), s, x, dy);
  expect_batchnorm_runs_close(got, want);
}

// The other optimizers against the CPU twin over three updates: AdamW over a decay mask, LARS and LAMB over
// tensor ranges of which some adapt, including one large enough to span many of the GPU's norm chunks.
class OptimizerMatchesCpu : public CudaBackendTest {
 protected:
  static constexpr int64_t kParams = 300000;
  const std::vector<kernels::TensorRange> ranges{{0, 3, 0, 0}, {3, 250000, 1, 0}, {250003, 17, 0, 0}, {250020, 49980, 1, 0}};
  std::vector<float> grad_at(int step) const { return random_vector(kParams, 40u + static_cast<uint32_t>(step)); }
  const std::vector<float> zeros = std::vector<float>(kParams, 0.0f);  // every gradient after an update
  model::DeviceBuffer device_ranges() {
    model::DeviceBuffer d = cuda().allocate(ranges.size() * sizeof(kernels::TensorRange));
    cuda().to_device(d.as<void>(), ranges.data(), ranges.size() * sizeof(kernels::TensorRange));
    return d;
  }
  static kernels::AdamStep adam(int t) {
    kernels::AdamStep s;
    s.lr = 0.01f, s.weight_decay = 0.05f;
    s.bias_correction1 = 1.0f - std::pow(0.9f, static_cast<float>(t));
    s.bias_correction2 = 1.0f - std::pow(0.999f, static_cast<float>(t));
    return s;
  }
};

TEST_F(OptimizerMatchesCpu, AdamW) {
  auto want_p = random_vector(kParams, 30);
  std::vector<float> want_m(kParams, 0.0f), want_v(kParams, 0.0f);
  auto dp = upload(want_p), dm = upload(want_m), dv = upload(want_v);
  const auto mask = kernels::make_decay_mask(kParams, {{3, 250000}, {250020, 49980}});
  model::DeviceBuffer dmask = cuda().allocate(mask.size() * sizeof(uint32_t));
  cuda().to_device(dmask.as<void>(), mask.data(), mask.size() * sizeof(uint32_t));
  for (int t = 1; t <= 3; ++t) {
    auto g = grad_at(t);
    auto dg = upload(g);
    cuda().adamw_update(kParams, adam(t), dmask.as<uint32_t>(), dg.as<float>(), dm.as<float>(), dv.as<float>(),
                        dp.as<float>());
    cpu().adamw_update(kParams, adam(t), mask.data(), g.data(), want_m.data(), want_v.data(), want_p.data());
    EXPECT_EQ(download(dg.as<float>(), kParams), zeros) << "the update consumed its gradients";
  }
  EXPECT_TRUE(all_close(download(dp.as<float>(), kParams), want_p, 1e-5, 1e-7));
  EXPECT_TRUE(all_close(download(dm.as<float>(), kParams), want_m, 1e-5, 1e-7));
  EXPECT_TRUE(all_close(download(dv.as<float>(), kParams), want_v, 1e-5, 1e-9));
}

TEST_F(OptimizerMatchesCpu, Lars) {
  auto dranges = device_ranges();
  for (const bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "Nesterov" : "plain momentum");
    auto want_p = random_vector(kParams, 31);
    std::vector<float> want_vel(kParams, 0.0f);
    auto dp = upload(want_p), dvel = upload(want_vel);
    kernels::LarsStep step;
    step.lr = 2.0f, step.momentum = 0.9f, step.weight_decay = 5e-4f, step.trust_coefficient = 0.001f;
    step.nesterov = nesterov;
    for (int t = 1; t <= 3; ++t) {
      auto g = grad_at(t);
      auto dg = upload(g);
      cuda().lars_update(static_cast<int>(ranges.size()), dranges.as<kernels::TensorRange>(), step, dg.as<float>(),
                         dvel.as<float>(), dp.as<float>());
      cpu().lars_update(static_cast<int>(ranges.size()), ranges.data(), step, g.data(), want_vel.data(), want_p.data());
      EXPECT_EQ(download(dg.as<float>(), kParams), zeros) << "the update consumed its gradients";
    }
    // Norms summed in another order (chunks on the GPU, one pass on the CPU), both in double.
    EXPECT_TRUE(all_close(download(dp.as<float>(), kParams), want_p, 1e-5, 1e-7));
    EXPECT_TRUE(all_close(download(dvel.as<float>(), kParams), want_vel, 1e-5, 1e-8));
  }
}

TEST_F(OptimizerMatchesCpu, Lamb) {
  auto want_p = random_vector(kParams, 32);
  std::vector<float> want_m(kParams, 0.0f), want_v(kParams, 0.0f);
  auto dp = upload(want_p), dm = upload(want_m), dv = upload(want_v);
  auto dranges = device_ranges();
  for (int t = 1; t <= 3; ++t) {
    auto g = grad_at(t);
    auto dg = upload(g);
    cuda().lamb_update(static_cast<int>(ranges.size()), dranges.as<kernels::TensorRange>(), adam(t), dg.as<float>(),
                       dm.as<float>(), dv.as<float>(), dp.as<float>());
    cpu().lamb_update(static_cast<int>(ranges.size()), ranges.data(), adam(t), g.data(), want_m.data(), want_v.data(),
                      want_p.data());
    EXPECT_EQ(download(dg.as<float>(), kParams), zeros) << "the update consumed its gradients";
  }
  EXPECT_TRUE(all_close(download(dp.as<float>(), kParams), want_p, 1e-5, 1e-7));
  EXPECT_TRUE(all_close(download(dm.as<float>(), kParams), want_m, 1e-5, 1e-7));
  EXPECT_TRUE(all_close(download(dv.as<float>(), kParams), want_v, 1e-5, 1e-9));
}

// A rate group at lr 0 (optimizer.head_lr_multiplier = 0) takes its update: the parameters stay, the state moves
// as the CPU twin's does, and the gradients are consumed, on each optimizer's kernel.
TEST_F(OptimizerMatchesCpu, AtRateZeroTheParametersStayAndTheGradientsAreConsumed) {
  auto dranges = device_ranges();
  const auto p0 = random_vector(kParams, 33);
  const auto g = grad_at(1);
  kernels::AdamStep still = adam(1);
  still.lr = 0;
  std::vector<float> want_m(kParams, 0.0f), want_v(kParams, 0.0f), want_p = p0;
  auto g_cpu = g;  // the CPU update consumes its copy
  cpu().lamb_update(static_cast<int>(ranges.size()), ranges.data(), still, g_cpu.data(), want_m.data(), want_v.data(),
                    want_p.data());
  auto dp = upload(p0), dm = upload(std::vector<float>(kParams, 0.0f)), dv = upload(std::vector<float>(kParams, 0.0f));
  auto dg = upload(g);
  cuda().lamb_update(static_cast<int>(ranges.size()), dranges.as<kernels::TensorRange>(), still, dg.as<float>(),
                     dm.as<float>(), dv.as<float>(), dp.as<float>());
  EXPECT_EQ(download(dp.as<float>(), kParams), p0) << "lamb at lr 0 moved parameters";
  EXPECT_EQ(download(dg.as<float>(), kParams), zeros) << "lamb at lr 0 left its gradients";
  EXPECT_TRUE(all_close(download(dm.as<float>(), kParams), want_m, 1e-6, 0.0)) << "lamb's first moment";
  kernels::LarsStep lars;
  lars.momentum = 0.9f, lars.weight_decay = 5e-4f;  // lr 0
  auto dvel = upload(std::vector<float>(kParams, 0.0f));
  auto dg2 = upload(g);
  dp = upload(p0);
  cuda().lars_update(static_cast<int>(ranges.size()), dranges.as<kernels::TensorRange>(), lars, dg2.as<float>(),
                     dvel.as<float>(), dp.as<float>());
  EXPECT_EQ(download(dp.as<float>(), kParams), p0) << "lars at lr 0 moved parameters";
  EXPECT_EQ(download(dg2.as<float>(), kParams), zeros) << "lars at lr 0 left its gradients";
}

}  // namespace
}  // namespace ringtrain::gpu_test
