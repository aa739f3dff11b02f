// Owns what the io/ tests share: a fresh temporary folder per test, sample data whose every sample carries
// a unique signature, and crafting shard files (good or deliberately broken) with the raw HDF5 API.
#pragma once
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "io/dataset_meta.h"
#include "io/h5_file_format.h"
#include "io/shard_writer.h"

namespace ringtrain::io::testing {

namespace fs = std::filesystem;

// Each test gets its own empty folder, removed afterwards.
class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("ringtrain-io-") + info->test_suite_name() + "-" + info->name() + "-" +
            std::to_string(static_cast<long>(::getpid())));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

// Global sample g: bytes 0..3 hold g (little-endian), the rest a pattern of g; label g % classes. Any sample
// read back can thus be identified and checked byte for byte.
inline void fill_signature(int64_t g, std::span<uint8_t> sample) {
  for (std::size_t k = 0; k < sample.size(); ++k)
    sample[k] = k < 4 ? static_cast<uint8_t>((g >> (8 * k)) & 0xff) : static_cast<uint8_t>((g * 31 + static_cast<int64_t>(k) * 7) & 0xff);
}

inline int64_t signature_of(std::span<const uint8_t> sample) {
  int64_t g = 0;
  for (std::size_t k = 0; k < 4; ++k) g |= int64_t{sample[k]} << (8 * k);
  return g;
}

inline DatasetMeta test_meta(SampleShape shape, int classes) {
  DatasetMeta meta;
  meta.shape = shape;
  meta.num_classes = classes;
  meta.mean.assign(static_cast<std::size_t>(shape.channels), 100.5f);
  meta.stddev.assign(static_cast<std::size_t>(shape.channels), 50.25f);
  meta.provenance = "io tests";
  return meta;
}

inline SampleSource signature_source(const DatasetMeta& meta) {
  const auto bytes = static_cast<std::size_t>(meta.shape.elements());
  const int classes = meta.num_classes;
  return [bytes, classes](int64_t first, int64_t count, std::span<uint8_t> images, std::span<int32_t> labels) {
    for (int64_t i = 0; i < count; ++i) {
      const auto slot = static_cast<std::size_t>(i);
      fill_signature(first + i, images.subspan(slot * bytes, bytes));
      labels[slot] = static_cast<int32_t>((first + i) % classes);
    }
  };
}

// ---- raw HDF5 crafting (deliberately not using io/'s helpers, so the tests do not trust what they test)

inline hid_t ok(hid_t result, const char* what) {
  if (result < 0) throw std::runtime_error(std::string("test HDF5 call failed: ") + what);
  return result;
}

struct RawShard {
  int64_t first_sample = 0;  // signature of the shard's first sample
  int64_t samples = 10;
  SampleShape shape{1, 4, 4};
  std::vector<hsize_t> image_dims;  // overrides {samples, C, H, W} (a wrong rank)
  hid_t image_type = H5T_STD_U8LE;
  std::optional<int64_t> label_count;   // default: samples
  std::vector<int32_t> labels;          // default: global index % num_classes
  bool with_images = true, with_labels = true;
  int num_classes = 10;
  std::optional<SampleShape> shape_attribute;  // default: shape
  int shard_index = 0, shard_count = 1;
  std::set<std::string> omit_attributes;
  std::vector<float> mean, stddev;  // default: 100.5 and 50.25 per channel
};

