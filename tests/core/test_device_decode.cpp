// Proves the path of data.decode = gpu on the CPU twin, which is its reference: Backend::decode_jpegs makes each
// sample as the whole photo's decode cropped by kernels/crop_resample, from block means where the crop shrinks by 2
// or more (what the CUDA decoder makes of nvJPEG's pixels), close to the loader's DCT-scaled decode on large photos, names the batch position of a sample that does not decode, and keeps a batch until the call after next;
// and a loader handing JPEG bytes with their crops (BatchForm::jpegs) through a DeviceBatch yields, bit for bit,
// the input the loader's own decoding yields where the crops need the full DCT scale (photos under twice the
// sample's side), naming the shard and sample of a JPEG the device cannot decode; and the same through DecodeAhead,
// the decode on a thread of its own that training uses; with data.decode_regions, each crop's region JPEG handed
// over instead of the photo, within a rounding of the same samples; and the memory a run counts for the decoded samples.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "data/batch_loader.h"
#include "data/decode_ahead.h"
#include "data/device_crop.h"
#include "data/device_batch.h"
#include "data/photo_sample.h"
#include "io/image_decode.h"
#include "io/jpeg_encode.h"
#include "io/partition.h"
#include "kernels/cpu/crop_resample.h"
#include "tests/io/encoded_split.h"
#include "tests/io/io_test_support.h"
#include "tests/io/jpeg_test_images.h"

