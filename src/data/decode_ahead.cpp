// Owns the decoding thread's work and the hand-over of its batches; see decode_ahead.h.
#include "data/decode_ahead.h"

#include <chrono>
#include <span>
#include <vector>

namespace ringtrain::train {

namespace {

constexpr int kSlots = 2;  // one decoded or being decoded while the step's thread uses the other

}  // namespace

double evaluation_decode_bytes(const model::Shape& input) {
  return model::kJpegSlotsInTurn * static_cast<double>(input.n) * static_cast<double>(input.per_sample());
}

double device_decode_bytes(const model::Shape& input) {
  return kSlots * static_cast<double>(input.n) * static_cast<double>(input.per_sample()) +
         evaluation_decode_bytes(input);
}

DecodeAhead::DecodeAhead(model::Backend& backend, BatchLoader& loader, const model::Shape& input)
    : loader_(loader), sample_{1, input.c, input.h, input.w}, slots_(backend.make_jpeg_slots(kSlots)) {
  if (loader.form() != BatchForm::jpegs)
    throw Error(ExitCode::internal, "the device decode was given a loader that does not hand over JPEGs");
  std::vector<std::unique_ptr<Decoded>> items;
  for (int slot = 0; slot < kSlots; ++slot) items.push_back(std::make_unique<Decoded>(Decoded{slot, nullptr}));
  queue_.emplace(std::move(items), loader.batches(), [this](int64_t, Decoded& into) { decode(into); });
}

// The decoding thread may be waiting for the loader: stopping both lets it end.
DecodeAhead::~DecodeAhead() {
  queue_->stop();
  loader_.stop();
}

void DecodeAhead::decode(Decoded& into) {
  into.host = loader_.next(nullptr);
  const HostBatch& host = *into.host;
  const auto start = std::chrono::steady_clock::now();
  decode_naming_sample(host, [&] {
    slots_->decode(into.slot, std::span(host.crops.data(), static_cast<size_t>(host.count)), sample_);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard lock(times_mutex_);
  times_.decode_s += seconds;
  ++times_.batches;
}

void DecodeAhead::load(DeviceBatch& device, std::unique_ptr<Decoded> decoded) {
  device.load_decoded(*decoded->host, slots_->use(decoded->slot));
  slots_->release(decoded->slot);
  loader_.recycle(std::move(decoded->host));
  queue_->recycle(std::move(decoded));
}

DecodeTimes DecodeAhead::times() const {
  std::lock_guard lock(times_mutex_);
  return times_;
}

}  // namespace ringtrain::train