inline void write_int_attr(hid_t file, const char* name, std::vector<int> values) {
  const hsize_t n = values.size();
  const hid_t space = ok(H5Screate_simple(1, &n, nullptr), "H5Screate_simple");
  const hid_t attr = ok(H5Acreate2(file, name, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
  ok(H5Awrite(attr, H5T_NATIVE_INT, values.data()), "H5Awrite");
  H5Aclose(attr);
  H5Sclose(space);
}

inline void write_float_attr(hid_t file, const char* name, std::vector<float> values) {
  const hsize_t n = values.size();
  const hid_t space = ok(H5Screate_simple(1, &n, nullptr), "H5Screate_simple");
  const hid_t attr = ok(H5Acreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
  ok(H5Awrite(attr, H5T_NATIVE_FLOAT, values.data()), "H5Awrite");
  H5Aclose(attr);
  H5Sclose(space);
}

inline void write_raw_shard(const fs::path& path, const RawShard& spec) {
  // The format ringtrain's own writer uses, so the fuzzer breaks the files users actually have.
  const hid_t file = ok(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, checksummed_file_access().id()),
                        "H5Fcreate");
  const auto bytes = static_cast<std::size_t>(spec.shape.elements());
  if (spec.with_images) {
    std::vector<hsize_t> dims = spec.image_dims;
    if (dims.empty())
      dims = {static_cast<hsize_t>(spec.samples), static_cast<hsize_t>(spec.shape.channels),
              static_cast<hsize_t>(spec.shape.height), static_cast<hsize_t>(spec.shape.width)};
    hsize_t elements = 1;
    for (const hsize_t d : dims) elements *= d;
    const hid_t space = ok(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple");
    const hid_t set = ok(H5Dcreate2(file, shard_names::images, spec.image_type, space, H5P_DEFAULT, H5P_DEFAULT,
                                    H5P_DEFAULT),
                         "H5Dcreate2 images");
    std::vector<uint8_t> pixels(static_cast<std::size_t>(elements));
    if (dims.size() == 4 && elements == static_cast<hsize_t>(spec.samples) * bytes)
      for (int64_t i = 0; i < spec.samples; ++i)
        fill_signature(spec.first_sample + i, std::span(pixels).subspan(static_cast<std::size_t>(i) * bytes, bytes));
    std::vector<float> as_float(pixels.begin(), pixels.end());
    if (spec.image_type == H5T_STD_U8LE)
      ok(H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, pixels.data()), "H5Dwrite images");
    else
      ok(H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, as_float.data()), "H5Dwrite images");
    H5Dclose(set);
    H5Sclose(space);
  }
  if (spec.with_labels) {
    const int64_t count = spec.label_count.value_or(spec.samples);
    std::vector<int32_t> labels = spec.labels;
    if (!labels.empty() && static_cast<int64_t>(labels.size()) != count)
      throw std::runtime_error("RawShard: labels.size() differs from the label count");
    if (labels.empty())
      for (int64_t i = 0; i < count; ++i) labels.push_back(static_cast<int32_t>((spec.first_sample + i) % spec.num_classes));
    const hsize_t n = static_cast<hsize_t>(count);
    const hid_t space = ok(H5Screate_simple(1, &n, nullptr), "H5Screate_simple");
    const hid_t set = ok(H5Dcreate2(file, shard_names::labels, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                                    H5P_DEFAULT),
                         "H5Dcreate2 labels");
    ok(H5Dwrite(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()), "H5Dwrite labels");
    H5Dclose(set);
    H5Sclose(space);
  }
  const SampleShape attr_shape = spec.shape_attribute.value_or(spec.shape);
  const auto channels = static_cast<std::size_t>(attr_shape.channels);
  auto want = [&](const char* name) { return !spec.omit_attributes.contains(name); };
  if (want(shard_names::num_classes)) write_int_attr(file, shard_names::num_classes, {spec.num_classes});
  if (want(shard_names::sample_shape))
    write_int_attr(file, shard_names::sample_shape, {attr_shape.channels, attr_shape.height, attr_shape.width});
  if (want(shard_names::mean))
    write_float_attr(file, shard_names::mean, spec.mean.empty() ? std::vector<float>(channels, 100.5f) : spec.mean);
  if (want(shard_names::stddev))
    write_float_attr(file, shard_names::stddev, spec.stddev.empty() ? std::vector<float>(channels, 50.25f) : spec.stddev);
  if (want(shard_names::shard_index)) write_int_attr(file, shard_names::shard_index, {spec.shard_index});
  if (want(shard_names::shard_count)) write_int_attr(file, shard_names::shard_count, {spec.shard_count});
  ok(H5Fclose(file), "H5Fclose");
}

inline std::string shard_name(int index, int count) {
  char name[64];
  std::snprintf(name, sizeof name, "shard-%05d-of-%05d.h5", index, count);
  return name;
}

// Writes shards of the given sizes as one valid split in `dir`; samples are numbered across the split.
inline void write_raw_split(const fs::path& dir, const std::vector<int64_t>& sizes, SampleShape shape = {1, 4, 4},
                            int classes = 10) {
  fs::create_directories(dir);
  int64_t first = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    RawShard spec;
    spec.first_sample = first;
    spec.samples = sizes[k];
    spec.shape = shape;
    spec.num_classes = classes;
    spec.shard_index = static_cast<int>(k);
    spec.shard_count = static_cast<int>(sizes.size());
    write_raw_shard(dir / shard_name(static_cast<int>(k), static_cast<int>(sizes.size())), spec);
    first += sizes[k];
  }
}

// Runs `action`, requires a DataError, and requires its message to contain every one of `parts`.
inline void expect_data_error(const std::function<void()>& action, const std::vector<std::string>& parts) {
  try {
    action();
    ADD_FAILURE() << "expected a DataError containing '" << (parts.empty() ? "" : parts.front()) << "'";
  } catch (const DataError& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "message lacks '" << part << "':\n  " << message;
  }
}

}  // namespace ringtrain::io::testing
