// Proves `prepare arrays` on .npy input: an NHWC array round-trips into NCHW shards with its labels, class
// names and a stratified hold-out; wrong dtypes, mismatched counts, bad labels and damaged files are refused
// with errors naming the file, and nothing is written.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <numeric>

#include "common/error.h"
#include "io/npy_file.h"
#include "io/prepare_arrays.h"
#include "io/shard_reader.h"
#include "io_test_support.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

// A version-1 .npy file as numpy.save writes it: magic, header padded to 64 bytes, raw payload.
void write_npy(const fs::path& file, const std::string& descr, const std::string& shape, const std::vector<uint8_t>& bytes) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(file, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char length[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(length, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> int64_bytes(const std::vector<int64_t>& values) {
  std::vector<uint8_t> bytes(values.size() * 8);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// 30 samples of 4x5 pixels, 3 channels in NHWC; pixel value encodes (sample, y, x, channel).
struct Example {
  std::vector<uint8_t> nhwc;
  std::vector<int64_t> labels;
};
Example example() {
  Example e;
  for (int n = 0; n < 30; ++n) {
    e.labels.push_back(n % 3);
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 5; ++x)
        for (int c = 0; c < 3; ++c) e.nhwc.push_back(static_cast<uint8_t>(n * 7 + y * 20 + x * 3 + c * 80));
  }
  return e;
}

class PrepareArrays : public testing::IoTest {
 protected:
  void write_example() {
    const Example e = example();
    write_npy(dir() / "x.npy", "|u1", "30, 4, 5, 3", e.nhwc);
    write_npy(dir() / "y.npy", "<i8", "30,", int64_bytes(e.labels));
  }
  ArraysOptions options() const {
    ArraysOptions o;
    o.out = dir() / "out";
    o.shards = 2;
    o.test_fraction = 0.2;
    o.class_names = {"a", "b", "c"};
    return o;
  }
  void expect_refused(const std::string& fragment) {
    try {
      prepare_arrays(load_npy_arrays(dir() / "x.npy", dir() / "y.npy", ArrayLayout::nhwc), {}, options());
      FAIL() << "accepted; expected an error containing: " << fragment;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir() / "out")) << "a refused import writes nothing";
  }
};

TEST_F(PrepareArrays, NhwcRoundTripsIntoNchwShardsWithStratifiedHoldOut) {
  write_example();
  prepare_arrays(load_npy_arrays(dir() / "x.npy", dir() / "y.npy", ArrayLayout::nhwc), {}, options());
  const SplitIndex train = open_split(dir() / "out" / "train");
  const SplitIndex test = open_split(dir() / "out" / "test");
  EXPECT_EQ(train.meta.shape, (SampleShape{3, 4, 5}));
  EXPECT_EQ(train.meta.num_classes, 3);
  EXPECT_EQ(train.meta.class_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(train.total_samples(), 24);
  EXPECT_EQ(test.total_samples(), 6) << "20% of each class of 10";

  const Example e = example();
  std::map<int32_t, int> test_per_class;
  for (const SplitIndex* split : {&train, &test}) {
    ShardReader reader(*split, {0, split->total_samples()});
    std::vector<int64_t> indices(static_cast<std::size_t>(split->total_samples()));
    std::iota(indices.begin(), indices.end(), 0);
    std::vector<uint8_t> images(indices.size() * 60);
    std::vector<int32_t> labels(indices.size());
    reader.read(indices, images, labels);
    for (std::size_t i = 0; i < indices.size(); ++i) {
      const int n = (images[i * 60] % 256) / 7;  // pixel (c=0, y=0, x=0) is n * 7
      EXPECT_EQ(labels[i], e.labels[static_cast<std::size_t>(n)]);
      // NCHW: channel c, row y, column x sits at c*20 + y*5 + x.
      EXPECT_EQ(images[i * 60 + 2 * 20 + 3 * 5 + 4], e.nhwc[static_cast<std::size_t>(((n * 4 + 3) * 5 + 4) * 3 + 2)]);
      if (split == &test) ++test_per_class[labels[i]];
    }
  }
  EXPECT_EQ(test_per_class, (std::map<int32_t, int>{{0, 2}, {1, 2}, {2, 2}}));
}

TEST_F(PrepareArrays, RefusesFloatImages) {
  write_example();
  write_npy(dir() / "x.npy", "<f4", "30, 4, 5, 3", std::vector<uint8_t>(30 * 60 * 4));
  expect_refused("need uint8");
}

TEST_F(PrepareArrays, RefusesMismatchedCounts) {
  write_example();
  write_npy(dir() / "y.npy", "<i8", "29,", int64_bytes(std::vector<int64_t>(29, 0)));
  expect_refused("holds 30 images but labels");
}

TEST_F(PrepareArrays, RefusesNegativeLabelsAndTooFewClassNames) {
  write_example();
  std::vector<int64_t> labels = example().labels;
  labels[5] = -1;
  write_npy(dir() / "y.npy", "<i8", "30,", int64_bytes(labels));
  expect_refused("label -1 at position 5");
  write_example();
  labels[5] = 3;  // four classes, three names
  write_npy(dir() / "y.npy", "<i8", "30,", int64_bytes(labels));
  expect_refused("--class-names lists 3 names");
}

TEST_F(PrepareArrays, RefusesTruncatedAndForeignFiles) {
  write_example();
  fs::resize_file(dir() / "x.npy", fs::file_size(dir() / "x.npy") - 1);
  expect_refused("truncated");
  std::ofstream(dir() / "x.npy") << "not numpy at all";
  expect_refused("x93NUMPY");
}

}  // namespace
}  // namespace ringtrain::io
