// The node-shared gradient sum: the slice summed in rank order into the summing rank's array (the same bits
// whichever rank sums, on any number of threads), the other ranks' values there cleared, nothing outside the slice
// touched.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/node_sum.h"

using namespace ringtrain::kernels::cpu;

namespace {

std::vector<std::vector<float>> random_arrays(int ranks, int64_t n) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1e3f);  // wide: an order-dependent sum would show in the bits
  std::vector<std::vector<float>> arrays(static_cast<size_t>(ranks), std::vector<float>(static_cast<size_t>(n)));
  for (auto& a : arrays)
    for (auto& v : a) v = normal(rng) * (rng() % 2 ? 1e-6f : 1.0f);
  return arrays;
}

// Sums [begin, begin + count) of `ranks` random arrays by rank `own` on `threads` threads, and checks every value.
void expect_slice_summed_and_others_cleared(int ranks, int own, int threads) {
  const int64_t n = 10000, begin = 96, count = 5003;  // three chunks, the last a partial one
  auto arrays = random_arrays(ranks, n);
  const auto before = arrays;
  std::vector<float*> places;
  for (auto& a : arrays) places.push_back(a.data());
  sum_slice_and_clear(places, static_cast<size_t>(own), begin, count, threads);
  for (int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<size_t>(i);
    const bool inside = i >= begin && i < begin + count;
    float sum = before[0][at];
    for (int k = 1; k < ranks; ++k) sum += before[static_cast<size_t>(k)][at];
    for (int k = 0; k < ranks; ++k) {
      const float expected = !inside ? before[static_cast<size_t>(k)][at] : k == own ? sum : 0.0f;
      ASSERT_EQ(arrays[static_cast<size_t>(k)][at], expected) << "rank " << k << " at " << i;
    }
  }
}

TEST(NodeSum, SumsTheSliceInRankOrderAndClearsTheOthers) {
  for (const int ranks : {1, 2, 3, 4})
    for (int own = 0; own < ranks; ++own)
      for (const int threads : {1, 2, 3}) {  // one chunk or more each; one thread with the partial chunk
        SCOPED_TRACE(testing::Message() << ranks << " ranks, summed by " << own << " on " << threads << " threads");
        expect_slice_summed_and_others_cleared(ranks, own, threads);
      }
}

}  // namespace
