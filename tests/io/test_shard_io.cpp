// Proves write_split and ShardReader agree: every sample comes back byte for byte in the order asked for
// (shuffled, repeated, crossing shards and chunks), labels are range-checked, the writer's refusals, and the
// CRC-32C of images and labels that `inspect` verifies.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <thread>

#include "io/inspect.h"
#include "io/shard_reader.h"
#include "io/shard_writer.h"
#include "io_test_support.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

using testing::IoTest;

class ShardRoundTrip : public IoTest {
 protected:
  // Reads `indices` and checks each returned sample is global sample range.begin + index.
  static void read_and_check(ShardReader& reader, SampleRange range, const std::vector<int64_t>& indices,
                             int classes) {
    const auto bytes = static_cast<std::size_t>(reader.meta().shape.elements());
    std::vector<uint8_t> images(indices.size() * bytes, 0xEE);
    std::vector<int32_t> labels(indices.size(), -1);
    reader.read(indices, images, labels);
    std::vector<uint8_t> expected(bytes);
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const int64_t g = range.begin + indices[i];
      testing::fill_signature(g, expected);
      ASSERT_TRUE(std::equal(expected.begin(), expected.end(), images.begin() + static_cast<std::ptrdiff_t>(i * bytes)))
          << "sample at position " << i << " (index " << indices[i] << ") differs";
      ASSERT_EQ(labels[i], g % classes);
    }
  }
};

TEST_F(ShardRoundTrip, RandomIndexListsWithRepeatsComeBackInOrder) {
  const DatasetMeta meta = testing::test_meta({3, 5, 7}, 6);
  const fs::path split_dir = dir() / "train";
  // 9 shards of 22 or 23 samples, 8-sample chunks: runs cross chunk and shard boundaries.
  write_split(split_dir, meta, {.shards = 9, .samples = 203, .chunk_samples = 8}, testing::signature_source(meta), false);

  const SplitIndex split = open_split(split_dir);
  EXPECT_EQ(split.meta.shape, meta.shape);
  EXPECT_EQ(split.meta.num_classes, 6);
  EXPECT_EQ(split.meta.mean, meta.mean);
  EXPECT_EQ(split.meta.stddev, meta.stddev);
  EXPECT_EQ(split.meta.provenance, "io tests");
  ASSERT_EQ(split.shards.size(), 9u);
  EXPECT_EQ(split.total_samples(), 203);
  for (std::size_t k = 0; k < 9; ++k) {
    EXPECT_EQ(split.shards[k].samples, k < 203 % 9 ? 23 : 22) << "first total%K shards get one more";
    EXPECT_EQ(split.shards[k].path.filename(), testing::shard_name(static_cast<int>(k), 9));
  }

  const SampleRange all{0, 203};
  ShardReader reader(split, all);
  EXPECT_EQ(reader.opened_files().size(), 9u);
  std::mt19937_64 rng(42);
  for (int batch = 0; batch < 40; ++batch) {
    std::vector<int64_t> indices(static_cast<std::size_t>(1 + batch * 3));
    std::uniform_int_distribution<int64_t> pick(0, 202);
    for (auto& index : indices) index = pick(rng);
    if (indices.size() > 3) indices[2] = indices[0];  // a guaranteed repeat
    read_and_check(reader, all, indices, 6);
  }
  std::vector<int64_t> every(203);  // sorted and descending: long runs across every shard
  std::iota(every.begin(), every.end(), 0);
  read_and_check(reader, all, every, 6);
  std::reverse(every.begin(), every.end());
  read_and_check(reader, all, every, 6);
  read_and_check(reader, all, {5, 5, 5, 6, 6, 4}, 6);  // repeats within a run
  read_and_check(reader, all, {}, 6);
}

