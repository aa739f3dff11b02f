// Both CPU gradient reducers sum every bucket across ranks exactly (values computed from rank and size) and
// report one timed span per bucket, in launch order.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <vector>

#include "dist/mpi_gradient_reducer.h"
#include "dist/thread_gradient_reducer.h"

using namespace ringtrain;

namespace {

std::unique_ptr<dist::GradientReducer> make(const std::string& kind) {
  if (kind == "thread") return std::make_unique<dist::ThreadGradientReducer>(MPI_COMM_WORLD);
  return std::make_unique<dist::MpiGradientReducer>(MPI_COMM_WORLD);
}

class Reducers : public ::testing::TestWithParam<std::string> {};

TEST_P(Reducers, SumEveryBucketAndTimeEach) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto reducer = make(GetParam());
  // Three buckets cut from the end of the buffer first, as GradientBuckets does; one large (1 MiB).
  const std::vector<dist::Bucket> buckets = {{300000, 1000}, {1000, 299000}, {0, 1000}};
  std::vector<float> grads(301000);
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>((rank + 1) * (i % 7) + step);
    for (const auto& b : buckets) {
      reducer->launch(grads.data(), b);
      reducer->progress();
    }
    reducer->wait_all();
    const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
    for (size_t i = 0; i < grads.size(); i += 997)
      ASSERT_FLOAT_EQ(grads[i], ranks_sum * static_cast<float>(i % 7) + static_cast<float>(size * step)) << i;
    const auto spans = reducer->last_spans();
    ASSERT_EQ(spans.size(), size > 1 ? 3u : 0u);
    for (size_t b = 0; b < spans.size(); ++b) {
      EXPECT_EQ(spans[b].bucket, static_cast<int>(b));
      EXPECT_EQ(spans[b].floats, buckets[b].count);
      EXPECT_GE(spans[b].end_s, spans[b].begin_s);
    }
    // wait_all already waited: settle has nothing left to wait for and hands this step's spans over, once.
    const auto settled = reducer->settle(0);
    ASSERT_EQ(settled.size(), 1u);
    EXPECT_EQ(settled[0].size(), spans.size());
    EXPECT_TRUE(reducer->settle(0).empty());
  }
}

// Ring all-reduce splits a bucket into one piece per rank: counts below the rank count, and counts that do not
// divide, must still be summed element for element.
TEST_P(Reducers, SumBucketsThatDoNotDivideByTheRankCount) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto reducer = make(GetParam());
  const std::vector<dist::Bucket> buckets = {{0, 1}, {1, 3}, {4, 5}, {9, 262147}};
  std::vector<float> grads(262156);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>((rank + 1) * (i % 11));
  for (const auto& b : buckets) reducer->launch(grads.data(), b);
  reducer->wait_all();
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  for (size_t i = 0; i < grads.size(); ++i) ASSERT_EQ(grads[i], ranks_sum * static_cast<float>(i % 11)) << i;
}

INSTANTIATE_TEST_SUITE_P(Cpu, Reducers, ::testing::Values("nonblocking", "thread"));

}  // namespace
