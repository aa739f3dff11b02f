// The node-shared reducer (dist.reducer = "shared"): its slices tile the parameters on decay-mask words, each rank
// sums its slice over every rank exactly and clears the others' values there, the parameters are one copy per
// (emulated) node, each rank is the first to touch its slice of the shared windows, nothing is held per step once
// settled (across nodes too), and groups of unequal size are refused alike on every rank.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "dist/node_shared_reducer.h"

using namespace ringtrain;

namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// 0: every rank of the node; otherwise the node_ranks that divide the world into equal groups.
std::vector<int> node_groupings() {
  std::vector<int> groupings = {0};
  for (int n = 1; n < world_size(); ++n)
    if (world_size() % n == 0) groupings.push_back(n);
  return groupings;
}

constexpr int64_t kParams = 100003;  // no multiple of 32 or of any rank count

TEST(NodeSharedReducer, SlicesTileTheParametersOnDecayMaskWords) {
  for (const int node_ranks : node_groupings()) {
    SCOPED_TRACE(node_ranks);
    dist::NodeSharedReducer reducer(MPI_COMM_WORLD, node_ranks, config::WireFormat::fp32);
    (void)reducer.parameters(kParams);
    (void)reducer.gradients(kParams);
    const model::ParamSlice mine = reducer.update_slice(kParams);
    EXPECT_EQ(mine.begin % model::kSliceAlignment, 0);
    std::vector<int64_t> slices(2 * static_cast<size_t>(world_size()));
    const int64_t own[2] = {mine.begin, mine.count};
    MPI_Allgather(own, 2, MPI_INT64_T, slices.data(), 2, MPI_INT64_T, MPI_COMM_WORLD);
    // Within each node the slices follow one another from 0 to kParams; every node cuts them alike.
    const int per_node = reducer.sharing_ranks();
    EXPECT_EQ(per_node * reducer.nodes(), world_size());
    int64_t covered = 0;
    for (int r = 0; r < world_size(); ++r) {
      const int64_t begin = slices[2 * static_cast<size_t>(r)], count = slices[2 * static_cast<size_t>(r) + 1];
      if (begin == 0) covered = 0;
      EXPECT_EQ(begin, covered) << "rank " << r;
      EXPECT_GT(count, 0) << "rank " << r;
      covered += count;
    }
    EXPECT_EQ(covered, kParams);
  }
}

TEST(NodeSharedReducer, SumsItsSliceFromEveryRankAndClearsTheOthers) {
  const int rank = world_rank(), size = world_size();
  for (const int node_ranks : node_groupings()) {
    SCOPED_TRACE(node_ranks);
    dist::NodeSharedReducer reducer(MPI_COMM_WORLD, node_ranks, config::WireFormat::fp32);
    float* params = reducer.parameters(kParams);
    float* grads = reducer.gradients(kParams);
    const model::ParamSlice mine = reducer.update_slice(kParams);
    for (int step = 0; step < 2; ++step) {
      for (int64_t i = 0; i < kParams; ++i) grads[i] = static_cast<float>((rank + 1) * (i % 7) + step);
      reducer.wait_all();
      // The whole sum over the world, in this rank's slice; in integers, so exact in any order.
      const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
      for (int64_t i = mine.begin; i < mine.begin + mine.count; ++i)
        ASSERT_EQ(grads[i], ranks_sum * static_cast<float>(i % 7) + static_cast<float>(size * step)) << i;
      // An update of the slice, as the optimizer's (which leaves its gradients zero).
      for (int64_t i = mine.begin; i < mine.begin + mine.count; ++i) params[i] = grads[i], grads[i] = 0;
      reducer.updated();
      for (int64_t i = 0; i < kParams; ++i) ASSERT_EQ(grads[i], 0.0f) << "left for the next step at " << i;
      // Every rank of the node sees every rank's update in the one copy.
      for (int64_t i = 0; i < kParams; i += 101)
        ASSERT_EQ(params[i], ranks_sum * static_cast<float>(i % 7) + static_cast<float>(size * step)) << i;
      reducer.updated();  // nobody writes the copy again before every rank has read it
      const auto spans = reducer.settle(0);
      ASSERT_EQ(spans.size(), 1u);
      ASSERT_EQ(spans[0].size(), 1u);
      EXPECT_EQ(spans[0][0].floats, mine.count);
    }
  }
}

TEST(NodeSharedReducer, OptimizerStateIsOneZeroedCopyPerNode) {
  dist::NodeSharedReducer reducer(MPI_COMM_WORLD, 0, config::WireFormat::fp32);
  (void)reducer.parameters(kParams);
  (void)reducer.gradients(kParams);
  const std::vector<float*> state = reducer.optimizer_state(2, kParams);
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(state[1]) % 64, 0u);
  EXPECT_GE(state[1] - state[0], kParams);
  for (const float* array : state)
    for (int64_t i = 0; i < kParams; i += 97) ASSERT_EQ(array[i], 0.0f);
}

