// Owns the device batch; see device_batch.h.
#include "data/device_batch.h"

#include <vector>

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::train {

DeviceBatch::DeviceBatch(model::Backend& backend, const model::Shape& largest, BatchForm form)
    : backend_(backend),
      largest_(largest),
      images_(backend.allocate(static_cast<size_t>(largest.elements()) * sizeof(float))),
      labels_(backend.allocate(static_cast<size_t>(largest.n) * sizeof(int32_t))),
      norm_(backend.allocate(2 * static_cast<size_t>(largest.c) * sizeof(float))) {
  if (form == BatchForm::pixels) pixels_ = backend.allocate(static_cast<size_t>(largest.elements()));
  // A rank whose loader fails before its first batch still runs that step (train/training_loop.h): on zeros.
  backend.zero(images_.as<void>(), static_cast<size_t>(largest.elements()) * sizeof(float));
  backend.zero(labels_.as<void>(), static_cast<size_t>(largest.n) * sizeof(int32_t));
}

void DeviceBatch::load(const HostBatch& host) {
  const auto count = static_cast<size_t>(host.count);
  backend_.to_device(labels_.as<int32_t>(), host.labels.data(), count * sizeof(int32_t));
  load_targets(host);
  switch (host.form) {
    case BatchForm::pixels: return load_pixels(host);
    case BatchForm::jpegs: return load_jpegs(host);
    case BatchForm::normalized: break;
  }
  backend_.to_device(images_.as<float>(), host.images.data(), count * largest_.per_sample() * sizeof(float));
}

model::Tensor DeviceBatch::input_padded(int count, int full) {
  if (full > largest_.n || count > full)
    throw Error(ExitCode::internal,
                fmt::format("a batch of {} padded to {} in a device batch of {}", count, full, largest_.n));
  const auto sample_bytes = static_cast<size_t>(largest_.per_sample()) * sizeof(float);
  if (full > count)
    backend_.zero(images_.as<float>() + static_cast<size_t>(count) * largest_.per_sample(),
                  static_cast<size_t>(full - count) * sample_bytes);
  return input(full);
}

// A mixed batch's targets hold max_batch rows (the loader's whole buffer); an evaluation batch has none.
void DeviceBatch::load_targets(const HostBatch& host) {
  mixed_ = !host.targets.empty();
  if (!mixed_) return;
  const size_t bytes = host.targets.size() * sizeof(float);
  if (!targets_) targets_ = backend_.allocate(bytes);
  backend_.to_device(targets_.as<float>(), host.targets.data(), bytes);
}

void DeviceBatch::load_pixels(const HostBatch& host) {
  if (!pixels_)  // a wiring error: the loader and this batch were made for different forms
    throw Error(ExitCode::fault, "a batch of uint8 pixels reached a device batch made for normalised floats");
  backend_.to_device(pixels_.as<uint8_t>(), host.pixels.data(), static_cast<size_t>(host.count) * largest_.per_sample());
  normalize(host, pixels_.as<uint8_t>());
}

void DeviceBatch::load_jpegs(const HostBatch& host) {
  const model::Shape sample{1, largest_.c, largest_.h, largest_.w};
  const uint8_t* pixels = nullptr;
  decode_naming_sample(host, [&] {
    pixels = backend_.decode_jpegs(std::span(host.crops.data(), static_cast<size_t>(host.count)), sample);
  });
  normalize(host, pixels);
}

void DeviceBatch::load_decoded(const HostBatch& host, const uint8_t* decoded) {
  if (host.form != BatchForm::jpegs)
    throw Error(ExitCode::internal, "a batch decoded on the device was handed over without its JPEGs' batch");
  backend_.to_device(labels_.as<int32_t>(), host.labels.data(), static_cast<size_t>(host.count) * sizeof(int32_t));
  load_targets(host);
  normalize(host, decoded);
}

void decode_naming_sample(const HostBatch& host, const std::function<void()>& decode) {
  try {
    decode();
  } catch (const kernels::UndecodableJpeg& e) {
    const int64_t where = host.samples[static_cast<size_t>(e.index())];
    // The device's decoder hands what nvJPEG refuses to libjpeg-turbo, as data.decode = cpu decodes: a sample
    // refused here would be refused there too, so the fix is the data.
    throw DataError(fmt::format("{} does not decode on the device ({}): its bytes are no JPEG libjpeg-turbo reads "
                                "either, or not of the size its shard records; re-run `ringtrain prepare images` "
                                "with --overwrite",
                                host.reader->sample_place(where), e.what()));
  }
}

void DeviceBatch::normalize(const HostBatch& host, const uint8_t* pixels) {
  const auto channels = static_cast<size_t>(largest_.c);
  if (*host.norm != uploaded_) {
    std::vector<float> both(host.norm->mean);
    both.insert(both.end(), host.norm->stddev.begin(), host.norm->stddev.end());
    backend_.to_device(norm_.as<float>(), both.data(), 2 * channels * sizeof(float));
    uploaded_ = *host.norm;
  }
  const int64_t plane = int64_t{largest_.h} * largest_.w;
  const float* mean = norm_.as<float>();
  backend_.normalize_pixels({host.count, largest_.c, plane}, pixels, mean, mean + channels, images_.as<float>());
}

}  // namespace ringtrain::train
