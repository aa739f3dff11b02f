// Tests of the GPU JPEG decoder (kernels/cuda/jpeg_batch_decoder.h) against the CPU path on the same JPEGs: libjpeg's
// full decode (io::decode_image_bytes, brought to the sample's channels) and the CPU crop
// (kernels::cpu::averaged_crop_resample: block means where a crop shrinks by 2 or more, as the device's) with the same
// windows and flips. Baseline, progressive, gray and CMYK JPEGs of several sizes in one batch, as encoded and in the
// region layout prepare stores, on the hardware engine where the GPU has one and on the CUDA backend; then a corrupt JPEG named by its index, and the
// decoder still working after it; and the CUDA backend's decode_jpegs and its JPEG slots driven from a second thread
// (data.decode = gpu, as training decodes ahead) against the CPU twin's. The error messages alone need no device.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "data/augment.h"
#include "gpu_test_support.h"
#include "io/image_decode.h"
#include "io/jpeg_encode.h"
#include "kernels/cpu/crop_resample.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/jpeg_batch_decoder.h"
#include "tests/io/jpeg_test_images.h"

namespace ringtrain::gpu_test {
namespace {

using io::testing::JpegKind;
using kernels::cuda::JpegBatchDecoder;
using kernels::JpegCrop;

// The mean absolute difference allowed between a GPU-made and a CPU-made sample, in levels of 255. nvJPEG's IDCT,
// chroma upsampling and colour conversion are not libjpeg's: measured on these images (tests' photo_like, quality
// 90) after the same crops, libjpeg's own choices differ from its defaults by up to 1.5 levels (replicated instead
// of interpolated chroma) and 1.8 (that and the fast integer IDCT); a decoder's real errors (a mirrored sample, a
// swapped channel, a shifted window, YCbCr left unconverted) differ by 10 to 40.
constexpr double kMaxMeanDifference = 2.5;

struct TestJpeg {
  const char* what;
  std::vector<uint8_t> bytes;
  int height, width;
};

std::vector<TestJpeg> test_jpegs() {
  using io::testing::encode_test_jpeg;
  using io::testing::photo_like;
  std::vector<TestJpeg> jpegs;
  const auto add = [&](const char* what, int h, int w, int channels, JpegKind kind, int seed) {
    jpegs.push_back({what, encode_test_jpeg(photo_like(h, w, channels, seed), 90, kind), h, w});
  };
  add("baseline colour", 240, 320, 3, JpegKind::baseline, 1);
  add("baseline colour, odd size", 157, 211, 3, JpegKind::baseline, 2);
  add("progressive colour", 201, 180, 3, JpegKind::progressive, 3);
  add("baseline gray", 130, 190, 1, JpegKind::baseline, 4);
  add("progressive gray", 99, 141, 1, JpegKind::progressive, 5);
  add("CMYK", 120, 160, 4, JpegKind::baseline, 6);
  add("baseline colour, small", 33, 47, 3, JpegKind::baseline, 7);
  add("baseline colour, tall", 300, 120, 3, JpegKind::baseline, 8);
  return jpegs;
}

// The CPU's pixels: libjpeg's whole image (CMYK converted to RGB; one channel: a colour JPEG's own luma, as nvJPEG's
// Y plane) brought to `channels`.
io::DecodedImage cpu_pixels(std::span<const uint8_t> jpeg, int channels) {
  return io::convert_channels(io::decode_image_bytes("test.jpg", jpeg, channels), channels);
}

// The host decoder the GPU decoder is given for what nvJPEG leaves (CMYK): the CPU's own.
void host_decode(std::span<const uint8_t> jpeg, int channels, kernels::cuda::HostPixels& out) {
  io::DecodedImage image = cpu_pixels(jpeg, channels);
  out.pixels = std::move(image.pixels);
  out.rows = image.height;
  out.columns = image.width;
  out.channels = image.channels;
}

std::vector<uint8_t> cpu_sample(const TestJpeg& jpeg, const JpegCrop& crop, const kernels::cpu::SampleExtent& extent) {
  const io::DecodedImage image = cpu_pixels(jpeg.bytes, extent.channels);
  std::vector<uint8_t> out(static_cast<std::size_t>(extent.channels * extent.height * extent.width));
  const kernels::InterleavedImage pixels{image.pixels.data(), image.height, image.width, image.channels,
                                         int64_t{image.width} * image.channels};
  kernels::cpu::averaged_crop_resample(pixels, crop.window, crop.flip, extent, out);
  return out;
}

double mean_difference(const uint8_t* got, const std::vector<uint8_t>& want) {
  double sum = 0;
  for (std::size_t i = 0; i < want.size(); ++i) sum += std::abs(static_cast<int>(got[i]) - static_cast<int>(want[i]));
  return sum / static_cast<double>(want.size());
}

// Each JPEG twice, with different training crops (torchvision's RandomResizedCrop and flip, as training draws them).
std::vector<JpegCrop> crops_of(const std::vector<TestJpeg>& jpegs) {
  const train::AugmentSpec spec{train::AugmentKind::resized_crop_flip};
  std::vector<JpegCrop> crops;
  for (int round = 0; round < 2; ++round)
    for (std::size_t i = 0; i < jpegs.size(); ++i) {
      const train::SampleKey key{37, round, 0, static_cast<int64_t>(i)};
      const train::PhotoCrop crop = train::random_photo_crop(spec, key, jpegs[i].height, jpegs[i].width);
      crops.push_back({jpegs[i].bytes, crop.window, crop.flip, jpegs[i].height, jpegs[i].width});
    }
  return crops;
}

class CudaJpegDecoder : public GpuSuite {
 protected:
  // The batch decoded on the GPU, downloaded.
  std::vector<uint8_t> decode(JpegBatchDecoder& decoder, const std::vector<JpegCrop>& crops,
                              const kernels::cpu::SampleExtent& extent) {
    const std::size_t bytes = crops.size() * static_cast<std::size_t>(extent.channels * extent.height * extent.width);
    model::DeviceBuffer out = cuda().allocate(bytes);
    decoder.decode(crops, extent, out.as<uint8_t>());
    std::vector<uint8_t> host(bytes);
    cuda().to_host(host.data(), out.as<void>(), bytes);
    return host;
  }