TEST_F(ShardRoundTrip, PartitionLocalIndicesOfASubRange) {
  const DatasetMeta meta = testing::test_meta({2, 3, 3}, 4);
  write_split(dir(), meta, {.shards = 4, .samples = 50, .chunk_samples = 5}, testing::signature_source(meta), false);
  const SplitIndex split = open_split(dir());
  const SampleRange range{17, 33};  // inside shards 1 (13..25) and 2 (26..37)
  ShardReader reader(split, range);
  ASSERT_EQ(reader.opened_files().size(), 2u);
  EXPECT_EQ(reader.opened_files()[0], split.shards[1].path);
  EXPECT_EQ(reader.opened_files()[1], split.shards[2].path);
  read_and_check(reader, range, {15, 0, 8, 9, 7, 15}, 4);
}

TEST_F(ShardRoundTrip, RejectsMisSizedBuffersAndIndicesOutsideThePartition) {
  const DatasetMeta meta = testing::test_meta({1, 2, 2}, 3);
  write_split(dir(), meta, {.shards = 2, .samples = 10}, testing::signature_source(meta), false);
  ShardReader reader(open_split(dir()), {0, 10});
  std::vector<uint8_t> images(4 * 2);
  std::vector<int32_t> labels(2);
  const std::vector<int64_t> outside{0, 10};
  EXPECT_THROW(reader.read(outside, images, labels), Error);
  const std::vector<int64_t> three{0, 1, 2};
  EXPECT_THROW(reader.read(three, images, labels), Error);
}

