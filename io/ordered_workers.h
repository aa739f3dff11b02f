// Owns running a step over items 0..count-1 on several threads while one consumer takes the results in item order,
// never more than `window` items ahead of it: memory stays `window` results whatever the count, and the output's
// order does not depend on thread timing. An exception from a step, from the consumer or from starting a thread stops
// every thread and reaches the caller.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace ringtrain::io {

// A worker thread could not be started (the user's or the node's limit on threads); the threads started stop.
class WorkerStartError : public std::runtime_error {
 public:
  WorkerStartError(int thread, int threads, const std::string& why)
      : std::runtime_error("cannot start worker thread " + std::to_string(thread + 1) + " of " +
                           std::to_string(threads) + ": " + why) {}
};

template <class Result>
void ordered_map(int64_t count, int threads, int window, const std::function<void(int64_t, Result&)>& produce,
                 const std::function<void(int64_t, Result&)>& consume) {
  std::vector<Result> slots(static_cast<std::size_t>(window));
  std::vector<char> ready(static_cast<std::size_t>(window), 0);
  std::mutex mutex;
  std::condition_variable changed;
  int64_t next = 0, consumed = 0;
  bool stop = false;
  std::exception_ptr failure;
  const auto slot = [&](int64_t i) { return static_cast<std::size_t>(i % window); };
  const auto work = [&] {
    for (;;) {
      int64_t i = 0;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stop || next >= count || next < consumed + window; });
        if (stop || next >= count) return;
        i = next++;
      }
      try {
        produce(i, slots[slot(i)]);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
        stop = true;
        changed.notify_all();
        return;
      }
      {
        std::lock_guard lock(mutex);
        ready[slot(i)] = 1;
      }
      changed.notify_all();
    }
  };
  std::vector<std::jthread> pool;
  try {
    for (int t = 0; t < threads; ++t) {
      try {
        pool.emplace_back(work);
      } catch (const std::system_error& e) {
        throw WorkerStartError(t, threads, e.what());
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return ready[slot(i)] || failure; });
        if (!ready[slot(i)]) std::rethrow_exception(failure);
      }
      consume(i, slots[slot(i)]);
      {
        std::lock_guard lock(mutex);
        ready[slot(i)] = 0;
        consumed = i + 1;
      }
      changed.notify_all();
    }
  } catch (...) {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    changed.notify_all();
    pool.clear();  // joins
    throw;
  }
}

}  // namespace ringtrain::io
