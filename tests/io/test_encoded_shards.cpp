// Encoded (JPEG) shards and the streaming `prepare images`: what ShardAppender writes, open_split, the reader and
// inspect read back byte for byte; a flipped byte is caught by its sample's checksum and named; a folder of photos
// becomes a valid split with the images that decode, and a strict prepare that meets a bad image leaves nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "common/error.h"
#include "common/host_memory.h"
#include "io/hdf5_lock.h"
#include "io/inspect.h"
#include "io/partition.h"
#include "io/prepare_images.h"
#include "io/shard_appender.h"
#include "io/shard_reader.h"
#include "io/shard_writer.h"
#include "encoded_split.h"
#include "io_test_support.h"
#include "jpeg_test_images.h"

namespace ringtrain::io {
namespace {

using testing::IoTest;
namespace fs = std::filesystem;

using testing::EncodedPhoto;

std::vector<EncodedPhoto> some_photos(int count) {
  std::vector<EncodedPhoto> photos;
  for (int i = 0; i < count; ++i) {
    const int h = 40 + 7 * i, w = 90 - 3 * i;
    photos.push_back({testing::encode_test_jpeg(testing::photo_like(h, w, 3, i), 80), h, w, i % 3});
  }
  return photos;
}

DatasetMeta jpeg_meta() {
  DatasetMeta meta = testing::test_meta({3, 32, 32}, 3);
  meta.storage = SampleStorage::jpeg;
  return meta;
}

void write_encoded_split(const fs::path& dir, const std::vector<EncodedPhoto>& photos, std::size_t per_shard) {
  testing::write_encoded_split(dir, jpeg_meta(), photos, per_shard);
}

using EncodedShards = IoTest;

TEST_F(EncodedShards, TheReaderGivesBackEveryPhotosBytesSizeAndLabel) {
  const auto photos = some_photos(11);
  write_encoded_split(dir() / "train", photos, 4);
  const SplitIndex split = open_split(dir() / "train");
  EXPECT_EQ(split.meta.storage, SampleStorage::jpeg);
  EXPECT_EQ(split.total_samples(), 11);
  EXPECT_EQ(split.meta.shape, (SampleShape{3, 32, 32}));
  ShardReader reader(split, {0, 11});
  const std::vector<int64_t> order{10, 0, 5, 5, 3, 8, 1};
  EncodedBatch batch;
  std::vector<int32_t> labels(order.size());
  reader.read_encoded(order, batch, labels);
  ASSERT_EQ(batch.count(), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const EncodedPhoto& expected = photos[static_cast<std::size_t>(order[i])];
    const auto got = batch.sample(i);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.jpeg.begin(), expected.jpeg.end())) << "sample " << order[i];
    EXPECT_EQ(batch.heights[i], expected.height);
    EXPECT_EQ(batch.widths[i], expected.width);
    EXPECT_EQ(labels[i], expected.label);
  }
  const SplitReport report = inspect_split(dir() / "train");
  EXPECT_TRUE(report.valid()) << format_report(report);
}

// What a loader's queue is sized by: the longest JPEG among the partition's samples (over every shard it spans, and
// only those); a raw split's is C x H x W (RawSamplesAppendedReadBackAsWritten).
TEST_F(EncodedShards, TheLargestStoredSampleIsThePartitionsLongestJpeg) {
  const auto photos = some_photos(11);
  write_encoded_split(dir() / "train", photos, 4);
  const SplitIndex split = open_split(dir() / "train");
  const auto longest = [&](int64_t begin, int64_t end) {
    std::size_t bytes = 0;
    for (int64_t i = begin; i < end; ++i) bytes = std::max(bytes, photos[static_cast<std::size_t>(i)].jpeg.size());
    return static_cast<int64_t>(bytes);
  };
  EXPECT_EQ(ShardReader(split, {0, 11}).largest_stored_sample_bytes(), longest(0, 11));
  EXPECT_EQ(ShardReader(split, {3, 9}).largest_stored_sample_bytes(), longest(3, 9));
  EXPECT_NE(longest(3, 9), longest(0, 11)) << "the test's photos should make the two partitions differ";
}

