// Owns the CPU twin's JPEG slots and decode_jpegs: what the GPU decoder does, on this host, with the same crop
// function — each photo decoded whole by libjpeg-turbo (io/image_decode.h), then its crop resampled (from block
// means where it shrinks by 2 or more) by kernels/cpu/crop_resample, which evaluates kernels/crop_resample.h as the
// CUDA kernel does. A decode runs at its
// call, on the calling thread; the twin queues nothing, so handing a slot over and back costs nothing.
#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "io/image_decode.h"
#include "kernels/cpu/crop_resample.h"

namespace ringtrain::backend {

namespace {

// The photo at batch position `index`, whole, with `channels` channels.
io::DecodedImage decode_photo(const kernels::JpegCrop& sample, int index, int channels) {
  io::DecodedImage image;
  try {
    image = io::convert_channels(io::decode_image_bytes({}, sample.jpeg, channels), channels);
  } catch (const DataError& e) {
    throw kernels::UndecodableJpeg(index, e.what());
  }
  const bool checked = sample.height > 0 && sample.width > 0;
  if (checked && (image.height != sample.height || image.width != sample.width))
    throw kernels::UndecodableJpeg(index, fmt::format("the JPEG is {}x{} pixels where {} {}x{}", image.width,
                                                      image.height,
                                                      sample.from_region ? "the region cut from it for the crop is"
                                                                         : "its shard says",
                                                      sample.width, sample.height));
  return image;
}

class CpuJpegSlots final : public model::JpegSlots {
 public:
  explicit CpuJpegSlots(int slots) : slots_(static_cast<std::size_t>(slots)) {}

  void decode(int slot, std::span<const kernels::JpegCrop> samples, const model::Shape& sample) override {
    const kernels::cpu::SampleExtent extent{sample.c, sample.h, sample.w};
    const auto per_sample = static_cast<std::size_t>(sample.c) * static_cast<std::size_t>(sample.h) *
                            static_cast<std::size_t>(sample.w);
    std::vector<uint8_t>& out = slots_.at(static_cast<std::size_t>(slot));
    out.resize(samples.size() * per_sample);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const io::DecodedImage image = decode_photo(samples[i], static_cast<int>(i), sample.c);
      const kernels::InterleavedImage pixels{image.pixels.data(), image.height, image.width, image.channels,
                                             int64_t{image.width} * image.channels};
      kernels::cpu::averaged_crop_resample(pixels, samples[i].window, samples[i].flip, extent,
                                           std::span(out.data() + i * per_sample, per_sample));
    }
  }
  const uint8_t* use(int slot) override { return slots_.at(static_cast<std::size_t>(slot)).data(); }
  void release(int) override {}

 private:
  std::vector<std::vector<uint8_t>> slots_;
};

}  // namespace

std::unique_ptr<model::JpegSlots> CpuBackend::make_jpeg_slots(int slots) {
  return std::make_unique<CpuJpegSlots>(slots);
}

const uint8_t* CpuBackend::decode_jpegs(std::span<const kernels::JpegCrop> samples, const model::Shape& sample) {
  if (!jpeg_slots_) jpeg_slots_ = make_jpeg_slots(model::kJpegSlotsInTurn);
  return model::decode_in_turn(*jpeg_slots_, next_jpeg_slot_, samples, sample);
}

}  // namespace ringtrain::backend
