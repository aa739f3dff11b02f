// Owns the dataset builders behind `ringtrain prepare`: Fashion-MNIST imported from IDX files, and
// deterministic learnable synthetic images of any shape, streamed so they never sit in memory at once.
#include "io/prepare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "io/idx_reader.h"
#include "io/shard_header.h"
#include "io/shard_writer.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

// ---- Fashion-MNIST

constexpr int fashion_mnist_classes = 10;

fs::path find_idx_file(const fs::path& source, const std::string& stem) {
  for (const std::string& name : {stem + ".gz", stem}) {
    std::error_code error;
    const fs::file_status status = fs::status(source / name, error);
    if (!fs::exists(status)) continue;
    // Reading a FIFO or a device would wait for ever, or never end.
    if (!fs::is_regular_file(status))
      throw DataError(fmt::format("Fashion-MNIST file '{}' is not a regular file (a folder, FIFO, device or socket); "
                                  "pass --source with the folder holding the downloaded files",
                                  (source / name).string()));
    return source / name;
  }
  throw DataError(fmt::format("Fashion-MNIST file '{}' not found; pass --source with the folder holding "
                              "train-/t10k-*-ubyte.gz (Debian: apt install dataset-fashion-mnist)",
                              (source / (stem + ".gz")).string()));
}

struct IdxSplit {
  IdxImages images;
  std::vector<uint8_t> labels;
  fs::path image_file, label_file;
};

IdxSplit load_idx_split(const fs::path& source, const std::string& prefix) {
  IdxSplit split;
  split.image_file = find_idx_file(source, prefix + "-images-idx3-ubyte");
  split.label_file = find_idx_file(source, prefix + "-labels-idx1-ubyte");
  split.images = read_idx_images(split.image_file);
  split.labels = read_idx_labels(split.label_file);
  if (static_cast<int64_t>(split.labels.size()) != split.images.count)
    throw DataError(fmt::format("'{}' holds {} images but '{}' holds {} labels; the files belong to different "
                                "datasets",
                                split.image_file.string(), split.images.count, split.label_file.string(),
                                split.labels.size()));
  for (std::size_t i = 0; i < split.labels.size(); ++i)
    if (split.labels[i] >= fashion_mnist_classes)
      throw DataError(fmt::format("'{}' has label {} at position {}, but Fashion-MNIST has {} classes",
                                  split.label_file.string(), split.labels[i], i, fashion_mnist_classes));
  return split;
}

// `split` must outlive the writing.
SplitToWrite idx_split(const fs::path& dir, const IdxSplit& split, DatasetMeta meta, int shards) {
  meta.provenance = fmt::format("Fashion-MNIST: {} samples from {} and {}", split.images.count,
                                split.image_file.string(), split.label_file.string());
  const auto sample_bytes = static_cast<std::size_t>(meta.shape.elements());
  SampleSource source = [&split, sample_bytes](int64_t first, int64_t count, std::span<uint8_t> images,
                                               std::span<int32_t> labels) {
    std::memcpy(images.data(), split.images.pixels.data() + static_cast<std::size_t>(first) * sample_bytes,
                static_cast<std::size_t>(count) * sample_bytes);
    for (int64_t i = 0; i < count; ++i) labels[static_cast<std::size_t>(i)] = split.labels[static_cast<std::size_t>(first + i)];
  };
  return {dir, std::move(meta), {.shards = shards, .samples = split.images.count}, std::move(source)};
}

// ---- synthetic

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: statistically good, and identical on every platform
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) { return mix(a ^ mix(b)); }
uint64_t mix(uint64_t a, uint64_t b, uint64_t c) { return mix(mix(a, b), c); }

// Every sample is a pure function of (seed, split, index), so any chunk can be produced on its own: that is
// what lets the writer stream and lets mean/std be measured on a subset without replaying the split.
class SyntheticImages {
 public:
  SyntheticImages(const SyntheticOptions& options, uint64_t split_tag)
      : shape_(options.shape), classes_(options.num_classes), seed_(options.seed), split_tag_(split_tag) {}

  int32_t label(int64_t index) const {
    return static_cast<int32_t>(mix(seed_, split_tag_, static_cast<uint64_t>(index)) % static_cast<uint64_t>(classes_));
  }

