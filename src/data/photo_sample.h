// Owns making one sample of an encoded split on the CPU: the crop chosen from the photo's size (random for training
// batches, the centre for evaluation), the JPEG decoded only where and at the DCT scale the crop needs
// (io/jpeg_window.h), resampled onto the planar sample and mirrored (kernels/cpu/crop_resample.h), then any
// augmentation of a decoded sample (pad_crop_flip). The GPU's decoder makes the same crops (data.decode = gpu).
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>

#include "data/augment.h"
#include "io/dataset_meta.h"
#include "io/image_decode.h"
#include "kernels/crop_resample.h"

namespace ringtrain::train {

struct PhotoSampling {
  bool training = false;  // random crop and flip per data.augment; false: the evaluation centre crop
  AugmentSpec augment;
  int eval_resize = 0;    // the shorter side before the evaluation centre crop
  io::SampleShape shape;  // the sample made
};

// data.eval_resize with 0 resolved: the sample's larger side / 0.875 (256 for 224, as torchvision's ImageNet recipe).
int evaluation_resize(int configured, const io::SampleShape& shape);

// The crop a sample of a photo of height x width pixels is made from.
PhotoCrop photo_crop(const PhotoSampling& sampling, const SampleKey& key, int height, int width);

// Throws DataError saying what is wrong with the bytes (the caller names the shard and sample).
void decode_photo_sample(const PhotoSampling& sampling, const SampleKey& key, std::span<const uint8_t> jpeg, int height,
                         int width, std::span<uint8_t> out);

// An image file (JPEG or PNG) made into the sample its photo in an encoded split would give: `predict` on a model
// trained on JPEG shards. Throws DataError naming the file.
void photo_file_sample(const PhotoSampling& sampling, const std::filesystem::path& file, std::span<uint8_t> out);

}  // namespace ringtrain::train
