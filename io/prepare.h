// Owns the `prepare` subcommand's dataset builders: Fashion-MNIST from IDX files, and synthetic data of any
// shape for benchmarks.
#pragma once
#include <cstdint>
#include <filesystem>

#include "io/dataset_meta.h"

namespace ringtrain::io {

// Writes <out>/train and <out>/test. mean/std are computed on the train split and stored in both.
void prepare_fashion_mnist(const std::filesystem::path& source, const std::filesystem::path& out, int shards,
                           bool overwrite);

struct SyntheticOptions {
  SampleShape shape{3, 224, 224};
  int num_classes = 1000;
  int64_t samples = 1024;
  int64_t test_samples = 0;  // 0: samples / 10, at least 1
  int shards = 1;
  uint64_t seed = 1;
};

// Writes <out>/train and <out>/test with deterministic pseudo-random pixels; each class has its own mean
// intensity pattern so the data is learnable. Streams: memory use is one chunk, not the whole split.
void prepare_synthetic(const std::filesystem::path& out, const SyntheticOptions& options, bool overwrite);

}  // namespace ringtrain::io