TEST_F(EncodedShards, AFlippedByteIsCaughtByItsSamplesChecksumAndNamed) {
  const auto photos = some_photos(6);
  write_encoded_split(dir() / "train", photos, 6);
  const fs::path shard = dir() / "train" / "shard-00000-of-00001.h5";
  // Sample 4's bytes lie in the file as they were appended: find them and flip one in the middle.
  std::ifstream in(shard, std::ios::binary);
  const std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto& target = photos[4].jpeg;
  const auto at = std::search(file.begin(), file.end(), target.begin(), target.end(),
                              [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; });
  ASSERT_NE(at, file.end());
  const auto offset = (at - file.begin()) + static_cast<std::ptrdiff_t>(target.size() / 2);
  {
    std::fstream out(shard, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(offset);
    out.put(static_cast<char>(file[static_cast<std::size_t>(offset)] ^ 0x10));
  }
  ShardReader reader(open_split(dir() / "train"), {0, 6});
  EncodedBatch batch;
  std::vector<int32_t> labels(1);
  const std::vector<int64_t> fine{3}, flipped{4};
  EXPECT_NO_THROW(reader.read_encoded(fine, batch, labels));
  try {
    reader.read_encoded(flipped, batch, labels);
    FAIL() << "a flipped byte was read as a photo";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sample 4"), std::string::npos) << what;
    EXPECT_NE(what.find("checksum"), std::string::npos) << what;
  }
  const SplitReport report = inspect_split(dir() / "train");
  EXPECT_FALSE(report.valid());
  EXPECT_NE(format_report(report).find("sample 4 fails its checksum"), std::string::npos) << format_report(report);
}

// A photo's recorded size is what every decode is checked against: one no JPEG has (a flipped byte made a height
// of 256 into 0, which turned the check off) is refused when the shard opens, naming the sample.
TEST_F(EncodedShards, ARecordedSizeNoJpegHasIsRefusedNamingTheSample) {
  const auto photos = some_photos(6);
  write_encoded_split(dir() / "train", photos, 6);
  const fs::path shard = dir() / "train" / "shard-00000-of-00001.h5";
  {
    const hid_t f = testing::ok(H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen");
    const hid_t set = testing::ok(H5Dopen2(f, shard_names::image_sizes, H5P_DEFAULT), "H5Dopen2");
    std::vector<int32_t> sizes(12);
    testing::ok(H5Dread(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, sizes.data()), "H5Dread");
    sizes[2 * 2] = 0;  // sample 2's height
    testing::ok(H5Dwrite(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, sizes.data()), "H5Dwrite");
    H5Dclose(set), H5Fclose(f);
  }
  try {
    ShardReader reader(open_split(dir() / "train"), {0, 6});
    FAIL() << "a photo of height 0 was accepted";
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sample 2"), std::string::npos) << what;
    EXPECT_NE(what.find("x0 (image_sizes)"), std::string::npos) << what;
  }
}

TEST_F(EncodedShards, RawSamplesAppendedReadBackAsWritten) {
  DatasetMeta meta = testing::test_meta({2, 5, 7}, 4);
  make_split_folder(dir() / "raw");
  const fs::path final_path = dir() / "raw" / shard_file_name(0, 1), temporary = fs::path(final_path).concat(".tmp");
  {
    const Hdf5Lock lock;
    ShardAppender shard({temporary, 0, 1, 1e5}, meta);
    std::vector<uint8_t> sample(70);
    for (int64_t g = 0; g < 150; ++g) {  // more than one chunk of 64
      testing::fill_signature(g, sample);
      shard.append({sample, static_cast<int32_t>(g % 4)});
    }
    shard.commit();
    settle_shard_statistics(temporary, meta.mean, meta.stddev);
  }
  fs::rename(temporary, final_path);
  ShardReader reader(open_split(dir() / "raw"), {0, 150});
  const std::vector<int64_t> order{149, 0, 64, 63, 100};
  std::vector<uint8_t> images(order.size() * 70);
  std::vector<int32_t> labels(order.size());
  reader.read(order, images, labels);
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(testing::signature_of(std::span(images).subspan(i * 70, 70)), order[i]);
    EXPECT_EQ(labels[i], order[i] % 4);
  }
  EXPECT_EQ(reader.largest_stored_sample_bytes(), 70);
}

// A photo folder: two classes of JPEGs, a PNG, and a file that is no image.
void write_photo_folder(const fs::path& root) {
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(root / ("class" + std::to_string(c)));
    for (int i = 0; i < 6; ++i) {
      const auto jpeg = testing::encode_test_jpeg(testing::photo_like(60 + 5 * i, 80 - 3 * i, 3, 10 * c + i), 85);
      std::ofstream(root / ("class" + std::to_string(c)) / (std::to_string(i) + ".jpg"), std::ios::binary)
          .write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
    }
  }
  std::ofstream(root / "class1" / "notes.jpg") << "not an image";
}