// Whether this process has the page holding `address` in its page table (/proc/self/pagemap's present bit): a
// page of a shared window is there once this process touched it, and only then, as long as it only wrote.
bool page_present(const float* address) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const int fd = open("/proc/self/pagemap", O_RDONLY);
  uint64_t entry = 0;
  const auto at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(address) / page * sizeof entry);
  const bool read = fd >= 0 && pread(fd, &entry, sizeof entry, at) == static_cast<ssize_t>(sizeof entry);
  if (fd >= 0) close(fd);
  EXPECT_TRUE(read) << "/proc/self/pagemap cannot be read";
  return (entry >> 63) & 1u;
}

// In `array` (the node's one copy), the pages wholly inside this rank's slice are in this process's page table and
// those wholly outside it are not: every rank wrote only its own slice, so each page was first touched by the rank
// that updates it (which on a node of several sockets puts it on that rank's socket).
void expect_touched_only_inside(const float* array, int64_t count, model::ParamSlice mine, const char* what) {
  const auto page_bytes = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto page_floats = static_cast<int64_t>(page_bytes / sizeof(float));
  const auto into_page = static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(array) % page_bytes / sizeof(float));
  int64_t inside = 0, outside = 0, untouched_inside = 0, touched_outside = 0, first_wrong = -1;
  for (int64_t p = into_page > 0 ? page_floats - into_page : 0; p + page_floats <= count; p += page_floats) {
    const bool in = p >= mine.begin && p + page_floats <= mine.begin + mine.count;
    const bool out = p + page_floats <= mine.begin || p >= mine.begin + mine.count;
    if (!in && !out) continue;  // a page the slice's edge cuts: either rank's
    const bool present = page_present(array + p);
    inside += in, outside += out;
    untouched_inside += in && !present, touched_outside += out && present;
    if (in != present && first_wrong < 0) first_wrong = p;
  }
  EXPECT_GT(inside, 0) << what;
  if (mine.count < count) {
    EXPECT_GT(outside, 0) << what;
  }
  EXPECT_EQ(untouched_inside, 0) << what << ": pages of this rank's slice it did not touch, of " << inside;
  EXPECT_EQ(touched_outside, 0) << what << ": other ranks' pages this rank touched, of " << outside << ", the first at "
                                << first_wrong;
}

TEST(NodeSharedReducer, EachRankIsFirstToTouchItsSliceOfTheSharedCopy) {
  constexpr int64_t kMany = 1 << 20;  // 4 MiB an array: every slice some whole pages
  for (const int node_ranks : node_groupings()) {
    SCOPED_TRACE(node_ranks);
    dist::NodeSharedReducer reducer(MPI_COMM_WORLD, node_ranks, config::WireFormat::fp32);
    const float* params = reducer.parameters(kMany);
    const float* grads = reducer.gradients(kMany);
    const std::vector<float*> state = reducer.optimizer_state(2, kMany);
    const model::ParamSlice mine = reducer.update_slice(kMany);
    expect_touched_only_inside(params, kMany, mine, "parameters");
    for (const float* array : state) expect_touched_only_inside(array, kMany, mine, "optimizer state");
    expect_touched_only_inside(grads, kMany, {0, kMany}, "this rank's gradients");
  }
}

// Every step's spans are handed on by settle(), the all-reduce between nodes' own included: a run holds nothing
// more after 300 steps than after one.
TEST(NodeSharedReducer, HoldsNoStepOnceSettledOnAnyNumberOfNodes) {
  constexpr int64_t kFew = 4096;
  bool several_nodes = false;
  for (const int node_ranks : node_groupings()) {
    SCOPED_TRACE(node_ranks);
    dist::NodeSharedReducer reducer(MPI_COMM_WORLD, node_ranks, config::WireFormat::fp32);
    (void)reducer.parameters(kFew);
    (void)reducer.gradients(kFew);
    several_nodes = several_nodes || reducer.nodes() > 1;
    for (int step = 0; step < 300; ++step) {
      reducer.wait_all();
      reducer.updated();
      ASSERT_EQ(reducer.settle(0).size(), 1u);
      ASSERT_EQ(reducer.held_steps(), 0u) << "after step " << step << " on " << reducer.nodes() << " nodes";
    }
  }
  EXPECT_TRUE(several_nodes || world_size() == 1);
}

// Groups of dist.node_ranks that do not divide a host's ranks would leave nodes of unequal size; the key is named.
TEST(NodeSharedReducer, NodeRanksThatDoNotDivideAHostAreRefusedOnEveryRankAlike) {
  const int size = world_size();
  if (size % 2 == 0 || size == 1)
    GTEST_SKIP() << "groups of two split " << size << " rank(s) evenly; runs with an odd rank count above one";
  std::string message;
  try {
    dist::NodeSharedReducer reducer(MPI_COMM_WORLD, 2, config::WireFormat::fp32);
  } catch (const JobFileError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(fmt::format("'dist.node_ranks' = 2 must divide the ranks of every host, but one has {}", size)),
            std::string::npos)
      << message;
}

}  // namespace
