// Proves both dataset builders: Fashion-MNIST shards hold exactly the IDX contents with the known train
// statistics, and synthetic data has the asked-for counts, is reproducible from its seed, and is learnable.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "io/idx_reader.h"
#include "io/inspect.h"
#include "io/prepare.h"
#include "io/shard_reader.h"
#include "io_test_support.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

const fs::path fashion_mnist_source = "/usr/share/datasets/fashion-mnist";

// Every sample of a split, in global order.
struct SplitContents {
  std::vector<uint8_t> images;
  std::vector<int32_t> labels;
};

SplitContents read_everything(const SplitIndex& split) {
  ShardReader reader(split, {0, split.total_samples()});
  std::vector<int64_t> indices(static_cast<std::size_t>(split.total_samples()));
  std::iota(indices.begin(), indices.end(), 0);
  SplitContents contents;
  contents.images.resize(indices.size() * static_cast<std::size_t>(split.meta.shape.elements()));
  contents.labels.resize(indices.size());
  reader.read(indices, contents.images, contents.labels);
  return contents;
}

class PrepareFashionMnist : public testing::IoTest {};

TEST_F(PrepareFashionMnist, ShardsHoldTheIdxContentsAndTrainStatistics) {
  if (!fs::exists(fashion_mnist_source / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not found under " << fashion_mnist_source
                 << " (Debian: apt install dataset-fashion-mnist)";
  prepare_fashion_mnist(fashion_mnist_source, dir(), 8, false);

  const SplitIndex train = open_split(dir() / "train");
  const SplitIndex test = open_split(dir() / "test");
  EXPECT_EQ(train.total_samples(), 60000);
  EXPECT_EQ(test.total_samples(), 10000);
  EXPECT_EQ(train.shards.size(), 8u);
  EXPECT_EQ(test.shards.size(), 8u);
  EXPECT_EQ(train.shard_sizes(), std::vector<int64_t>(8, 7500));
  EXPECT_EQ(train.meta.shape, (SampleShape{1, 28, 28}));
  EXPECT_EQ(train.meta.num_classes, 10);
  ASSERT_EQ(train.meta.mean.size(), 1u);
  ASSERT_EQ(train.meta.stddev.size(), 1u);
  EXPECT_NEAR(train.meta.mean[0], 72.94, 0.1);
  EXPECT_NEAR(train.meta.stddev[0], 90.02, 0.1);
  EXPECT_EQ(test.meta.mean, train.meta.mean) << "the test split must carry the train statistics";
  EXPECT_EQ(test.meta.stddev, train.meta.stddev);
  EXPECT_NE(train.meta.provenance.find("train-images-idx3-ubyte.gz"), std::string::npos) << train.meta.provenance;
  EXPECT_NE(test.meta.provenance.find("t10k-labels-idx1-ubyte.gz"), std::string::npos) << test.meta.provenance;

  const IdxImages idx_images = read_idx_images(fashion_mnist_source / "train-images-idx3-ubyte.gz");
  const std::vector<uint8_t> idx_labels = read_idx_labels(fashion_mnist_source / "train-labels-idx1-ubyte.gz");
  // The first image, the first label, and one sample from the last shard, read through a rank's reader.
  ShardReader reader(train, {0, 60000});
  const std::vector<int64_t> indices{0, 59999};
  std::vector<uint8_t> images(2 * 784);
  std::vector<int32_t> labels(2);
  reader.read(indices, images, labels);
  EXPECT_EQ(labels[0], idx_labels[0]);
  EXPECT_EQ(labels[1], idx_labels[59999]);
  EXPECT_TRUE(std::equal(images.begin(), images.begin() + 784, idx_images.pixels.begin()));
  EXPECT_TRUE(std::equal(images.begin() + 784, images.end(), idx_images.pixels.end() - 784));

  const SplitReport report = inspect_split(dir() / "train");
  EXPECT_TRUE(report.valid()) << format_report(report);
  int64_t total = 0;
  for (const ShardReport& shard : report.shards) total += std::accumulate(shard.class_histogram.begin(), shard.class_histogram.end(), int64_t{0});
  EXPECT_EQ(total, 60000);
}

class PrepareSynthetic : public testing::IoTest {
 protected:
  static SyntheticOptions small_options() {
    SyntheticOptions options;
    options.shape = {3, 32, 32};
    options.num_classes = 10;
    options.samples = 1000;
    options.shards = 4;
    options.seed = 7;
    return options;
  }
};

TEST_F(PrepareSynthetic, CountsShapesAndStatistics) {
  prepare_synthetic(dir(), small_options(), false);
  const SplitIndex train = open_split(dir() / "train");
  const SplitIndex test = open_split(dir() / "test");
  EXPECT_EQ(train.total_samples(), 1000);
  EXPECT_EQ(train.shard_sizes(), std::vector<int64_t>(4, 250));
  EXPECT_EQ(test.total_samples(), 100) << "test_samples = 0 means samples / 10";
  EXPECT_EQ(train.meta.shape, (SampleShape{3, 32, 32}));
  EXPECT_EQ(train.meta.num_classes, 10);
  EXPECT_EQ(test.meta.mean, train.meta.mean);

  // The stored statistics are those of the train pixels (exact at this size).
  const SplitContents contents = read_everything(train);
  const std::size_t plane = 32 * 32;
  for (std::size_t c = 0; c < 3; ++c) {
    double sum = 0, sum_sq = 0;
    for (std::size_t s = 0; s < 1000; ++s)
      for (std::size_t p = 0; p < plane; ++p) {
        const double v = contents.images[(s * 3 + c) * plane + p];
        sum += v;
        sum_sq += v * v;
      }
    const double n = 1000.0 * plane, mean = sum / n;
    EXPECT_NEAR(train.meta.mean[c], mean, 1e-3);
    EXPECT_NEAR(train.meta.stddev[c], std::sqrt(sum_sq / n - mean * mean), 1e-3);
    EXPECT_GT(train.meta.stddev[c], 10.0f);
  }
  std::vector<int> per_class(10, 0);
  for (const int32_t label : contents.labels) ++per_class[static_cast<std::size_t>(label)];
  for (const int count : per_class) EXPECT_GT(count, 50) << "every class is represented";

  SyntheticOptions tiny = small_options();
  tiny.samples = 30;
  tiny.test_samples = 2;  // fewer test samples than shards: the test split gets fewer shards
  prepare_synthetic(dir() / "tiny", tiny, false);
  EXPECT_EQ(open_split(dir() / "tiny" / "test").shards.size(), 2u);
}

TEST_F(PrepareSynthetic, SameSeedSameData_OtherSeedOtherData) {
  prepare_synthetic(dir() / "a", small_options(), false);
  prepare_synthetic(dir() / "b", small_options(), false);
  SyntheticOptions other = small_options();
  other.seed = 8;
  prepare_synthetic(dir() / "c", other, false);
  for (const char* split : {"train", "test"}) {
    const SplitContents a = read_everything(open_split(dir() / "a" / split));
    const SplitContents b = read_everything(open_split(dir() / "b" / split));
    const SplitContents c = read_everything(open_split(dir() / "c" / split));
    EXPECT_EQ(a.images, b.images) << split;
    EXPECT_EQ(a.labels, b.labels) << split;
    EXPECT_NE(a.images, c.images) << split;
    EXPECT_NE(a.labels, c.labels) << split;
  }
}

// A nearest-class-mean classifier fit on train must do far better than chance on test: the data can teach.
TEST_F(PrepareSynthetic, ClassesAreLearnable) {
  prepare_synthetic(dir(), small_options(), false);
  const SplitContents train = read_everything(open_split(dir() / "train"));
  const SplitContents test = read_everything(open_split(dir() / "test"));
  const std::size_t elements = 3 * 32 * 32;
  std::vector<double> centroid(10 * elements, 0.0);
  std::vector<int> count(10, 0);
  for (std::size_t s = 0; s < train.labels.size(); ++s) {
    const auto label = static_cast<std::size_t>(train.labels[s]);
    ++count[label];
    for (std::size_t e = 0; e < elements; ++e) centroid[label * elements + e] += train.images[s * elements + e];
  }
  for (std::size_t k = 0; k < 10; ++k)
    for (std::size_t e = 0; e < elements; ++e) centroid[k * elements + e] /= std::max(count[k], 1);
  int correct = 0;
  for (std::size_t s = 0; s < test.labels.size(); ++s) {
    std::size_t best = 0;
    double best_distance = 1e300;
    for (std::size_t k = 0; k < 10; ++k) {
      double distance = 0;
      for (std::size_t e = 0; e < elements; ++e) {
        const double d = test.images[s * elements + e] - centroid[k * elements + e];
        distance += d * d;
      }
      if (distance < best_distance) best_distance = distance, best = k;
    }
    correct += best == static_cast<std::size_t>(test.labels[s]) ? 1 : 0;
  }
  EXPECT_GT(correct, 90) << "nearest class mean got " << correct << "/100";
}

TEST_F(PrepareSynthetic, RefusesToOverwriteWithoutTheFlag) {
  SyntheticOptions options = small_options();
  options.samples = 40;
  prepare_synthetic(dir(), options, false);
  testing::expect_data_error([&] { prepare_synthetic(dir(), options, false); }, {(dir() / "train").string(), "--overwrite"});
  options.seed = 99;
  prepare_synthetic(dir(), options, true);
  EXPECT_NE(open_split(dir() / "train").meta.provenance.find("seed 99"), std::string::npos);
}

TEST_F(PrepareFashionMnist, MissingSourceNamesTheFile) {
  testing::expect_data_error([&] { prepare_fashion_mnist(dir() / "nowhere", dir() / "out", 2, false); },
                             {(dir() / "nowhere" / "train-images-idx3-ubyte.gz").string(), "--source"});
}

}  // namespace
}  // namespace ringtrain::io