  // `region_layout`: each JPEG prepare rewrites as it stores photos (restart markers every 1-4 MCUs,
  // io::in_region_layout) in that form, as training hands them over. A clean batch never goes one by one.
  void expect_close_to_cpu(bool allow_hardware, int channels, bool region_layout = false) {
    std::vector<TestJpeg> jpegs = test_jpegs();
    int rewritten = 0;
    for (TestJpeg& jpeg : jpegs)
      if (region_layout)
        if (std::optional<std::vector<uint8_t>> bytes = io::in_region_layout(jpeg.bytes)) {
          jpeg.bytes = std::move(*bytes);
          ++rewritten;
        }
    EXPECT_TRUE(!region_layout || rewritten >= 4) << rewritten << " JPEGs rewritten into the region layout";
    const std::vector<JpegCrop> crops = crops_of(jpegs);
    const kernels::cpu::SampleExtent extent{channels, 56, 72};
    JpegBatchDecoder decoder(cuda().stream(), {allow_hardware, host_decode});
    const std::vector<uint8_t> got = decode(decoder, crops, extent);
    const auto& routes = decoder.last_routes();
    std::cout << "  nvJPEG " << decoder.backend() << ", " << channels << " channels: " << routes.batched
              << " batched (" << routes.retried << " retried one by one), " << routes.one_by_one << " one by one, "
              << routes.host << " on the host\n";
    EXPECT_TRUE(allow_hardware || !decoder.hardware()) << decoder.backend();
    EXPECT_EQ(routes.host, 2) << "the CMYK JPEG, twice, through the host decoder";
    EXPECT_EQ(routes.retried, 0) << "a batch of JPEGs nvJPEG decodes went one by one";
    const std::size_t sample = got.size() / crops.size();
    for (std::size_t i = 0; i < crops.size(); ++i) {
      const TestJpeg& jpeg = jpegs[i % jpegs.size()];
      const std::vector<uint8_t> want = cpu_sample(jpeg, crops[i], extent);
      const double difference = mean_difference(got.data() + i * sample, want);
      if (jpeg.what == std::string("CMYK"))  // decoded by the CPU's own decoder: the crop alone differs, and it may not
        EXPECT_EQ(difference, 0.0) << "sample " << i << " (" << jpeg.what << ")";
      else
        EXPECT_LE(difference, kMaxMeanDifference) << "sample " << i << " (" << jpeg.what << ", "
                                                  << (crops[i].flip ? "mirrored" : "not mirrored") << ")";
    }
  }
};

TEST_F(CudaJpegDecoder, ColourSamplesAreCloseToTheCpuPath) { expect_close_to_cpu(true, 3); }
TEST_F(CudaJpegDecoder, LumaSamplesAreCloseToTheCpuPath) { expect_close_to_cpu(true, 1); }
TEST_F(CudaJpegDecoder, CudaBackendSamplesAreCloseToTheCpuPath) {
  expect_close_to_cpu(false, 3);
  expect_close_to_cpu(false, 1);
}
TEST_F(CudaJpegDecoder, RegionLayoutSamplesAreCloseToTheCpuPath) {
  expect_close_to_cpu(true, 3, true);
  expect_close_to_cpu(false, 3, true);
}

// The CUDA backend's decode_jpegs (the decoder on its own stream, two slots in turn) against the CPU twin's on the
// same crops: close, sample by sample; a batch handed out stays as made while the next one decodes; and a sample
// that does not decode is named by its batch position, the backend decoding the batch after it.
TEST_F(CudaJpegDecoder, TheBackendsDecodeFollowsTheCpuTwin) {
  const std::vector<TestJpeg> jpegs = test_jpegs();
  const std::vector<JpegCrop> crops = crops_of(jpegs);
  const model::Shape sample{1, 3, 40, 48};
  const auto per_sample = static_cast<std::size_t>(sample.per_sample()), bytes = crops.size() * per_sample;
  backend::CpuBackend twin(1);
  const uint8_t* first = cuda().decode_jpegs(crops, sample);
  std::vector<JpegCrop> mirrored = crops;
  for (auto& crop : mirrored) crop.flip = !crop.flip;
  const uint8_t* second = cuda().decode_jpegs(mirrored, sample);
  EXPECT_NE(first, second);
  std::vector<uint8_t> got_first(bytes), got_second(bytes);
  cuda().to_host(got_first.data(), first, bytes);
  cuda().to_host(got_second.data(), second, bytes);
  const auto expect_close = [&](const std::vector<uint8_t>& got, const uint8_t* want, const char* which) {
    for (std::size_t i = 0; i < crops.size(); ++i)
      EXPECT_LE(mean_difference(got.data() + i * per_sample,
                                std::vector<uint8_t>(want + i * per_sample, want + (i + 1) * per_sample)),
                kMaxMeanDifference)
          << "sample " << i << " of the " << which << " batch";
  };
  const uint8_t* want_first = twin.decode_jpegs(crops, sample);
  expect_close(got_first, want_first, "first");
  expect_close(got_second, twin.decode_jpegs(mirrored, sample), "second");
  std::vector<JpegCrop> bad = crops;
  const std::vector<uint8_t> not_a_jpeg(500, 0x5a);
  bad[3].jpeg = not_a_jpeg;
  try {
    cuda().decode_jpegs(bad, sample);
    ADD_FAILURE() << "a batch with bytes that are no JPEG at sample 3 decoded";
  } catch (const kernels::UndecodableJpeg& e) {
    EXPECT_EQ(e.index(), 3) << e.what();
  }
  const uint8_t* after = cuda().decode_jpegs(crops, sample);
  std::vector<uint8_t> got_after(bytes);
  cuda().to_host(got_after.data(), after, bytes);
  EXPECT_LE(mean_difference(got_after.data(), std::vector<uint8_t>(want_first, want_first + per_sample)),
            kMaxMeanDifference);
}

// The backend's JPEG slots as training drives them (data/decode_ahead.h): decoded on a thread other than the one
// that queues the work, used and released on this one, a slot decoded into again once released. Each slot's
// samples follow the CPU twin's, and a slot in use stays as made while the other is decoded into.
TEST_F(CudaJpegDecoder, SlotsDecodedOnAnotherThreadFollowTheCpuTwin) {
  const std::vector<TestJpeg> jpegs = test_jpegs();
  const std::vector<JpegCrop> crops = crops_of(jpegs);
  std::vector<JpegCrop> mirrored = crops;
  for (auto& crop : mirrored) crop.flip = !crop.flip;
  const model::Shape sample{1, 3, 40, 48};
  const auto per_sample = static_cast<std::size_t>(sample.per_sample()), bytes = crops.size() * per_sample;
  backend::CpuBackend twin(1);
  const uint8_t* twin_plain = twin.decode_jpegs(crops, sample);
  const std::vector<uint8_t> want(twin_plain, twin_plain + bytes);
  const uint8_t* twin_mirrored = twin.decode_jpegs(mirrored, sample);
  const std::vector<uint8_t> want_mirrored(twin_mirrored, twin_mirrored + bytes);
  const auto expect_follows = [&](const uint8_t* device, const std::vector<uint8_t>& expected, const char* which) {
    std::vector<uint8_t> got(bytes);
    cuda().to_host(got.data(), device, bytes);
    for (std::size_t i = 0; i < crops.size(); ++i) {
      const auto from = expected.begin() + static_cast<std::ptrdiff_t>(i * per_sample);
      EXPECT_LE(mean_difference(got.data() + i * per_sample,
                                std::vector<uint8_t>(from, from + static_cast<std::ptrdiff_t>(per_sample))),
                kMaxMeanDifference)
          << "sample " << i << " of " << which;
    }
  };
  const auto on_another_thread = [](auto work) { std::thread(work).join(); };
  std::unique_ptr<model::JpegSlots> slots = cuda().make_jpeg_slots(2);
  on_another_thread([&] { slots->decode(0, crops, sample); });
  const uint8_t* first = slots->use(0);
  on_another_thread([&] { slots->decode(1, mirrored, sample); });
  const uint8_t* second = slots->use(1);
  EXPECT_NE(first, second);
  expect_follows(first, want, "slot 0");
  expect_follows(second, want_mirrored, "slot 1");
  slots->release(0);
  on_another_thread([&] { slots->decode(0, mirrored, sample); });
  expect_follows(second, want_mirrored, "slot 1 while slot 0 was decoded into again");
  slots->release(1);
  expect_follows(slots->use(0), want_mirrored, "slot 0 decoded again");
}

// A batch with one bad sample at index 2 throws UndecodableJpeg naming it, and the decoder decodes the next batch.
TEST_F(CudaJpegDecoder, NamesTheSampleItCannotDecode) {
  const std::vector<TestJpeg> jpegs = test_jpegs();
  std::vector<JpegCrop> crops = crops_of(jpegs);
  crops.resize(4);
  const kernels::cpu::SampleExtent extent{3, 32, 32};
  const std::vector<uint8_t> not_a_jpeg(500, 0x5a);
  const std::vector<uint8_t> cut_header(jpegs[0].bytes.begin(), jpegs[0].bytes.begin() + 40);  // before the frame
  for (const bool allow_hardware : {true, false}) {
    JpegBatchDecoder decoder(cuda().stream(), {allow_hardware, host_decode});
    for (const auto* bad : {&not_a_jpeg, &cut_header}) {
      std::vector<JpegCrop> batch = crops;
      batch[2].jpeg = *bad;
      try {
        decode(decoder, batch, extent);
        ADD_FAILURE() << "a batch with " << (bad == &not_a_jpeg ? "bytes that are no JPEG" : "a cut header")
                      << " at sample 2 decoded";
      } catch (const kernels::UndecodableJpeg& e) {
        EXPECT_EQ(e.index(), 2) << e.what();
        EXPECT_NE(std::string(e.what()).find("sample 2 of the batch"), std::string::npos) << e.what();
      }
    }
    std::vector<JpegCrop> wrong_size = crops;
    wrong_size[1].height += 1;
    EXPECT_THROW(decode(decoder, wrong_size, extent), kernels::UndecodableJpeg);
    const std::vector<uint8_t> after = decode(decoder, crops, extent);
    EXPECT_LE(mean_difference(after.data(), cpu_sample(jpegs[0], crops[0], extent)), kMaxMeanDifference);
  }
}

// Without a device: the check macro's message and the refused sample's, as a caller sees them.
TEST(NvjpegErrors, NameTheCallTheStatusAndTheSample) {
  try {
    NVJPEG_CHECK(3);  // NVJPEG_STATUS_BAD_JPEG, as nvJPEG returns it
    FAIL() << "NVJPEG_CHECK did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ExitCode::library);
    for (const char* part : {"nvJPEG call failed", "NVJPEG_STATUS_BAD_JPEG", "test_gpu_jpeg_decode.cpp:"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " not in: " << what;
  }
  EXPECT_NE(kernels::cuda::nvjpeg_status_text(99).find("99"), std::string::npos);
  const kernels::UndecodableJpeg refused(7, "nvJPEG refused it");
  EXPECT_EQ(refused.index(), 7);
  EXPECT_EQ(refused.code(), ExitCode::data);
  EXPECT_STREQ(refused.what(), "sample 7 of the batch: nvJPEG refused it");
}

}  // namespace
}  // namespace ringtrain::gpu_test
