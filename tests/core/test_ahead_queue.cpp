// Proves the stage that makes items ahead of their consumer (data/ahead_queue.h), which the loader's batches and the
// device decode's both go through: items arrive in order, no more are made than were passed round, an error on the
// producer reaches the consumer after the items made before it, and stopping mid-run ends the producer, also one
// blocked on an earlier stage, without a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "common/error.h"
#include "data/ahead_queue.h"

namespace ringtrain::train {
namespace {

struct Item {
  int64_t index = -1;
};

std::vector<std::unique_ptr<Item>> items(int n) {
  std::vector<std::unique_ptr<Item>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<Item>());
  return out;
}

// Polls until `done` holds or ten seconds have passed (the producer runs on its own thread, which a busy machine may
// leave unscheduled for a while; a producer that works returns far sooner).
template <class Done>
bool eventually(Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(AheadQueue, HandsOverEveryItemInOrder) {
  AheadQueue<Item> queue(items(3), 50, [](int64_t i, Item& item) { item.index = i; });
  for (int64_t i = 0; i < 50; ++i) {
    auto item = queue.next(nullptr);
    EXPECT_EQ(item->index, i);
    queue.recycle(std::move(item));
  }
}

TEST(AheadQueue, MakesNoMoreThanItHasItemsUntilOneComesBack) {
  std::atomic<int> made{0};
  AheadQueue<Item> queue(items(2), 10, [&](int64_t i, Item& item) {
    item.index = i;
    ++made;
  });
  ASSERT_TRUE(eventually([&] { return made == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(made, 2) << "the producer made an item it had no room for";
  auto first = queue.next(nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(made, 2) << "an item taken but not given back was made into again";
  queue.recycle(std::move(first));
  EXPECT_TRUE(eventually([&] { return made == 3; }));
}

TEST(AheadQueue, AProducersErrorReachesTheConsumerAfterTheItemsBeforeIt) {
  AheadQueue<Item> queue(items(3), 10, [](int64_t i, Item& item) {
    if (i == 2) throw DataError("shard-00003.h5 sample 17 does not decode");
    item.index = i;
  });
  for (int64_t i = 0; i < 2; ++i) queue.recycle(queue.next(nullptr));
  try {
    queue.next(nullptr);
    ADD_FAILURE() << "the producer's error was not rethrown";
  } catch (const DataError& e) {
    EXPECT_EQ(e.code(), ExitCode::data);
    EXPECT_STREQ(e.what(), "shard-00003.h5 sample 17 does not decode");
  }
}

// The producer takes 300 ms, so the consumer blocks for most of them even when it starts late; what is added is
// never more than the call lasted.
TEST(AheadQueue, TheTimeBlockedIsAddedToTheWait) {
  AheadQueue<Item> queue(items(1), 1,
                         [](int64_t, Item&) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  double waited = 1.0;
  const auto start = std::chrono::steady_clock::now();
  queue.next(&waited);
  const double call_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(waited - 1.0, 0.1);
  EXPECT_LE(waited - 1.0, call_s + 1e-3);
}

TEST(AheadQueue, StoppedMidRunItEndsAndAWaitingConsumerThrows) {
  std::atomic<int> made{0};
  auto queue = std::make_unique<AheadQueue<Item>>(items(2), 1000, [&](int64_t, Item&) { ++made; });
  auto held = queue->next(nullptr);
  ASSERT_TRUE(eventually([&] { return made == 2; }));  // the producer now waits for room
  queue->recycle(queue->next(nullptr));
  queue->stop();
  EXPECT_THROW(
      {
        while (true) queue->recycle(queue->next(nullptr));  // what was made before the stop, then the stop
      },
      Error);
  queue.reset();  // joins: must not hang
  EXPECT_LT(made, 1000);
}

// The decode-ahead shape: the second stage's producer takes from the first stage; stopping both (second first)
// ends a producer blocked in the first stage's next() while that stage is still making its item.
TEST(AheadQueue, ChainedStagesStopWithoutAHangWhileTheSecondWaitsOnTheFirst) {
  std::atomic<bool> release_first{false};
  auto first = std::make_unique<AheadQueue<Item>>(items(2), 100, [&](int64_t i, Item& item) {
    item.index = i;
    if (i == 1) eventually([&] { return release_first.load(); });  // a slow batch, released after the joins
  });
  struct Outer {
    std::unique_ptr<Item> inner;
  };
  std::vector<std::unique_ptr<Outer>> outers;
  for (int i = 0; i < 2; ++i) outers.push_back(std::make_unique<Outer>());
  std::atomic<int> taken{0};
  AheadQueue<Item>& from = *first;
  auto second = std::make_unique<AheadQueue<Outer>>(std::move(outers), 100, [&](int64_t, Outer& outer) {
    outer.inner = from.next(nullptr);
    ++taken;
  });
  ASSERT_TRUE(eventually([&] { return taken == 1; }));  // now blocked on the first stage's slow item
  const auto start = std::chrono::steady_clock::now();
  second->stop();
  first->stop();
  second.reset();  // joins a producer that only the first stage's stop woke: its slow item is still being made
  // A stop that did not wake the producer would hold this join until the slow item's ten seconds ran out.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  release_first = true;
  first.reset();
}

}  // namespace
}  // namespace ringtrain::train
