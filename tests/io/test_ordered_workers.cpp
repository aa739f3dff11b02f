// io/ordered_workers.h: results reach the consumer in item order whatever the threads' timing, never more than the
// window ahead, and an exception from either side stops every thread and reaches the caller.
#include "io/ordered_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ringtrain::io {
namespace {

TEST(OrderedMap, TheConsumerTakesEveryResultInItemOrderNeverMoreThanTheWindowBehind) {
  constexpr int64_t kCount = 2000;
  constexpr int kWindow = 8;
  std::atomic<int64_t> consumed{0}, furthest_ahead{0};
  std::vector<int64_t> seen;
  ordered_map<int64_t>(
      kCount, 4, kWindow,
      [&](int64_t i, int64_t& out) {
        const int64_t ahead = i - consumed.load();
        int64_t was = furthest_ahead.load();
        while (ahead > was && !furthest_ahead.compare_exchange_weak(was, ahead)) {
        }
        if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));  // out of order finishing
        out = i * i;
      },
      [&](int64_t i, int64_t& result) {
        EXPECT_EQ(result, i * i);
        seen.push_back(i);
        consumed = i + 1;
      });
  ASSERT_EQ(static_cast<int64_t>(seen.size()), kCount);
  for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)], i);
  EXPECT_LT(furthest_ahead.load(), kWindow);
}

TEST(OrderedMap, AProducersExceptionStopsTheOthersAndReachesTheCaller) {
  std::atomic<int64_t> produced{0};
  EXPECT_THROW(ordered_map<int>(
                   100000, 4, 16,
                   [&](int64_t i, int&) {
                     ++produced;
                     if (i == 50) throw std::runtime_error("item 50");
                   },
                   [](int64_t, int&) {}),
               std::runtime_error);
  EXPECT_LT(produced.load(), 100000);  // the threads stopped instead of producing to the end
}

TEST(OrderedMap, AConsumersExceptionStopsTheProducersAndReachesTheCaller) {
  std::atomic<int64_t> produced{0};
  EXPECT_THROW(ordered_map<int>(
                   100000, 4, 16, [&](int64_t, int&) { ++produced; },
                   [](int64_t i, int&) {
                     if (i == 10) throw std::runtime_error("consumer");
                   }),
               std::runtime_error);
  EXPECT_LE(produced.load(), 10 + 16 + 4);  // at most a window (and a thread each) beyond the consumer
}

}  // namespace
}  // namespace ringtrain::io
