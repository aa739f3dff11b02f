// Owns the order in which a rank visits its partition each epoch: a Fisher-Yates shuffle seeded by
// (seed, epoch, rank), written out here so the order is the same on every compiler and standard library.
#pragma once
#include <cstdint>
#include <vector>

namespace ringtrain::train {

std::vector<int64_t> epoch_order(int64_t partition_size, uint64_t seed, int64_t epoch, int rank, bool shuffle);

}  // namespace ringtrain::train
