// Owns what a device-side JPEG decode is asked for and how it refuses: one sample of a batch as its JPEG bytes and
// the crop taken from the photo (kernels/crop_resample.h), and the error naming the batch position of a sample that
// does not decode. Shared by the CUDA decoder (kernels/cuda/jpeg_batch_decoder.h) and the backends' decode_jpegs,
// which know nothing of files: the caller names the shard and sample.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "common/error.h"
#include "kernels/crop_resample.h"

namespace ringtrain::kernels {

// One sample of a batch: its JPEG in host memory and where the sample comes from in the photo.
struct JpegCrop {
  std::span<const uint8_t> jpeg;
  CropWindow window;          // in the photo's own pixels
  bool flip = false;
  int height = 0, width = 0;  // the JPEG's size as the caller knows it (the shard's); 0 x 0: not checked
  bool from_region = false;   // the JPEG is a region cut from the photo for the crop (data.decode_regions)
};

// A sample of the batch that cannot be decoded; index() is its position in the batch.
class UndecodableJpeg : public DataError {
 public:
  UndecodableJpeg(int index, const std::string& why)
      : DataError("sample " + std::to_string(index) + " of the batch: " + why), index_(index) {}
  int index() const noexcept { return index_; }

 private:
  int index_;
};

}  // namespace ringtrain::kernels