namespace ringtrain::train {
namespace {

using io::testing::EncodedPhoto;
using io::testing::IoTest;

EncodedPhoto photo(int height, int width, int channels, int seed) {
  return {io::testing::encode_test_jpeg(io::testing::photo_like(height, width, channels, seed), 85), height, width,
          seed % 3};
}

// The reference: libjpeg's whole image brought to `channels`, the crop resampled from it.
std::vector<uint8_t> reference(const EncodedPhoto& p, const PhotoCrop& crop, const model::Shape& sample) {
  const io::DecodedImage image = io::convert_channels(io::decode_image_bytes("photo.jpg", p.jpeg), sample.c);
  std::vector<uint8_t> out(static_cast<std::size_t>(sample.per_sample()));
  kernels::cpu::averaged_crop_resample({image.pixels.data(), image.height, image.width, image.channels,
                                        int64_t{image.width} * image.channels},
                                       crop.window, crop.flip, {sample.c, sample.h, sample.w}, out);
  return out;
}

std::vector<kernels::JpegCrop> crops_of(const std::vector<EncodedPhoto>& photos, const std::vector<PhotoCrop>& crops) {
  std::vector<kernels::JpegCrop> out;
  for (std::size_t i = 0; i < photos.size(); ++i)
    out.push_back({photos[i].jpeg, crops[i].window, crops[i].flip, photos[i].height, photos[i].width});
  return out;
}

TEST(CpuDecodeJpegs, EachSampleIsTheWholeDecodesCropBitForBit) {
  const std::vector<EncodedPhoto> photos{photo(120, 90, 3, 1), photo(61, 200, 3, 2), photo(45, 45, 1, 3),
                                         photo(300, 140, 3, 4)};
  const AugmentSpec spec{AugmentKind::resized_crop_flip};
  for (const int channels : {3, 1}) {
    const model::Shape sample{1, channels, 24, 32};
    std::vector<PhotoCrop> crops;
    for (std::size_t i = 0; i < photos.size(); ++i)
      crops.push_back(random_photo_crop(spec, {5, 1, 0, static_cast<int64_t>(i)}, photos[i].height, photos[i].width));
    backend::CpuBackend cpu(1);
    const uint8_t* made = cpu.decode_jpegs(crops_of(photos, crops), sample);
    const auto per_sample = static_cast<std::size_t>(sample.per_sample());
    for (std::size_t i = 0; i < photos.size(); ++i)
      EXPECT_EQ(std::vector<uint8_t>(made + i * per_sample, made + (i + 1) * per_sample),
                reference(photos[i], crops[i], sample))
          << "sample " << i << ", " << channels << " channel(s)";
  }
}

double mean_difference(const uint8_t* a, const std::vector<uint8_t>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < b.size(); ++i) sum += std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
  return sum / static_cast<double>(b.size());
}

// A photo several times the sample's size: the device path averages blocks of the whole decode where the loader's
// decoder scales its IDCT down (io/jpeg_window.h), and the two stay within a few levels of each other on average;
// two bilinear taps of the whole photo, without the average, skip its fine texture and alias far from both.
TEST(CpuDecodeJpegs, OnALargePhotoItStaysCloseToTheLoadersScaledDecode) {
  const EncodedPhoto big = photo(1200, 1600, 3, 7);
  const PhotoSampling sampling{true, {AugmentKind::resized_crop_flip}, 256, {3, 224, 224}};
  const model::Shape sample{1, 3, 224, 224};
  const io::DecodedImage whole = io::decode_image_bytes("photo.jpg", big.jpeg);
  const kernels::InterleavedImage pixels{whole.pixels.data(), whole.height, whole.width, 3, int64_t{whole.width} * 3};
  backend::CpuBackend cpu(1);
  int shrunk = 0;
  for (int64_t s = 0; s < 6; ++s) {
    const PhotoCrop crop = photo_crop(sampling, {3, 0, 0, s}, 1200, 1600);
    std::vector<uint8_t> loader(static_cast<std::size_t>(sample.per_sample())), taps(loader.size());
    decode_photo_sample(sampling, {3, 0, 0, s}, big.jpeg, 1200, 1600, loader);
    const uint8_t* device = cpu.decode_jpegs(crops_of({big}, {crop}), sample);
    kernels::cpu::crop_resample(pixels, crop.window, crop.flip, {3, 224, 224}, taps);
    const double averaged = mean_difference(device, loader), aliased = mean_difference(taps.data(), loader);
    SCOPED_TRACE(testing::Message() << "sample " << s << ", window " << crop.window.height << " x "
                                    << crop.window.width << ": averaged " << averaged << ", aliased " << aliased);
    EXPECT_LT(averaged, 2.0);  // 0.5-1.4 here
    if (kernels::box_factor(crop.window, 1200, 1600, 224, 224) < 4) continue;
    ++shrunk;
    EXPECT_GT(aliased, 4 * averaged);  // 6.3-6.4 against 0.5 here
  }
  EXPECT_GT(shrunk, 0) << "the crops drawn include one shrinking by 4 or more";
}

// data.decode_regions: the decoder is handed a JPEG of the restart segments each crop covers, with the crop moved to
// its corner. Over crops shrinking by 1, 2, 4 and 8 (block means), flipped and not, and the evaluation crop, the
// samples are the whole photo's but where a tap's position, taken from the region's corner instead of the photo's,
// rounds one ulp apart: a level or two in a value, rarely (fewer than one value in 1,000 is allowed).
TEST(CpuDecodeJpegs, ACropsRegionJpegGivesTheWholePhotosSampleButForRareRoundings) {
  const auto plain = io::testing::encode_test_jpeg(io::testing::photo_like(600, 800, 3, 17), 90);
  const auto region_layout = io::in_region_layout(plain);
  ASSERT_TRUE(region_layout);
  // 1 % to all of the photo's area at 64x64: windows of 69 to 800 pixels, shrinking by 1 to 8.
  const io::SampleShape shape{3, 64, 64};
  const model::Shape sample{1, 3, 64, 64};
  const PhotoSampling training{true, {AugmentKind::resized_crop_flip, 4, 0.01f}, 0, shape};
  const PhotoSampling evaluation{false, {}, 73, shape};
  backend::CpuBackend cpu(1);
  std::set<int> factors;
  int64_t values = 0, rounded_apart = 0;
  int small_crops = 0;
  for (int64_t s = 0; s < 40; ++s) {
    const PhotoCrop crop = photo_crop(s == 0 ? evaluation : training, {4, 0, 0, s}, 600, 800);
    std::vector<uint8_t> read = *region_layout, kept;
    const kernels::JpegCrop region = device_crop(read, crop, 600, 800, shape, true, kept);
    SCOPED_TRACE(testing::Message() << "sample " << s << ", window " << crop.window.height << " x "
                                    << crop.window.width);
    if (crop.window.height * crop.window.width < 0.5f * 600 * 800) {
      EXPECT_LT(region.jpeg.size(), region_layout->size()) << "the region JPEG is handed over";
      EXPECT_LT(region.height * region.width, 600 * 800);
      ++small_crops;
    }
    factors.insert(kernels::box_factor(crop.window, 600, 800, 64, 64));
    const uint8_t* made = cpu.decode_jpegs({&region, 1}, sample);
    const std::vector<uint8_t> from_region(made, made + sample.per_sample());
    const kernels::JpegCrop whole{*region_layout, crop.window, crop.flip, 600, 800};
    const uint8_t* from_whole = cpu.decode_jpegs({&whole, 1}, sample);
    for (std::size_t i = 0; i < from_region.size(); ++i) {
      const int difference = std::abs(static_cast<int>(from_region[i]) - static_cast<int>(from_whole[i]));
      ASSERT_LE(difference, 2) << "value " << i;
      rounded_apart += difference;
    }
    values += static_cast<int64_t>(from_region.size());
  }
  EXPECT_EQ(factors, (std::set<int>{1, 2, 4, 8})) << "the crops drawn shrink by each factor";
  EXPECT_GT(small_crops, 20);
  EXPECT_LT(rounded_apart, values / 1000) << rounded_apart << " of " << values << " values rounded apart";
}

// Bytes not in the region layout, and a crop with data.decode_regions off, are handed over whole, unmoved.
TEST(CpuDecodeJpegs, AJpegNotInTheRegionLayoutIsHandedOverWhole) {
  const auto plain = io::testing::encode_test_jpeg(io::testing::photo_like(120, 160, 3, 18), 90);
  const auto region_layout = io::in_region_layout(plain);
  ASSERT_TRUE(region_layout);
  const PhotoCrop crop{{30.5f, 40.25f, 50, 60}, true};
  for (const auto& [bytes, regions] : {std::pair{plain, true}, std::pair{*region_layout, false}}) {
    std::vector<uint8_t> read = bytes, kept;
    const kernels::JpegCrop handed = device_crop(read, crop, 120, 160, {3, 24, 24}, regions, kept);
    EXPECT_EQ(std::vector<uint8_t>(handed.jpeg.begin(), handed.jpeg.end()), bytes);
    EXPECT_EQ(handed.window.top, 30.5f);
    EXPECT_EQ(handed.window.left, 40.25f);
    EXPECT_TRUE(handed.flip);
    EXPECT_EQ(handed.height, 120);
    EXPECT_EQ(handed.width, 160);
  }
}

TEST(CpuDecodeJpegs, NamesTheBatchPositionOfASampleThatDoesNotDecode) {
  std::vector<EncodedPhoto> photos{photo(40, 50, 3, 1), photo(40, 50, 3, 2), photo(40, 50, 3, 3)};
  const std::vector<PhotoCrop> crops(3, PhotoCrop{{0, 0, 40, 50}, false});
  const model::Shape sample{1, 3, 16, 16};
  backend::CpuBackend cpu(1);
  photos[2].jpeg.assign(300, 0x5a);
  try {
    cpu.decode_jpegs(crops_of(photos, crops), sample);
    ADD_FAILURE() << "bytes that are no JPEG decoded";
  } catch (const kernels::UndecodableJpeg& e) {
    EXPECT_EQ(e.index(), 2) << e.what();
    EXPECT_EQ(e.code(), ExitCode::data);
  }
  photos.pop_back();
  photos[1].height = 41;  // the shard says otherwise
  try {
    cpu.decode_jpegs(crops_of(photos, crops), sample);
    ADD_FAILURE() << "a JPEG of another size than its shard's decoded";
  } catch (const kernels::UndecodableJpeg& e) {
    EXPECT_EQ(e.index(), 1) << e.what();
    EXPECT_NE(std::string(e.what()).find("50x40 pixels where its shard says 50x41"), std::string::npos) << e.what();
  }
}

TEST(CpuDecodeJpegs, ABatchStaysAsMadeUntilTheCallAfterNext) {
  const std::vector<EncodedPhoto> first{photo(40, 50, 3, 1)}, second{photo(40, 50, 3, 7)};
  const std::vector<PhotoCrop> crops(1, PhotoCrop{{0, 0, 40, 50}, false});
  const model::Shape sample{1, 3, 16, 16};
  backend::CpuBackend cpu(1);
  const uint8_t* a = cpu.decode_jpegs(crops_of(first, crops), sample);
  const std::vector<uint8_t> kept(a, a + sample.per_sample());
  const uint8_t* b = cpu.decode_jpegs(crops_of(second, crops), sample);
  EXPECT_NE(a, b);
  EXPECT_EQ(std::vector<uint8_t>(a, a + sample.per_sample()), kept);
  EXPECT_NE(std::vector<uint8_t>(b, b + sample.per_sample()), kept);
}

class JpegBatches : public IoTest {
 protected:
  static constexpr int kBatch = 5;
  static constexpr int64_t kSamples = 20;

