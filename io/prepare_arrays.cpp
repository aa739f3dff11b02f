// Owns `prepare arrays` after loading: class count and names checked, a stratified seeded hold-out when no
// test arrays were given, per-channel statistics of the train split, then both splits written.
#include "io/prepare_arrays.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include "common/error.h"
#include "io/shard_header.h"
#include "io/shard_writer.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

int class_count(const LabelledArrays& train, const LabelledArrays& test, const ArraysOptions& options) {
  if (options.num_classes < 0 || options.num_classes > detail::kMaxClasses)
    throw UsageError(fmt::format("--classes {} must lie in [1, {}] (0 or absent: the largest label + 1)",
                                 options.num_classes, detail::kMaxClasses));
  int32_t largest = 0;
  const LabelledArrays* holder = &train;
  std::size_t at = 0;
  for (const LabelledArrays* arrays : {&train, &test})
    for (std::size_t i = 0; i < arrays->labels.size(); ++i)
      if (arrays->labels[i] > largest) largest = arrays->labels[i], holder = arrays, at = i;
  // Every class costs a table entry: a stray huge label must not size them.
  if (largest >= detail::kMaxClasses)
    throw DataError(fmt::format("label {} at position {} of {} is beyond the {} classes a split may have; labels are "
                                "class indices 0..classes-1",
                                largest, at, holder->origin, detail::kMaxClasses));
  if (options.num_classes == 0) {
    const int inferred = largest + 1;
    if (!options.class_names.empty() && options.class_names.size() > static_cast<std::size_t>(inferred))
      return static_cast<int>(options.class_names.size());
    return inferred;
  }
  if (largest >= options.num_classes)
    throw DataError(fmt::format("label {} at position {} of {} is outside --classes {}; labels run 0..{}", largest,
                                at, holder->origin, options.num_classes, options.num_classes - 1));
  return options.num_classes;
}

// Per class, a seeded shuffle of its samples; the first round(fraction * count) go to test. Each class keeps
// at least one training sample, and the order within each split stays the original order.
void hold_out(LabelledArrays& train, LabelledArrays& test, const ArraysOptions& options) {
  check_test_fraction(options);
  // Only the classes present, in label order: an empty class draws nothing from the generator either.
  std::map<int32_t, std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < train.count(); ++i) by_class[train.labels[static_cast<std::size_t>(i)]].push_back(i);
  std::vector<bool> to_test(static_cast<std::size_t>(train.count()), false);
  std::mt19937_64 random(options.seed);
  for (auto& entry : by_class) {
    std::vector<int64_t>& members = entry.second;
    std::shuffle(members.begin(), members.end(), random);
    const auto wanted = static_cast<std::size_t>(std::llround(options.test_fraction * static_cast<double>(members.size())));
    const std::size_t held = std::min(wanted, members.empty() ? 0 : members.size() - 1);
    for (std::size_t k = 0; k < held; ++k) to_test[static_cast<std::size_t>(members[k])] = true;
  }
  test = LabelledArrays{train.shape, {}, {}, train.origin + fmt::format(" (held out: {} per class, seed {})",
                                                                         options.test_fraction, options.seed)};
  // The kept samples close up in place, so the input is held once more only by the fraction held out.
  const auto sample = static_cast<std::size_t>(train.shape.elements());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < to_test.size(); ++i) {
    const auto from = train.pixels.begin() + static_cast<std::ptrdiff_t>(i * sample);
    if (to_test[i]) {
      test.labels.push_back(train.labels[i]);
      test.pixels.insert(test.pixels.end(), from, from + static_cast<std::ptrdiff_t>(sample));
      continue;
    }
    if (kept != i) std::copy(from, from + static_cast<std::ptrdiff_t>(sample),
                             train.pixels.begin() + static_cast<std::ptrdiff_t>(kept * sample));
    train.labels[kept++] = train.labels[i];
  }
  if (test.count() == 0)
    throw DataError(fmt::format("--test-fraction {} of {} samples holds out none; raise it or give test samples (--test-images, or --test-source for prepare images)",
                                options.test_fraction, train.count()));
  train.labels.resize(kept);
  train.pixels.resize(kept * sample);  // its capacity stays: giving it back would copy it once more
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

// `arrays` must outlive the writing.
SplitToWrite arrays_split(const fs::path& dir, const LabelledArrays& arrays, DatasetMeta meta, int shards) {
  meta.provenance = fmt::format("arrays: {} samples from {}", arrays.count(), arrays.origin);
  const auto sample = static_cast<std::size_t>(meta.shape.elements());
  SampleSource source = [&arrays, sample](int64_t first, int64_t count, std::span<uint8_t> images,
                                          std::span<int32_t> labels) {
    std::memcpy(images.data(), arrays.pixels.data() + static_cast<std::size_t>(first) * sample,
                static_cast<std::size_t>(count) * sample);
    std::copy_n(arrays.labels.begin() + first, count, labels.begin());
  };
  const SplitWriteOptions options{.shards = static_cast<int>(std::min<int64_t>(shards, arrays.count())),
                                  .samples = arrays.count()};
  return {dir, std::move(meta), options, std::move(source)};
}

}  // namespace

// Written so that NaN fails it too ("<= 0 || >= 1" lets NaN through).
void check_test_fraction(const ArraysOptions& options) {
  if (!(options.test_fraction > 0 && options.test_fraction < 1))
    throw UsageError(fmt::format("--test-fraction {} must lie strictly between 0 and 1 (or give test samples: --test-images, or --test-source for "
                                 "prepare images)",
                                 options.test_fraction));
}

std::vector<int> prepare_arrays(LabelledArrays train, LabelledArrays test, const ArraysOptions& options) {
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
  if (test.count() == 0) hold_out(train, test, options);
  refuse_existing_splits({options.out / "train", options.out / "test"}, options.overwrite);
  set_statistics(train, meta);
  std::vector<int> constant = give_constant_channels_unit_std(meta);
  write_splits({arrays_split(options.out / "train", train, meta, options.shards),
                arrays_split(options.out / "test", test, meta, options.shards)},
               options.overwrite);
  return constant;
}

}  // namespace ringtrain::io