  // Class pattern (per-channel offset plus row and column triangle waves, all chosen by the class) plus
  // uniform noise of the sample: a linear model can learn the classes, but not perfectly.
  void pixels(int64_t index, int32_t label, std::span<uint8_t> out) {
    const int height = shape_.height, width = shape_.width;
    rows_.resize(static_cast<std::size_t>(height));
    cols_.resize(static_cast<std::size_t>(width));
    uint64_t noise_state = mix(seed_ ^ 0x6e6f697365ULL, split_tag_, static_cast<uint64_t>(index)) | 1;
    uint8_t* pixel = out.data();
    for (int c = 0; c < shape_.channels; ++c) {
      const uint64_t h = mix(seed_, static_cast<uint64_t>(label), static_cast<uint64_t>(c));
      const int offset = 64 + static_cast<int>(h % 128);
      const int row_step = 1 + static_cast<int>((h >> 8) % 5), row_phase = static_cast<int>((h >> 16) % 64);
      const int col_step = 1 + static_cast<int>((h >> 24) % 5), col_phase = static_cast<int>((h >> 32) % 64);
      for (int y = 0; y < height; ++y) rows_[static_cast<std::size_t>(y)] = offset + triangle(y * row_step + row_phase);
      for (int x = 0; x < width; ++x) cols_[static_cast<std::size_t>(x)] = triangle(x * col_step + col_phase);
      for (int y = 0; y < height; ++y) {
        const int row_value = rows_[static_cast<std::size_t>(y)];
        for (int x = 0; x < width; x += 8) {
          noise_state ^= noise_state << 13;  // xorshift64: eight noise bytes per step
          noise_state ^= noise_state >> 7;
          noise_state ^= noise_state << 17;
          uint64_t bytes = noise_state;
          for (int k = 0; k < 8 && x + k < width; ++k, bytes >>= 8) {
            const int noise = static_cast<int>(bytes & 0x3f) - 32;
            *pixel++ = static_cast<uint8_t>(std::clamp(row_value + cols_[static_cast<std::size_t>(x + k)] + noise, 0, 255));
          }
        }
      }
    }
  }

 private:
  static int triangle(int t) { return std::abs(t % 64 - 32) - 16; }  // period 64, range [-16, 16]

  SampleShape shape_;
  int classes_;
  uint64_t seed_, split_tag_;
  std::vector<int> rows_, cols_;
};

constexpr uint64_t train_tag = 0x747261696eULL, test_tag = 0x74657374ULL;

struct ChannelStatistics {
  std::vector<float> mean, stddev;
  int64_t samples_used = 0;
};

// Exact over the whole train split up to 64 Mi pixels; beyond that, over evenly spaced samples totalling
// about that many pixels, which pins the statistics far below what normalisation can notice.
ChannelStatistics measure_statistics(const SyntheticOptions& options) {
  const int64_t elements = options.shape.elements();
  const int64_t budget = std::max<int64_t>(1, (int64_t{1} << 26) / elements);
  const int64_t used = std::min(options.samples, budget);
  const int64_t plane = int64_t{options.shape.height} * options.shape.width;
  std::vector<double> sum(static_cast<std::size_t>(options.shape.channels)), sum_sq(sum.size());
  SyntheticImages generator(options, train_tag);
  std::vector<uint8_t> sample(static_cast<std::size_t>(elements));
  for (int64_t k = 0; k < used; ++k) {
    const int64_t index = k * options.samples / used;
    generator.pixels(index, generator.label(index), sample);
    for (std::size_t c = 0; c < sum.size(); ++c) {
      uint64_t s = 0, s2 = 0;
      for (int64_t p = 0; p < plane; ++p) {
        const uint64_t v = sample[c * static_cast<std::size_t>(plane) + static_cast<std::size_t>(p)];
        s += v;
        s2 += v * v;
      }
      sum[c] += static_cast<double>(s);
      sum_sq[c] += static_cast<double>(s2);
    }
  }
  ChannelStatistics statistics;
  statistics.samples_used = used;
  const double n = static_cast<double>(used * plane);
  for (std::size_t c = 0; c < sum.size(); ++c) {
    const double mean = sum[c] / n;
    statistics.mean.push_back(static_cast<float>(mean));
    statistics.stddev.push_back(static_cast<float>(std::sqrt(std::max(0.0, sum_sq[c] / n - mean * mean))));
  }
  return statistics;
}

