// Owns the plan of `prepare images`; see image_split_plan.h.
#include "io/image_split_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "common/error.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

// Per class, a seeded shuffle of its files; the first round(fraction * count) go to test, each class keeping at
// least one training file. Both lists keep the folder's order.
void hold_out(std::vector<LabelledFile>& train, std::vector<LabelledFile>& test, const PlanOptions& options,
              std::size_t classes) {
  std::vector<std::vector<std::size_t>> by_class(classes);
  for (std::size_t i = 0; i < train.size(); ++i) by_class[static_cast<std::size_t>(train[i].label)].push_back(i);
  std::vector<bool> to_test(train.size(), false);
  std::mt19937_64 random(options.seed);
  for (std::vector<std::size_t>& members : by_class) {
    std::shuffle(members.begin(), members.end(), random);
    const auto wanted = static_cast<std::size_t>(std::llround(options.test_fraction * static_cast<double>(members.size())));
    const std::size_t held = std::min(wanted, members.empty() ? 0 : members.size() - 1);
    for (std::size_t k = 0; k < held; ++k) to_test[members[k]] = true;
  }
  std::vector<LabelledFile> kept;
  for (std::size_t i = 0; i < train.size(); ++i) (to_test[i] ? test : kept).push_back(std::move(train[i]));
  train = std::move(kept);
  if (test.empty())
    throw DataError(fmt::format("--test-fraction {} of {} images holds out none; raise it or give --test-source",
                                options.test_fraction, train.size()));
}

SplitPlan deal(std::string name, const fs::path& dir, std::vector<LabelledFile> files, int shards) {
  SplitPlan plan{std::move(name), dir, {}};
  const auto count = static_cast<int64_t>(files.size());
  const int used = static_cast<int>(std::min<int64_t>(shards, count));
  for (int k = 0; k < used; ++k) {
    PlannedShard shard{k, {}, 0};
    for (int64_t i = count * k / used; i < count * (k + 1) / used; ++i) {
      std::error_code error;
      const auto bytes = fs::file_size(files[static_cast<std::size_t>(i)].path, error);
      shard.source_bytes += error ? 0.0 : static_cast<double>(bytes);
      shard.files.push_back(std::move(files[static_cast<std::size_t>(i)]));
    }
    plan.shards.push_back(std::move(shard));
  }
  return plan;
}

}  // namespace

int64_t SplitPlan::files() const {
  int64_t n = 0;
  for (const PlannedShard& shard : shards) n += static_cast<int64_t>(shard.files.size());
  return n;
}

ImagesPlan plan_images(const PlanOptions& options) {
  const ImageFolder train_folder = scan_image_folder(options.source);
  std::vector<LabelledFile> train = train_folder.files, test;
  ImagesPlan plan;
  plan.class_names = train_folder.class_names;
  if (options.test_source.empty()) {
    hold_out(train, test, options, plan.class_names.size());
    plan.test_origin = fmt::format("held out of '{}': {} per class, seed {}", options.source.string(),
                                   options.test_fraction, options.seed);
  } else {
    test = scan_image_folder(options.test_source, plan.class_names).files;
    plan.test_origin = fmt::format("image folder '{}'", options.test_source.string());
  }
  // Each rank trains on a contiguous part of a split: in folder order 2 ranks would each see half the classes (and
  // batch norm per rank would learn from skewed batches), so the training files go in a seeded random order.
  std::mt19937_64 random(options.seed);
  std::shuffle(train.begin(), train.end(), random);
  plan.train = deal("train", options.out / "train", std::move(train), options.shards);
  plan.test = deal("test", options.out / "test", std::move(test), options.shards);
  return plan;
}

std::vector<const PlannedShard*> shards_of_rank(const SplitPlan& plan, int rank, int ranks) {
  std::vector<const PlannedShard*> mine;
  for (const PlannedShard& shard : plan.shards)
    if (shard.index % ranks == rank) mine.push_back(&shard);
  return mine;
}

}  // namespace ringtrain::io