  void SetUp() override {
    IoTest::SetUp();
    meta_ = io::testing::test_meta({3, 32, 32}, 3);
    meta_.storage = io::SampleStorage::jpeg;
    meta_.mean = {120.5f, 118.25f, 101.0f};
    meta_.stddev = {60.5f, 58.0f, 64.25f};
    for (int i = 0; i < kSamples; ++i) photos_.push_back(photo(33 + i % 7 * 4, 60 - i % 5 * 6, 3, i));
  }

  void write(const std::vector<EncodedPhoto>& photos) {
    io::testing::write_encoded_split(dir() / "train", meta_, photos, 6);
    split_ = io::open_split(dir() / "train");
  }

  // The work of a training loader (random crops keyed by the batch and sample), decoding on its threads or
  // leaving the decode to the device.
  LoaderWork work(bool on_device, bool regions = false) const {
    const PhotoSampling sampling{true, {AugmentKind::resized_crop_flip}, 37, meta_.shape};
    LoaderWork w;
    w.threads = 3;
    w.form = on_device ? BatchForm::jpegs : BatchForm::pixels;
    w.device_regions = regions;
    if (on_device)
      w.choose_crop = [sampling](int64_t batch, int64_t sample, int height, int width) {
        return photo_crop(sampling, {9, batch, 0, sample}, height, width);
      };
    else
      w.decode = [sampling](int64_t batch, int64_t sample, std::span<const uint8_t> jpeg, int height, int width,
                            std::span<uint8_t> out) {
        decode_photo_sample(sampling, {9, batch, 0, sample}, jpeg, height, width, out);
      };
    return w;
  }