SplitToWrite synthetic_split(const fs::path& dir, const SyntheticOptions& options, const DatasetMeta& meta,
                             uint64_t tag, int64_t samples, int shards) {
  auto generator = std::make_shared<SyntheticImages>(options, tag);
  const auto sample_bytes = static_cast<std::size_t>(options.shape.elements());
  SampleSource source = [generator, sample_bytes](int64_t first, int64_t count, std::span<uint8_t> images,
                                                  std::span<int32_t> labels) {
    for (int64_t i = 0; i < count; ++i) {
      const auto slot = static_cast<std::size_t>(i);
      labels[slot] = generator->label(first + i);
      generator->pixels(first + i, labels[slot], images.subspan(slot * sample_bytes, sample_bytes));
    }
  };
  return {dir, meta, {.shards = shards, .samples = samples}, std::move(source)};
}

}  // namespace

void prepare_fashion_mnist(const fs::path& source, const fs::path& out, int shards, bool overwrite) {
  refuse_existing_splits({out / "train", out / "test"}, overwrite);
  const IdxSplit train = load_idx_split(source, "train");
  const IdxSplit test = load_idx_split(source, "t10k");
  if (train.images.rows != test.images.rows || train.images.cols != test.images.cols)
    throw DataError(fmt::format("'{}' holds {}x{} images but '{}' holds {}x{}; the files belong to different datasets",
                                train.image_file.string(), train.images.rows, train.images.cols,
                                test.image_file.string(), test.images.rows, test.images.cols));

  uint64_t sum = 0, sum_sq = 0;  // exact: 47 M pixels of at most 255^2 fit easily in 64 bits
  for (const uint8_t v : train.images.pixels) {
    sum += v;
    sum_sq += uint64_t{v} * v;
  }
  const auto n = static_cast<double>(train.images.pixels.size());
  const double mean = static_cast<double>(sum) / n;
  const double variance = static_cast<double>(sum_sq) / n - mean * mean;

  DatasetMeta meta;
  meta.shape = {1, train.images.rows, train.images.cols};
  meta.num_classes = fashion_mnist_classes;
  // The dataset's own names (Xiao, Rasul and Vollgraf 2017), so runs and evaluations name the classes.
  meta.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  meta.mean = {static_cast<float>(mean)};
  meta.stddev = {static_cast<float>(std::sqrt(std::max(0.0, variance)))};
  // The test split with the train statistics, as the model will see them.
  write_splits({idx_split(out / "train", train, meta, shards), idx_split(out / "test", test, meta, shards)}, overwrite);
}

void prepare_synthetic(const fs::path& out, const SyntheticOptions& options, bool overwrite) {
  const double sample_values = static_cast<double>(options.shape.channels) * options.shape.height * options.shape.width;
  if (sample_values > static_cast<double>(detail::kMaxSampleValues))
    throw DataError(fmt::format("synthetic samples of shape {} would hold {:.3g} values each; ringtrain reads samples "
                                "of at most {} values",
                                detail::describe(options.shape), sample_values, detail::kMaxSampleValues));
  if (sample_values <= 0 || options.num_classes < 1 || options.samples < 1 || options.test_samples < 0)
    throw DataError(fmt::format("synthetic data needs a positive shape, classes and samples; got shape {}, {} "
                                "classes, {} samples, {} test samples",
                                detail::describe(options.shape), options.num_classes, options.samples,
                                options.test_samples));
  refuse_existing_splits({out / "train", out / "test"}, overwrite);
  const int64_t test_samples = options.test_samples > 0 ? options.test_samples : std::max<int64_t>(1, options.samples / 10);
  const ChannelStatistics statistics = measure_statistics(options);

  DatasetMeta meta;
  meta.shape = options.shape;
  meta.num_classes = options.num_classes;
  meta.mean = statistics.mean;
  meta.stddev = statistics.stddev;
  meta.provenance = fmt::format("synthetic: seed {}, {} classes, {} train / {} test samples of {}; mean/std from {} "
                                "train samples",
                                options.seed, options.num_classes, options.samples, test_samples,
                                detail::describe(options.shape), statistics.samples_used);
  // A small test split may not fill every shard; fewer test shards is harmless.
  const int test_shards = static_cast<int>(std::min<int64_t>(options.shards, test_samples));
  write_splits({synthetic_split(out / "train", options, meta, train_tag, options.samples, options.shards),
                synthetic_split(out / "test", options, meta, test_tag, test_samples, test_shards)},
               overwrite);
}

}  // namespace ringtrain::io
