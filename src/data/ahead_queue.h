// Owns one producer thread that makes a run's items ahead of their consumer, and the bounded queue between them:
// the items are made up front and passed round (made, taken by next(), given back by recycle()), so at most as many
// are ever made-but-not-recycled as there are items, and the producer waits for one to come back. The loader's
// host batches (data/batch_loader.h) and the device decode of their JPEGs (data/decode_ahead.h) are both such
// stages. An exception on the producer ends it and is rethrown by next() once the items made before it are taken.
// stop() (and the destructor) ends the producer after the item it is making and wakes a consumer blocked in next(),
// which then throws: a stage whose producer consumes an earlier stage stops that one too, so nothing waits forever.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"

namespace ringtrain::train {

template <class Item>
class AheadQueue {
 public:
  // Makes item i (0 .. count - 1, in order) into a recycled item; called on the producer thread only.
  using Make = std::function<void(int64_t index, Item& item)>;

  // `items`: every item the stage ever holds (at least one); the producer starts at once.
  AheadQueue(std::vector<std::unique_ptr<Item>> items, int64_t count, Make make)
      : count_(count), make_(std::move(make)), free_(std::make_move_iterator(items.begin()),
                                                   std::make_move_iterator(items.end())) {
    if (free_.empty()) throw Error(ExitCode::internal, "an AheadQueue was made without items to pass round");
    thread_ = std::thread([this] { run(); });
  }
  ~AheadQueue() {
    stop();
    thread_.join();
  }
  AheadQueue(const AheadQueue&) = delete;
  AheadQueue& operator=(const AheadQueue&) = delete;

  // Blocks until the next item is made; adds the time blocked to *waited_s (when given). Rethrows the producer's
  // error once the items made before it are taken; throws Error (internal) when stopped with none ready.
  std::unique_ptr<Item> next(double* waited_s) {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    ready_cv_.wait(lock, [&] { return !ready_.empty() || error_ || stop_; });
    if (ready_.empty()) {
      if (error_) std::rethrow_exception(error_);
      throw Error(ExitCode::internal, "an item was asked of a stage that was stopped");
    }
    auto item = std::move(ready_.front());
    ready_.pop_front();
    if (waited_s) *waited_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return item;
  }

  void recycle(std::unique_ptr<Item> item) {
    {
      std::lock_guard lock(mutex_);
      free_.push_back(std::move(item));
    }
    space_cv_.notify_one();
  }

  // Ends the producer once the item it is making is done (it makes no further one) and wakes next()'s waiters.
  // Does not wait for the producer: where it is blocked in an earlier stage's next(), stop that stage as well.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    space_cv_.notify_all();
    ready_cv_.notify_all();
  }

 private:
  void run() {
    try {
      for (int64_t i = 0; i < count_; ++i) {
        std::unique_ptr<Item> item;
        {
          std::unique_lock lock(mutex_);
          space_cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
          if (stop_) return;
          item = std::move(free_.front());
          free_.pop_front();
        }
        make_(i, *item);
        {
          std::lock_guard lock(mutex_);
          ready_.push_back(std::move(item));
        }
        ready_cv_.notify_one();
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      ready_cv_.notify_all();
    }
  }

  int64_t count_;
  Make make_;
  std::mutex mutex_;
  std::condition_variable ready_cv_, space_cv_;
  std::deque<std::unique_ptr<Item>> ready_, free_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything it uses exists
};

}  // namespace ringtrain::train
