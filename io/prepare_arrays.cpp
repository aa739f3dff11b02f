// Owns `prepare arrays` after loading: class count and names checked, a stratified seeded hold-out when no
// test arrays were given, per-channel statistics of the train split, then both splits written.
#include "io/prepare_arrays.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "common/error.h"
#include "io/shard_header.h"
#include "io/shard_writer.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

int class_count(const LabelledArrays& train, const LabelledArrays& test, const ArraysOptions& options) {
  int32_t largest = 0;
  for (const LabelledArrays* arrays : {&train, &test})
    for (const int32_t label : arrays->labels) largest = std::max(largest, label);
  if (options.num_classes == 0) {
    const int inferred = largest + 1;
    if (!options.class_names.empty() && options.class_names.size() > static_cast<std::size_t>(inferred))
      return static_cast<int>(options.class_names.size());
    return inferred;
  }
  if (largest >= options.num_classes)
    throw DataError(fmt::format("label {} in {} is outside --classes {}; labels run 0..{}", largest,
                                train.origin, options.num_classes, options.num_classes - 1));
  return options.num_classes;
}

// Per class, a seeded shuffle of its samples; the first round(fraction * count) go to test. Each class keeps
// at least one training sample, and the order within each split stays the original order.
void hold_out(LabelledArrays& train, LabelledArrays& test, const ArraysOptions& options, int classes) {
  check_test_fraction(options);
  std::vector<std::vector<int64_t>> by_class(static_cast<std::size_t>(classes));
  for (int64_t i = 0; i < train.count(); ++i) by_class[static_cast<std::size_t>(train.labels[static_cast<std::size_t>(i)])].push_back(i);
  std::vector<bool> to_test(static_cast<std::size_t>(train.count()), false);
  std::mt19937_64 random(options.seed);
  for (std::vector<int64_t>& members : by_class) {
    std::shuffle(members.begin(), members.end(), random);
    const auto wanted = static_cast<std::size_t>(std::llround(options.test_fraction * static_cast<double>(members.size())));
    const std::size_t held = std::min(wanted, members.empty() ? 0 : members.size() - 1);
    for (std::size_t k = 0; k < held; ++k) to_test[static_cast<std::size_t>(members[k])] = true;
  }
  LabelledArrays kept{train.shape, {}, {}, train.origin};
  test = LabelledArrays{train.shape, {}, {}, train.origin + fmt::format(" (held out: {} per class, seed {})",
                                                                         options.test_fraction, options.seed)};
  const auto sample = static_cast<std::size_t>(train.shape.elements());
  for (std::size_t i = 0; i < to_test.size(); ++i) {
    LabelledArrays& into = to_test[i] ? test : kept;
    into.labels.push_back(train.labels[i]);
    into.pixels.insert(into.pixels.end(), train.pixels.begin() + static_cast<std::ptrdiff_t>(i * sample),
                       train.pixels.begin() + static_cast<std::ptrdiff_t>((i + 1) * sample));
  }
  if (test.count() == 0)
    throw DataError(fmt::format("--test-fraction {} of {} samples holds out none; raise it or give --test-images",
                                options.test_fraction, train.count()));
  train = std::move(kept);
}

void set_statistics(const LabelledArrays& train, DatasetMeta& meta) {
  const auto plane = static_cast<std::size_t>(train.shape.height) * static_cast<std::size_t>(train.shape.width);
  const auto channels = static_cast<std::size_t>(train.shape.channels);
  for (std::size_t c = 0; c < channels; ++c) {
    uint64_t sum = 0, sum_sq = 0;  // exact: 2^64 / 255^2 pixels is far beyond any dataset held in memory
    for (std::size_t n = 0; n < train.labels.size(); ++n) {
      const uint8_t* pixel = train.pixels.data() + (n * channels + c) * plane;
      for (std::size_t p = 0; p < plane; ++p) {
        sum += pixel[p];
        sum_sq += uint64_t{pixel[p]} * pixel[p];
      }
    }
    const double count = static_cast<double>(plane * train.labels.size());
    const double mean = static_cast<double>(sum) / count;
    meta.mean.push_back(static_cast<float>(mean));
    meta.stddev.push_back(static_cast<float>(std::sqrt(std::max(0.0, static_cast<double>(sum_sq) / count - mean * mean))));
  }
}

void write_arrays_split(const fs::path& dir, const LabelledArrays& arrays, DatasetMeta meta, int shards, bool overwrite) {
  meta.provenance = fmt::format("arrays: {} samples from {}", arrays.count(), arrays.origin);
  const auto sample = static_cast<std::size_t>(meta.shape.elements());
  const SampleSource source = [&](int64_t first, int64_t count, std::span<uint8_t> images, std::span<int32_t> labels) {
    std::memcpy(images.data(), arrays.pixels.data() + static_cast<std::size_t>(first) * sample,
                static_cast<std::size_t>(count) * sample);
    std::copy_n(arrays.labels.begin() + first, count, labels.begin());
  };
  write_split(dir, meta, {.shards = static_cast<int>(std::min<int64_t>(shards, arrays.count())), .samples = arrays.count()},
              source, overwrite);
}

}  // namespace

// Written so that NaN fails it too ("<= 0 || >= 1" lets NaN through).
void check_test_fraction(const ArraysOptions& options) {
  if (!(options.test_fraction > 0 && options.test_fraction < 1))
    throw DataError(fmt::format("--test-fraction {} must lie strictly between 0 and 1 (or give --test-images)",
                                options.test_fraction));
}

void prepare_arrays(LabelledArrays train, LabelledArrays test, const ArraysOptions& options) {
  if (test.count() > 0 && !(test.shape == train.shape))
    throw DataError(fmt::format("train samples are {} ({}) but test samples are {} ({}); both must have one shape",
                                detail::describe(train.shape), train.origin, detail::describe(test.shape), test.origin));
  DatasetMeta meta;
  meta.shape = train.shape;
  meta.num_classes = class_count(train, test, options);
  if (!options.class_names.empty() && options.class_names.size() != static_cast<std::size_t>(meta.num_classes))
    throw DataError(fmt::format("--class-names lists {} names but the labels need {} classes (0..{})",
                                options.class_names.size(), meta.num_classes, meta.num_classes - 1));
  meta.class_names = options.class_names;
  if (test.count() == 0) hold_out(train, test, options, meta.num_classes);
  refuse_existing_splits({options.out / "train", options.out / "test"}, options.overwrite);
  set_statistics(train, meta);
  write_arrays_split(options.out / "train", train, meta, options.shards, options.overwrite);
  write_arrays_split(options.out / "test", test, meta, options.shards, options.overwrite);
}

}  // namespace ringtrain::io
