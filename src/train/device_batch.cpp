// Owns the device batch; see device_batch.h.
#include "train/device_batch.h"

namespace ringtrain::train {

DeviceBatch::DeviceBatch(model::Backend& backend, const model::Shape& largest)
    : backend_(backend),
      largest_(largest),
      images_(backend.allocate(static_cast<size_t>(largest.elements()) * sizeof(float))),
      labels_(backend.allocate(static_cast<size_t>(largest.n) * sizeof(int32_t))) {}

void DeviceBatch::load(const HostBatch& host) {
  const auto count = static_cast<size_t>(host.count);
  backend_.to_device(images_.as<float>(), host.images.data(), count * largest_.per_sample() * sizeof(float));
  backend_.to_device(labels_.as<int32_t>(), host.labels.data(), count * sizeof(int32_t));
}

}  // namespace ringtrain::train
