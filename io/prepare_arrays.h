// Owns `prepare arrays`: a user's labelled arrays (.npy files or an HDF5 file) written as train/ and test/
// shard splits, with per-channel statistics of the train split and optional class names.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/labelled_arrays.h"

namespace ringtrain::io {

struct ArraysOptions {
  std::filesystem::path out;
  int shards = 1;
  double test_fraction = 0.1;  // used when no test arrays are given: stratified per class, seeded
  uint64_t seed = 1;
  int num_classes = 0;                   // 0: largest label + 1
  std::vector<std::string> class_names;  // empty: none recorded
  bool overwrite = false;
};

// DataError unless test_fraction lies strictly between 0 and 1 (NaN does not); checked before anything is read.
void check_test_fraction(const ArraysOptions& options);

// Everything is checked (classes, names, split sizes) before the first shard is written. `test` may be
// empty (count 0): then test_fraction of `train` is held out.
// Returns the channels stored with std 1 because every training pixel held one value in them
// (give_constant_channels_unit_std), for the command to say.
std::vector<int> prepare_arrays(LabelledArrays train, LabelledArrays test, const ArraysOptions& options);

}  // namespace ringtrain::io
