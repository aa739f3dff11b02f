// Owns crafting the deliberately broken datasets of tests/faults/bad_input.sh: OUT/train is a 2-shard split
// (20 samples of 1x8x8 each, 3 classes) carrying one named fault, OUT/test a valid 8-sample split, so each
// case exercises exactly one check. Faults made by cutting bytes (truncation, a clobbered signature) are
// done by the script on a valid split; this tool makes those that need HDF5 itself.
// Usage: make_bad_split CASE OUT   with CASE one of: valid shape_between_shards dtype_between_shards
//        label_out_of_range nan_mean inf_std zero_std nan_float_images unwritten_labels
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "tests/io/io_test_support.h"

namespace {

using namespace ringtrain::io;
using namespace ringtrain::io::testing;

constexpr SampleShape kShape{1, 8, 8};
constexpr int kClasses = 3;
constexpr int64_t kSamplesPerShard = 20;

RawShard shard_spec(int index, int count, int64_t samples) {
  RawShard spec;
  spec.first_sample = index * samples;
  spec.samples = samples;
  spec.shape = kShape;
  spec.num_classes = kClasses;
  spec.shard_index = index;
  spec.shard_count = count;
  return spec;
}

// Overwrites the first element of the (float) images dataset with NaN: float data a reader must not trust.
void poison_first_float_pixel(const fs::path& path) {
  const hid_t file = ok(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen");
  const hid_t set = ok(H5Dopen2(file, shard_names::images, H5P_DEFAULT), "H5Dopen2 images");
  const hid_t space = ok(H5Dget_space(set), "H5Dget_space");
  const hsize_t start[4] = {0, 0, 0, 0}, count[4] = {1, 1, 1, 1};
  ok(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), "H5Sselect_hyperslab");
  const hsize_t one = 1;
  const hid_t memory = ok(H5Screate_simple(1, &one, nullptr), "H5Screate_simple");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ok(H5Dwrite(set, H5T_NATIVE_FLOAT, memory, space, H5P_DEFAULT, &nan), "H5Dwrite NaN");
  ok(H5Sclose(memory), "H5Sclose");
  ok(H5Sclose(space), "H5Sclose");
  ok(H5Dclose(set), "H5Dclose");
  ok(H5Fclose(file), "H5Fclose");
}

// Replaces the labels with a chunked dataset of the same extent whose chunks were never written: what a
// writer killed between creating and filling a dataset leaves behind.
void unwrite_labels(const fs::path& path) {
  const hid_t file = ok(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen");
  ok(H5Ldelete(file, shard_names::labels, H5P_DEFAULT), "H5Ldelete labels");
  const hsize_t count = kSamplesPerShard, chunk = 4;
  const hid_t space = ok(H5Screate_simple(1, &count, nullptr), "H5Screate_simple");
  const hid_t creation = ok(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  ok(H5Pset_chunk(creation, 1, &chunk), "H5Pset_chunk");
  ok(H5Dclose(ok(H5Dcreate2(file, shard_names::labels, H5T_STD_I32LE, space, H5P_DEFAULT, creation, H5P_DEFAULT),
                 "H5Dcreate2 labels")),
     "H5Dclose");
  ok(H5Pclose(creation), "H5Pclose");
  ok(H5Sclose(space), "H5Sclose");
  ok(H5Fclose(file), "H5Fclose");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_bad_split CASE OUT\n");
    return 2;
  }
  const std::string fault = argv[1];
  const fs::path out = argv[2];
  try {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // our ok() reports failures; HDF5's own print is noise
    fs::create_directories(out / "train");
    fs::create_directories(out / "test");
    {
      RawShard test = shard_spec(0, 1, 8);
      write_raw_shard(out / "test" / shard_name(0, 1), test);
    }
    RawShard first = shard_spec(0, 2, kSamplesPerShard), second = shard_spec(1, 2, kSamplesPerShard);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    if (fault == "shape_between_shards") {
      second.shape = {1, 8, 9};
    } else if (fault == "dtype_between_shards" || fault == "nan_float_images") {
      second.image_type = H5T_IEEE_F32LE;
    } else if (fault == "label_out_of_range") {
      // In the second shard, so only rank 1 (of 2) reads it: the agreement must carry it to rank 0.
      for (int64_t i = 0; i < kSamplesPerShard; ++i) second.labels.push_back(static_cast<int32_t>(i % kClasses));
      second.labels[5] = 7;
    } else if (fault == "nan_mean") {
      first.mean = second.mean = {nan};
    } else if (fault == "inf_std") {
      first.stddev = second.stddev = {inf};
    } else if (fault == "zero_std") {
      first.stddev = second.stddev = {0.0f};
    } else if (fault != "valid" && fault != "unwritten_labels") {
      std::fprintf(stderr, "make_bad_split: unknown case '%s'\n", fault.c_str());
      return 2;
    }
    write_raw_shard(out / "train" / shard_name(0, 2), first);
    write_raw_shard(out / "train" / shard_name(1, 2), second);
    if (fault == "nan_float_images") poison_first_float_pixel(out / "train" / shard_name(1, 2));
    if (fault == "unwritten_labels") unwrite_labels(out / "train" / shard_name(1, 2));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_bad_split %s: %s\n", fault.c_str(), e.what());
    return 1;
  }
  return 0;
}