  enum class Decode { by_loader, on_device, ahead_on_device };

  std::vector<std::vector<float>> inputs(bool on_device) {
    return inputs(on_device ? Decode::on_device : Decode::by_loader);
  }

  // Each batch's network input, decoded as `how` says; ahead_on_device through DecodeAhead's thread. `handed`, when
  // given, gets the pixels of each photo or region the device was handed.
  std::vector<std::vector<float>> inputs(Decode how, bool regions = false, int64_t* handed = nullptr) {
    const bool on_device = how != Decode::by_loader;
    io::ShardReader reader(split_, io::rank_range(kSamples, 0, 1));
    const int64_t batches = kSamples / kBatch;
    BatchLoader loader(
        reader, kBatch, batches,
        [](int64_t i, std::vector<int64_t>& out) {
          out.clear();
          for (int k = 0; k < kBatch; ++k) out.push_back((i * kBatch + k) * 7 % kSamples);
        },
        2, work(on_device, regions));
    backend::CpuBackend cpu(1);
    const io::SampleShape& s = meta_.shape;
    DeviceBatch device(cpu, {kBatch, s.channels, s.height, s.width}, BatchForm::pixels);
    std::vector<std::vector<float>> out;
    if (how == Decode::ahead_on_device) {
      DecodeAhead ahead(cpu, loader, {kBatch, s.channels, s.height, s.width});
      for (int64_t i = 0; i < batches; ++i) {
        ahead.load(device, ahead.next(nullptr));
        out.emplace_back(device.images(), device.images() + kBatch * s.elements());
      }
      EXPECT_EQ(ahead.times().batches, batches);
      return out;
    }
    for (int64_t i = 0; i < batches; ++i) {
      auto host = loader.next(nullptr);
      EXPECT_EQ(host->form, on_device ? BatchForm::jpegs : BatchForm::pixels);
      if (handed)
        for (int k = 0; k < host->count; ++k) *handed += int64_t{host->crops[static_cast<std::size_t>(k)].height} *
                                                        host->crops[static_cast<std::size_t>(k)].width;
      device.load(*host);
      out.emplace_back(device.images(), device.images() + kBatch * s.elements());
      loader.recycle(std::move(host));
    }
    return out;
  }

