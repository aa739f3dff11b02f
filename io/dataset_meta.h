// Owns the description of a sharded dataset split: sample shape, classes, normalisation and provenance,
// and the HDF5 names under which each shard stores them (the on-disk contract of `prepare`).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ringtrain::io {

// Names inside every shard file. Changing one breaks every dataset already written.
namespace shard_names {
inline constexpr const char* images = "images";          // N x C x H x W, uint8, chunked
inline constexpr const char* labels = "labels";          // N, int32
inline constexpr const char* num_classes = "num_classes";  // int attribute on the file root
inline constexpr const char* sample_shape = "sample_shape";  // int[3] attribute: C, H, W
inline constexpr const char* mean = "mean";              // float[C]: per-channel mean of the train split, in 0..255 units
inline constexpr const char* stddev = "std";             // float[C]: per-channel std of the train split, in 0..255 units
inline constexpr const char* provenance = "provenance";  // string: where the samples came from
inline constexpr const char* class_names = "class_names";  // optional string: class names by index, one a line
// Optional string, the same in every shard of one split and different in its sibling's ("train-1f0e...",
// "test-1f0e..."): a shard copied in from another split (the test split's) is found. Absent in older shards.
inline constexpr const char* split_id = "split_id";
inline constexpr const char* shard_index = "shard_index";  // int: this file's position in the split
inline constexpr const char* shard_count = "shard_count";  // int: files in the split
inline constexpr const char* file_prefix = "shard-";     // shard-00000-of-00008.h5
// Encoded samples (`prepare images --store jpeg`): no `images` dataset; sample_shape is what a sample decodes to.
inline constexpr const char* storage = "storage";        // string attribute: "jpeg"; absent: raw `images`
inline constexpr const char* encoded = "encoded";        // uint8: every sample's JPEG bytes, one after another
inline constexpr const char* encoded_offsets = "encoded_offsets";  // N + 1 int64: sample i is [o[i], o[i + 1])
inline constexpr const char* image_sizes = "image_sizes";  // N x 2 int32: each JPEG's height and width
inline constexpr const char* sample_crc32c = "sample_crc32c";  // N uint32: CRC-32C of each sample's bytes
inline constexpr const char* jpeg_storage = "jpeg";      // the value of `storage` for encoded shards
}  // namespace shard_names

// How a split holds its samples: decoded pixels of the sample shape, or each image's JPEG bytes (decoded, cropped
// and resized to the sample shape as they are read).
enum class SampleStorage { raw, jpeg };

struct SampleShape {
  int channels = 0, height = 0, width = 0;
  int64_t elements() const { return int64_t{channels} * height * width; }
  bool operator==(const SampleShape&) const = default;
};

struct DatasetMeta {
  SampleShape shape;
  int num_classes = 0;
  std::vector<float> mean;    // per channel, 0..255 units
  std::vector<float> stddev;  // per channel, 0..255 units
  std::string provenance;
  std::vector<std::string> class_names;  // by class index; empty when the source named no classes
  SampleStorage storage = SampleStorage::raw;
  std::string split_id;  // empty: none written (older shards)
};

// Every class's name: the shards' own where they carry them, else "class <index>".
inline std::vector<std::string> named_classes(const DatasetMeta& meta) {
  std::vector<std::string> names;
  for (int c = 0; c < meta.num_classes; ++c)
    names.push_back(static_cast<size_t>(c) < meta.class_names.size() && !meta.class_names[static_cast<size_t>(c)].empty()
                        ? meta.class_names[static_cast<size_t>(c)]
                        : "class " + std::to_string(c));
  return names;
}

// Channels whose training pixels are all alike (std under a thousandth of a level: the sums' rounding leaves a
// constant channel a tiny std, not 0) get std 1, which normalisation can divide by (it maps the channel to 0), where
// std 0 made a split no reader accepts (the alpha of photos without one, under --channels 4). Returns them.
inline std::vector<int> give_constant_channels_unit_std(DatasetMeta& meta) {
  std::vector<int> constant;
  for (size_t c = 0; c < meta.stddev.size(); ++c)
    if (!(meta.stddev[c] >= 1e-3f)) {
      meta.stddev[c] = 1.0f;
      constant.push_back(static_cast<int>(c));
    }
  return constant;
}

struct ShardInfo {
  std::filesystem::path path;
  int64_t samples = 0;
};

// A split folder (e.g. data/fmnist/train) after its shard headers were read and checked for consistency.
struct SplitIndex {
  std::filesystem::path dir;
  DatasetMeta meta;
  std::vector<ShardInfo> shards;  // in shard_index order
  int64_t total_samples() const;
  std::vector<int64_t> shard_sizes() const;
};

// Reads only headers (attributes and dataset extents), opening each shard once. Throws DataError naming the
// folder or the file and saying how to fix it: missing folder, no shards, unreadable or truncated file,
// missing dataset/attribute, shape or dtype differing between shards, shard_count disagreeing with the files.
SplitIndex open_split(const std::filesystem::path& dir);

}  // namespace ringtrain::io
