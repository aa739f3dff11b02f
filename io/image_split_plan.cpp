// Owns the plan of `prepare images`; see image_split_plan.h.
#include "io/image_split_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

using FileNumbers = std::vector<uint32_t>;

FileNumbers every_file(const ImageFolder& folder) {
  FileNumbers all(folder.size());
  std::iota(all.begin(), all.end(), uint32_t{0});
  return all;
}

// Per class, a seeded shuffle of its files; the first round(fraction * count) go to test, each class keeping at
// least one training file. Both lists keep the folder's order.
void hold_out(const ImageFolder& folder, FileNumbers& train, FileNumbers& test, const PlanOptions& options) {
  std::vector<FileNumbers> by_class(folder.class_names.size());
  for (const uint32_t f : train) by_class[static_cast<std::size_t>(folder.label(f))].push_back(f);
  std::vector<bool> to_test(folder.size(), false);
  std::mt19937_64 random(options.seed);
  for (FileNumbers& members : by_class) {
    std::shuffle(members.begin(), members.end(), random);
    const auto wanted = static_cast<std::size_t>(std::llround(options.test_fraction * static_cast<double>(members.size())));
    const std::size_t held = std::min(wanted, members.empty() ? 0 : members.size() - 1);
    for (std::size_t k = 0; k < held; ++k) to_test[members[k]] = true;
  }
  FileNumbers kept;
  for (const uint32_t f : train) (to_test[f] ? test : kept).push_back(f);
  train = std::move(kept);
  if (test.empty()) {
    // Every class keeps one training image: where none has two, no fraction holds any out.
    const bool singles = std::all_of(by_class.begin(), by_class.end(), [](const FileNumbers& m) { return m.size() < 2; });
    throw DataError(fmt::format("--test-fraction {} of {} images holds out none; {}", options.test_fraction, train.size(),
                                singles ? "every class has one image, which it keeps for training: give --test-source"
                                        : "raise it or give --test-source"));
  }
}

SplitPlan deal(std::string name, const fs::path& dir, std::shared_ptr<const ImageFolder> folder, const FileNumbers& files,
               int shards) {
  SplitPlan plan{std::move(name), dir, std::move(folder), {}};
  const auto count = static_cast<int64_t>(files.size());
  const int used = static_cast<int>(std::min<int64_t>(shards, count));
  for (int k = 0; k < used; ++k) {
    plan.shards.push_back({k, FileNumbers(files.begin() + count * k / used, files.begin() + count * (k + 1) / used)});
  }
  return plan;
}

}  // namespace

double SplitPlan::source_bytes(const PlannedShard& shard) const {
  const std::size_t step = std::max<std::size_t>(1, shard.files.size() / 64);
  double sum = 0;
  int seen = 0;
  for (std::size_t i = 0; i < shard.files.size(); i += step, ++seen) {
    std::error_code error;
    const auto bytes = fs::file_size(folder->path(shard.files[i]), error);
    sum += error ? 0.0 : static_cast<double>(bytes);
  }
  return seen > 0 ? sum / seen * static_cast<double>(shard.files.size()) : 0.0;
}

int64_t SplitPlan::files() const {
  int64_t n = 0;
  for (const PlannedShard& shard : shards) n += static_cast<int64_t>(shard.files.size());
  return n;
}

ImagesPlan plan_images(const PlanOptions& options) {
  const auto train_folder = std::make_shared<const ImageFolder>(scan_image_folder(options.source));
  ImagesPlan plan;
  plan.class_names = train_folder->class_names;
  FileNumbers train = every_file(*train_folder), test;
  std::shared_ptr<const ImageFolder> test_folder = train_folder;
  if (options.test_source.empty()) {
    hold_out(*train_folder, train, test, options);
    plan.test_origin = fmt::format("held out of '{}': {} per class, seed {}", options.source.string(),
                                   options.test_fraction, options.seed);
  } else {
    test_folder = std::make_shared<const ImageFolder>(scan_image_folder(options.test_source, plan.class_names));
    test = every_file(*test_folder);
    plan.test_origin = fmt::format("image folder '{}'", options.test_source.string());
  }
  // Each rank trains on a contiguous part of a split: in folder order 2 ranks would each see half the classes (and
  // batch norm per rank would learn from skewed batches), so the training files go in a seeded random order.
  std::mt19937_64 random(options.seed);
  std::shuffle(train.begin(), train.end(), random);
  plan.train = deal("train", options.out / "train", train_folder, train, options.shards);
  plan.test = deal("test", options.out / "test", test_folder, test, options.shards);
  return plan;
}

std::vector<const PlannedShard*> shards_of_rank(const SplitPlan& plan, int rank, int ranks) {
  std::vector<const PlannedShard*> mine;
  for (const PlannedShard& shard : plan.shards)
    if (shard.index % ranks == rank) mine.push_back(&shard);
  return mine;
}

}  // namespace ringtrain::io
