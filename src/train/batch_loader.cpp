// Owns the producer side (loader thread) and consumer side of the batch queue.
#include "train/batch_loader.h"

#include <chrono>

#include "common/error.h"

namespace ringtrain::train {

BatchLoader::BatchLoader(io::ShardReader& reader, int max_batch, int64_t batches, BatchPlan plan, int depth)
    : reader_(reader), max_batch_(max_batch), batches_(batches), plan_(std::move(plan)), depth_(static_cast<size_t>(depth)) {
  const auto& meta = reader.meta();
  const int channels = meta.shape.channels;
  lut_.resize(static_cast<size_t>(channels) * 256);
  for (int c = 0; c < channels; ++c) {
    const float mean = meta.mean.size() == static_cast<size_t>(channels) ? meta.mean[static_cast<size_t>(c)] : 0.0f;
    const float sd = meta.stddev.size() == static_cast<size_t>(channels) && meta.stddev[static_cast<size_t>(c)] > 0
                         ? meta.stddev[static_cast<size_t>(c)]
                         : 255.0f;
    for (int v = 0; v < 256; ++v) lut_[static_cast<size_t>(c * 256 + v)] = (static_cast<float>(v) - mean) / sd;
  }
  for (size_t i = 0; i < depth_ + 1; ++i) {
    auto b = std::make_unique<HostBatch>();
    b->images.resize(static_cast<size_t>(max_batch_ * meta.shape.elements()));
    b->labels.resize(static_cast<size_t>(max_batch_));
    free_.push_back(std::move(b));
  }
  thread_ = std::thread([this] { run(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  space_cv_.notify_all();
  thread_.join();
}

void BatchLoader::run() {
  try {
    const auto& shape = reader_.meta().shape;
    const int64_t per_sample = shape.elements();
    const int64_t plane = int64_t{shape.height} * shape.width;
    std::vector<int64_t> indices;
    std::vector<uint8_t> raw(static_cast<size_t>(max_batch_ * per_sample));
    for (int64_t i = 0; i < batches_; ++i) {
      std::unique_ptr<HostBatch> batch;
      {
        std::unique_lock lock(mutex_);
        space_cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
        if (stop_) return;
        batch = std::move(free_.front());
        free_.pop_front();
      }
      plan_(i, indices);
      const int count = static_cast<int>(indices.size());
      reader_.read(indices, std::span(raw.data(), static_cast<size_t>(count * per_sample)),
                   std::span(batch->labels.data(), static_cast<size_t>(count)));
      for (int s = 0; s < count; ++s)
        for (int c = 0; c < shape.channels; ++c) {
          const uint8_t* src = raw.data() + s * per_sample + c * plane;
          float* dst = batch->images.data() + s * per_sample + c * plane;
          const float* table = lut_.data() + c * 256;
          for (int64_t p = 0; p < plane; ++p) dst[p] = table[src[p]];
        }
      batch->index = i;
      batch->count = count;
      {
        std::lock_guard lock(mutex_);
        ready_.push_back(std::move(batch));
      }
      ready_cv_.notify_one();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    ready_cv_.notify_all();
  }
}

std::unique_ptr<HostBatch> BatchLoader::next(double* waited_s) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  ready_cv_.wait(lock, [&] { return !ready_.empty() || error_; });
  if (ready_.empty() && error_) std::rethrow_exception(error_);
  auto batch = std::move(ready_.front());
  ready_.pop_front();
  if (waited_s) *waited_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return batch;
}

void BatchLoader::recycle(std::unique_ptr<HostBatch> batch) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(batch));
  }
  space_cv_.notify_one();
}

}  // namespace ringtrain::train