TEST_F(ShardRoundTrip, TwoReadersOnTwoThreadsReadCorrectly) {
  const DatasetMeta meta = testing::test_meta({3, 8, 8}, 5);
  write_split(dir(), meta, {.shards = 3, .samples = 300, .chunk_samples = 16}, testing::signature_source(meta), false);
  const SplitIndex split = open_split(dir());
  std::vector<std::string> failures(2);
  auto work = [&](int id) {
    try {
      const SampleRange range{id * 150, id * 150 + 150};
      ShardReader reader(split, range);
      std::mt19937_64 rng(static_cast<uint64_t>(id));
      std::vector<int64_t> indices(32);
      std::vector<uint8_t> images(32 * 192), expected(192);
      std::vector<int32_t> labels(32);
      for (int step = 0; step < 200; ++step) {
        for (auto& index : indices) index = static_cast<int64_t>(rng() % 150);
        reader.read(indices, images, labels);
        for (std::size_t i = 0; i < 32; ++i) {
          testing::fill_signature(range.begin + indices[i], expected);
          if (!std::equal(expected.begin(), expected.end(), images.begin() + static_cast<std::ptrdiff_t>(i * 192)))
            throw std::runtime_error("wrong sample");
        }
      }
    } catch (const std::exception& e) {
      failures[static_cast<std::size_t>(id)] = e.what();
    }
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

TEST_F(ShardRoundTrip, LabelOutOfRangeIsADataErrorNamingTheShard) {
  testing::write_raw_split(dir(), {6, 6});
  testing::RawShard bad;
  bad.first_sample = 6;
  bad.samples = 6;
  bad.labels = {0, 1, 2, 10, 3, 4};  // 10 classes: label 10 is one too many
  bad.shard_index = 1;
  bad.shard_count = 2;
  const fs::path bad_path = dir() / testing::shard_name(1, 2);
  testing::write_raw_shard(bad_path, bad);
  const SplitIndex split = open_split(dir());  // headers only: labels are the reader's business
  testing::expect_data_error([&] { ShardReader reader(split, {0, 12}); }, {bad_path.string(), "label 10", "[0, 10)"});
  testing::expect_data_error([&] { ShardReader reader(split, {5, 10}); }, {bad_path.string(), "label 10"});
  ShardReader rank0(split, {0, 6});  // a partition that avoids the bad shard still works
  EXPECT_EQ(rank0.opened_files().size(), 1u);
}

TEST_F(ShardRoundTrip, WriterRefusesExistingShardsUnlessOverwriting) {
  const DatasetMeta meta = testing::test_meta({1, 2, 2}, 3);
  write_split(dir(), meta, {.shards = 3, .samples = 9}, testing::signature_source(meta), false);
  testing::expect_data_error(
      [&] { write_split(dir(), meta, {.shards = 2, .samples = 9}, testing::signature_source(meta), false); },
      {dir().string(), "--overwrite"});
  // Overwriting with fewer shards removes the old ones, so the split stays consistent.
  write_split(dir(), meta, {.shards = 2, .samples = 9}, testing::signature_source(meta), true);
  const SplitIndex split = open_split(dir());
  EXPECT_EQ(split.shards.size(), 2u);
  for (const auto& entry : fs::directory_iterator(dir())) EXPECT_EQ(entry.path().extension(), ".h5");
}

TEST_F(ShardRoundTrip, WriterRejectsBadOptionsAndBadSourceLabels) {
  const DatasetMeta meta = testing::test_meta({1, 2, 2}, 3);
  testing::expect_data_error(
      [&] { write_split(dir(), meta, {.shards = 5, .samples = 4}, testing::signature_source(meta), false); },
      {"4 samples cannot fill 5 shards"});
  const SampleSource bad_labels = [](int64_t, int64_t count, std::span<uint8_t>, std::span<int32_t> labels) {
    for (int64_t i = 0; i < count; ++i) labels[static_cast<std::size_t>(i)] = 3;
  };
  testing::expect_data_error([&] { write_split(dir(), meta, {.shards = 1, .samples = 4}, bad_labels, false); },
                             {"label 3", "[0, 3)"});
  // The failed shard left neither a final nor a temporary file behind.
  EXPECT_TRUE(fs::is_empty(dir()));
}

// `ringtrain import`'s split: one shard of no samples whose description (shape, classes, normalisation, names) reads
// back as it was written, and which `inspect` finds sound.
TEST_F(ShardRoundTrip, ADescriptionSplitHoldsNoSamplesAndReadsBackItsMeta) {
  DatasetMeta meta = testing::test_meta({3, 5, 4}, 7);
  meta.class_names = {"a", "b", "c", "d", "e", "f", "g"};
  write_description_split(dir(), meta, false);
  const SplitIndex split = open_split(dir());
  EXPECT_EQ(split.total_samples(), 0);
  EXPECT_EQ(split.meta.shape, meta.shape);
  EXPECT_EQ(split.meta.num_classes, 7);
  EXPECT_EQ(split.meta.mean, meta.mean);
  EXPECT_EQ(split.meta.stddev, meta.stddev);
  EXPECT_EQ(split.meta.class_names, meta.class_names);
  EXPECT_TRUE(inspect_split(dir()).valid()) << format_report(inspect_split(dir()));
  write_description_split(dir(), meta, true);  // a second import over the first
  EXPECT_EQ(open_split(dir()).shards.size(), 1u);
}

// Overwrites the first element of row `row` of `dataset` in shard `file` (leaving its CRC): a flipped byte.
void overwrite_row(const fs::path& file, const char* dataset, hsize_t row, uint8_t value) {
  const hid_t f = testing::ok(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen");
  const hid_t set = testing::ok(H5Dopen2(f, dataset, H5P_DEFAULT), "H5Dopen2");
  const hid_t space = testing::ok(H5Dget_space(set), "H5Dget_space");
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> start(static_cast<std::size_t>(rank), 0), count(static_cast<std::size_t>(rank), 1);
  start[0] = row;
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  const hsize_t one = 1;
  const hid_t memory = H5Screate_simple(1, &one, nullptr);
  testing::ok(H5Dwrite(set, H5T_NATIVE_UINT8, memory, space, H5P_DEFAULT, &value), "H5Dwrite");
  H5Sclose(memory), H5Sclose(space), H5Dclose(set), H5Fclose(f);
}

// Shard data has no HDF5 filter checksum (a reader's sample must be one plain byte range): the CRC-32C the writer
// stores is what proves every image and label byte. Training proves the chunks' presence (open_split) and the
// labels (the reader, AFlippedLabelIsCaughtByTheReaderNamingTheShard), not every image byte: that is `inspect`'s.
TEST_F(ShardRoundTrip, InspectVerifiesEveryByteAgainstTheCrc) {
  const DatasetMeta meta = testing::test_meta({1, 4, 4}, 3);
  write_split(dir(), meta, {.shards = 2, .samples = 40, .chunk_samples = 8}, testing::signature_source(meta), false);
  SplitReport report = inspect_split(dir());
  ASSERT_TRUE(report.valid()) << format_report(report);
  EXPECT_TRUE(report.shards[1].unchecked.empty());
  EXPECT_NE(format_report(report).find("matched to its CRC-32C"), std::string::npos);

  const fs::path victim = dir() / testing::shard_name(1, 2);
  overwrite_row(victim, shard_names::images, 13, 0xA5);
  overwrite_row(victim, shard_names::labels, 3, 0);  // global sample 23: label 23 % 3 = 2, still a valid class
  report = inspect_split(dir());
  const std::string text = format_report(report);
  EXPECT_FALSE(report.valid());
  EXPECT_NE(text.find("shard '" + victim.string() + "' is damaged: its dataset 'images' fails its checksum (CRC-32C"),
            std::string::npos) << text;
  EXPECT_NE(text.find("its dataset 'labels' fails its checksum (CRC-32C"), std::string::npos) << text;
  EXPECT_NO_THROW(open_split(dir()));
}

// A label flipped to another valid class is caught when a reader opens the shard (its labels are read whole and
// checked against their CRC-32C), naming the shard; a partition that avoids the shard still reads.
TEST_F(ShardRoundTrip, AFlippedLabelIsCaughtByTheReaderNamingTheShard) {
  const DatasetMeta meta = testing::test_meta({1, 4, 4}, 3);
  write_split(dir(), meta, {.shards = 2, .samples = 40, .chunk_samples = 8}, testing::signature_source(meta), false);
  const fs::path victim = dir() / testing::shard_name(1, 2);
  overwrite_row(victim, shard_names::labels, 3, 0);  // global sample 23: label 23 % 3 = 2, still a valid class
  const SplitIndex split = open_split(dir());
  testing::expect_data_error([&] { ShardReader reader(split, {0, 40}); },
                             {victim.string(), "labels fail their checksum"});
  ShardReader first_shard(split, {0, 20});
  EXPECT_EQ(first_shard.opened_files().size(), 1u);
}

// A shard of an older ringtrain has no CRC-32C: still valid, and the report says its bytes were not all proven.
TEST_F(ShardRoundTrip, ShardsWithoutCrcAreValidAndSaySo) {
  const DatasetMeta meta = testing::test_meta({1, 4, 4}, 3);
  write_split(dir(), meta, {.shards = 1, .samples = 10}, testing::signature_source(meta), false);
  const fs::path shard = dir() / testing::shard_name(0, 1);
  const hid_t f = testing::ok(H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen");
  for (const char* name : {shard_names::images, shard_names::labels}) {
    const hid_t set = testing::ok(H5Dopen2(f, name, H5P_DEFAULT), "H5Dopen2");
    EXPECT_GE(H5Adelete(set, "crc32c"), 0) << name;
    H5Dclose(set);
  }
  {
    // A shard of an older ringtrain: no CRCs and no mark saying it has them. With the mark, the loss is damage.
    const SplitReport marked = inspect_split(dir());
    EXPECT_FALSE(marked.valid());
    EXPECT_NE(format_report(marked).find("has lost its CRC-32C"), std::string::npos) << format_report(marked);
  }
  EXPECT_GE(H5Adelete(f, "array_checksums"), 0);
  H5Fclose(f);
  const SplitReport report = inspect_split(dir());
  ASSERT_TRUE(report.valid()) << format_report(report);
  EXPECT_EQ(report.shards[0].unchecked, (std::vector<std::string>{"labels", "images"}));
  EXPECT_NE(format_report(report).find("1 of them carry no CRC-32C"), std::string::npos) << format_report(report);
}

}  // namespace
}  // namespace ringtrain::io
