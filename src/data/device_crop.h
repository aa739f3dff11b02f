// Owns what the device's JPEG decoder (Backend::decode_jpegs) is handed for one sample: the photo's JPEG and its
// crop, or, where asked (data.decode_regions) and the bytes are in the region layout, a JPEG of the restart segments
// the crop covers (io/restart_region.h) with the crop moved to that region's corner, so the decoder decodes and
// copies about the crop's share of the photo. The region holds what the full-scale decode and the block means the
// device resamples from (kernels/crop_resample.h) read, so the sample is the whole photo's but where a tap's
// position, taken from the region's corner, rounds apart (rare: a level or two in a value).
#pragma once
#include <cstdint>
#include <vector>

#include "data/augment.h"
#include "io/dataset_meta.h"
#include "kernels/jpeg_crop.h"

namespace ringtrain::train {

// `read`: the sample's bytes as read (its CRC checked), a photo of height x width; `kept`: the batch's buffer the
// bytes handed over end in (the returned crop views it). `read` is left unspecified.
kernels::JpegCrop device_crop(std::vector<uint8_t>& read, const PhotoCrop& crop, int height, int width,
                              const io::SampleShape& sample, bool regions, std::vector<uint8_t>& kept);

}  // namespace ringtrain::train
