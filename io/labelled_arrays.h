// Owns turning a user's arrays (NumPy .npy files or datasets of an existing HDF5 file) into samples in
// ringtrain's order: uint8 N x C x H x W images and int32 labels, checked before any shard is written.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::io {

// unstated: no --layout given; read as nchw, except an array that looks channels-last, which is refused.
enum class ArrayLayout { nchw, nhwc, unstated };

// "nchw" or "nhwc" ("" for unstated); anything else is a DataError listing both.
ArrayLayout parse_array_layout(const std::string& text);

struct LabelledArrays {
  SampleShape shape;
  std::vector<uint8_t> pixels;  // N x C x H x W
  std::vector<int32_t> labels;  // N
  std::string origin;           // for provenance and error messages: the files read
  int64_t count() const { return static_cast<int64_t>(labels.size()); }
};

// Images: uint8 of rank 4 in `layout`, or rank 3 (N x H x W, one channel). Labels: any integer type of
// rank 1 (or N x 1), non-negative and fitting int32. Counts must agree.
LabelledArrays load_npy_arrays(const std::filesystem::path& images, const std::filesystem::path& labels,
                               ArrayLayout layout);

struct Hdf5ArraySource {
  std::filesystem::path file;
  std::string images_dataset, labels_dataset;
};
LabelledArrays load_hdf5_arrays(const Hdf5ArraySource& source, ArrayLayout layout);

}  // namespace ringtrain::io