  io::DatasetMeta meta_;
  std::vector<EncodedPhoto> photos_;
  io::SplitIndex split_;
};

// What a run counts for the samples decoded on the device (memory_needed_mb, memory_planned_mb, the model's budget):
// the decode-ahead's two slots and decode_jpegs' two, each a batch of uint8 samples.
TEST(DeviceDecodeBytes, AreFourBatchesOfUint8Samples) {
  EXPECT_EQ(device_decode_bytes({6, 3, 24, 32}), 4.0 * 6 * 3 * 24 * 32);
  EXPECT_EQ(device_decode_bytes({256, 1, 28, 28}), 4.0 * 256 * 28 * 28);
  // Evaluation alone decodes into decode_jpegs' two slots.
  EXPECT_EQ(evaluation_decode_bytes({6, 3, 24, 32}), 2.0 * 6 * 3 * 24 * 32);
}

TEST_F(JpegBatches, DecodedOnTheDeviceEqualsDecodedByTheLoader) {
  write(photos_);
  const auto loader = inputs(false), device = inputs(true);
  ASSERT_EQ(loader.size(), device.size());
  for (std::size_t b = 0; b < loader.size(); ++b)
    EXPECT_EQ(std::memcmp(loader[b].data(), device[b].data(), loader[b].size() * sizeof(float)), 0) << "batch " << b;
}

// A one-channel dataset of colour photos: the loader decodes each JPEG's own luma (Y), as nvJPEG's Y plane is; the
// device's decode (the CPU twin here) gives the same bits, not luma computed again from the rounded RGB.
TEST_F(JpegBatches, DecodedOnTheDeviceInGrayEqualsDecodedByTheLoader) {
  meta_ = io::testing::test_meta({1, 32, 32}, 3);
  meta_.storage = io::SampleStorage::jpeg;
  meta_.mean = {117.5f};
  meta_.stddev = {59.0f};
  // Saturated colours, whose RGB clips when decoded, so luma computed from it is not the JPEG's Y.
  for (std::size_t i = 0; i < photos_.size(); ++i) {
    io::testing::TestPixels pixels = io::testing::photo_like(photos_[i].height, photos_[i].width, 3, static_cast<int>(i));
    for (std::size_t v = 0; v < pixels.values.size(); v += 3) {
      pixels.values[v] = static_cast<uint8_t>(v / 3 % 2 ? 255 : pixels.values[v]);
      pixels.values[v + 2] = static_cast<uint8_t>(v / 3 % 5 ? 0 : 255);
    }
    photos_[i].jpeg = io::testing::encode_test_jpeg(pixels, 85);
  }
  write(photos_);
  const auto loader = inputs(false), device = inputs(true);
  ASSERT_EQ(loader.size(), device.size());
  for (std::size_t b = 0; b < loader.size(); ++b)
    EXPECT_EQ(std::memcmp(loader[b].data(), device[b].data(), loader[b].size() * sizeof(float)), 0) << "batch " << b;
}

// data.decode_regions through the loader: photos in the region layout are handed over as their crops' regions (fewer
// pixels than the photos'), and the network input is the loader's own decoding's within one level of a pixel.
TEST_F(JpegBatches, WithDecodeRegionsTheDeviceIsHandedRegionsAndMakesTheLoadersInput) {
  int64_t photo_pixels = 0;
  for (EncodedPhoto& p : photos_) {
    p.jpeg = *io::in_region_layout(p.jpeg);
    photo_pixels += int64_t{p.height} * p.width;
  }
  write(photos_);
  int64_t handed = 0;
  const auto loader = inputs(Decode::by_loader), device = inputs(Decode::on_device, true, &handed);
  EXPECT_GT(handed, 0);
  EXPECT_LT(handed, photo_pixels) << "every batch together takes each photo once";
  const float level = 1.0f / *std::min_element(meta_.stddev.begin(), meta_.stddev.end());
  ASSERT_EQ(loader.size(), device.size());
  for (std::size_t b = 0; b < loader.size(); ++b)
    for (std::size_t i = 0; i < loader[b].size(); ++i)
      ASSERT_NEAR(loader[b][i], device[b][i], level * 1.001f) << "batch " << b << ", value " << i;
}

TEST_F(JpegBatches, AJpegTheDeviceCannotDecodeIsNamedByShardAndSample) {
  photos_[8].jpeg.assign(400, 0x33);  // its checksum is of these bytes: only decoding finds them wrong
  write(photos_);
  try {
    inputs(true);
    ADD_FAILURE() << "a batch holding bytes that are no JPEG loaded";
  } catch (const DataError& e) {
    const std::string what = e.what();
    for (const char* part : {"shard-00001-of-00004.h5", "sample 2", "does not decode on the device",
                             "prepare images` with --overwrite"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " not in: " << what;
  }
}

TEST_F(JpegBatches, DecodedAheadOnItsOwnThreadEqualsDecodedByTheLoader) {
  write(photos_);
  const auto loader = inputs(Decode::by_loader), ahead = inputs(Decode::ahead_on_device);
  ASSERT_EQ(loader.size(), ahead.size());
  for (std::size_t b = 0; b < loader.size(); ++b)
    EXPECT_EQ(std::memcmp(loader[b].data(), ahead[b].data(), loader[b].size() * sizeof(float)), 0) << "batch " << b;
}

TEST_F(JpegBatches, AJpegTheDecodeAheadCannotDecodeIsNamedOnTheStepsThread) {
  photos_[8].jpeg.assign(400, 0x33);
  write(photos_);
  try {
    inputs(Decode::ahead_on_device);
    ADD_FAILURE() << "a batch holding bytes that are no JPEG loaded";
  } catch (const DataError& e) {
    EXPECT_EQ(e.code(), ExitCode::data);
    const std::string what = e.what();
    for (const char* part : {"shard-00001-of-00004.h5", "sample 2", "does not decode on the device"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " not in: " << what;
  }
}

// Stopping mid-run (an error elsewhere, a preemption): the decode thread and the loader end, nothing hangs.
TEST_F(JpegBatches, DecodeAheadLeftMidRunEndsItsThreads) {
  write(photos_);
  io::ShardReader reader(split_, io::rank_range(kSamples, 0, 1));
  BatchLoader loader(
      reader, kBatch, kSamples / kBatch, [](int64_t i, std::vector<int64_t>& out) {
        out.clear();
        for (int k = 0; k < kBatch; ++k) out.push_back(i * kBatch + k);
      },
      0, work(true));
  backend::CpuBackend cpu(1);
  const io::SampleShape& s = meta_.shape;
  DeviceBatch device(cpu, {kBatch, s.channels, s.height, s.width}, BatchForm::pixels);
  DecodeAhead ahead(cpu, loader, {kBatch, s.channels, s.height, s.width});
  ahead.load(device, ahead.next(nullptr));
  // Kept, never handed back: the loader's one batch is in it, so the decode thread waits in the loader's next()
  // and the loader for room; leaving the scope must end both.
  auto held = ahead.next(nullptr);
  EXPECT_EQ(held->host->index, 1);
}

}  // namespace
}  // namespace ringtrain::train