ImagesOptions photo_options(const fs::path& dir) {
  ImagesOptions options;
  options.source = dir / "photos";
  options.size = {32, 32};
  options.store = ImageStore::jpeg;
  options.threads = 2;
  options.arrays.out = dir / "out";
  options.arrays.shards = 2;
  options.arrays.test_fraction = 0.25;
  return options;
}

using PrepareImagesStreaming = IoTest;

TEST_F(PrepareImagesStreaming, PhotosBecomeAnEncodedSplitWithTheImagesThatDecode) {
  write_photo_folder(dir() / "photos");
  const ImagesSummary summary = prepare_images(photo_options(dir()));
  EXPECT_EQ(summary.storage, SampleStorage::jpeg);
  EXPECT_EQ(summary.skipped_everywhere, 1);
  ASSERT_EQ(summary.skipped.size(), 1u);
  EXPECT_NE(summary.skipped[0].find("notes.jpg"), std::string::npos);
  const int64_t train = summary.train_per_class[0] + summary.train_per_class[1];
  const int64_t test = summary.test_per_class[0] + summary.test_per_class[1];
  EXPECT_EQ(train + test, 12);
  for (const char* split : {"train", "test"}) {
    const SplitReport report = inspect_split(dir() / "out" / split);
    EXPECT_TRUE(report.valid()) << format_report(report);
    EXPECT_EQ(report.meta.storage, SampleStorage::jpeg);
    for (std::size_t c = 0; c < 3; ++c) {
      EXPECT_GT(report.meta.mean[c], 50.0f);
      EXPECT_GT(report.meta.stddev[c], 1.0f);
    }
  }
  EXPECT_EQ(open_split(dir() / "out" / "train").total_samples(), train);
}

TEST_F(PrepareImagesStreaming, AStrictPrepareThatMeetsABadImageLeavesNoShard) {
  write_photo_folder(dir() / "photos");
  ImagesOptions options = photo_options(dir());
  options.strict = true;
  EXPECT_THROW(prepare_images(options), DataError);
  EXPECT_FALSE(fs::exists(dir() / "out")) << "the folders this prepare made are gone with it";
}

TEST_F(PrepareImagesStreaming, ASampleSizeThatCannotFitIsRefusedBeforeAnyWork) {
  write_photo_folder(dir() / "photos");
  ImagesOptions options = photo_options(dir());
  options.size = {200000, 200000};
  try {
    prepare_images(options);
    FAIL() << "--size 200000 was accepted";
  } catch (const UsageError& e) {  // exit 2: an option's value
    EXPECT_NE(std::string(e.what()).find("--size 200000x200000"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir() / "out" / "train"));
}

// A size one rank could hold, refused where the node's memory is shared by so many ranks that this one's share
// cannot: each rank checks against its share, as training's memory budget does.
TEST_F(PrepareImagesStreaming, ASampleSizeThatTheNodesRanksCannotHoldTogetherIsRefused) {
  if (rank_memory_share(memory_of_process(), 1, "here").bytes <= 0) GTEST_SKIP() << "the system says no memory size";
  write_photo_folder(dir() / "photos");
  ImagesOptions options = photo_options(dir());
  options.size = {64, 64};
  PrepareTeam team;
  team.ranks_on_node = 1 << 30;  // a share of a few bytes
  team.host = "node07";
  try {
    prepare_images(options, team);
    FAIL() << "a share of a few bytes held the samples";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--size 64x64"), std::string::npos) << what;
    if (memory_of_process().own.bytes == 0) {  // no address-space limit of the process's own binds instead
      EXPECT_NE(what.find("ranks on node07"), std::string::npos) << what;
    }
    EXPECT_NE(what.find("fewer ranks a node"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(dir() / "out" / "train"));
}

// Two ranks whose listings of the folder differ (the other rank's plan fingerprint is another number): refused
// before any shard is written, as every rank would refuse it.
TEST_F(PrepareImagesStreaming, RanksThatListedDifferentImagesAreRefusedBeforeAnyWork) {
  write_photo_folder(dir() / "photos");
  PrepareTeam team;
  team.rank = 0, team.ranks = 2;
  team.sum = [](std::span<int64_t> values) {
    for (int64_t& v : values) v += 12345;  // the other rank's fingerprint: not this one's
  };
  try {
    prepare_images(photo_options(dir()), team);
    FAIL() << "two ranks with different listings were accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("the ranks found different images"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir() / "out")) << "refused before any folder or shard was made";
}

}  // namespace
}  // namespace ringtrain::io
