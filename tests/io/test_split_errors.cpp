// Proves that every way a split folder can be wrong ends in a DataError naming the folder or file and the
// fix (open_split), or in a report listing every problem (inspect_split); and that H5_CHECK reports HDF5's
// own words instead of letting HDF5 print them.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "io/h5_check.h"
#include "io/h5_handle.h"
#include "io/inspect.h"
#include "io/shard_reader.h"
#include "io_test_support.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

using testing::expect_data_error;
using testing::RawShard;
using testing::shard_name;

class OpenSplit : public testing::IoTest {
 protected:
  // A valid 3-shard split whose shard 1 is replaced by `bad`; returns the bad file's path.
  fs::path split_with_bad_shard(RawShard bad) const {
    testing::write_raw_split(dir(), {5, 5, 5});
    bad.first_sample = 5;
    bad.samples = 5;
    bad.shard_index = 1;
    bad.shard_count = 3;
    const fs::path path = dir() / shard_name(1, 3);
    testing::write_raw_shard(path, bad);
    return path;
  }

  void expect_bad_shard(RawShard bad, const std::vector<std::string>& parts) const {
    const fs::path path = split_with_bad_shard(std::move(bad));
    std::vector<std::string> all = parts;
    all.push_back(path.string());
    all.push_back("ringtrain prepare");
    expect_data_error([&] { open_split(dir()); }, all);
  }

  // A good single-shard file copied and cut to half its size.
  fs::path truncated_copy() const {
    testing::write_raw_split(dir() / "good", {200}, {1, 8, 8});
    const fs::path good = dir() / "good" / shard_name(0, 1);
    fs::create_directories(dir() / "cut");
    const fs::path cut = dir() / "cut" / shard_name(0, 1);
    fs::copy_file(good, cut);
    fs::resize_file(cut, fs::file_size(good) / 2);
    return cut;
  }
};

TEST_F(OpenSplit, MissingFolderOrNoShards) {
  expect_data_error([&] { open_split(dir() / "nope"); }, {(dir() / "nope").string(), "does not exist", "prepare"});
  std::ofstream(dir() / "README").put('x');
  std::ofstream(dir() / "shard-notes.txt").put('x');
  expect_data_error([&] { open_split(dir()); }, {dir().string(), "no shard-*.h5 files", "prepare"});
}

TEST_F(OpenSplit, NotHdf5OrTruncated) {
  std::ofstream(dir() / shard_name(0, 1)) << "this is not HDF5";
  expect_data_error([&] { open_split(dir()); }, {(dir() / shard_name(0, 1)).string(), "not an HDF5 file"});
  const fs::path cut = truncated_copy();
  expect_data_error([&] { open_split(cut.parent_path()); }, {cut.string(), "truncated or corrupt", "prepare"});
}

TEST_F(OpenSplit, MissingDatasets) {
  RawShard no_images;
  no_images.with_images = false;
  expect_bad_shard(no_images, {"no dataset 'images'"});
  RawShard no_labels;
  no_labels.with_labels = false;
  expect_bad_shard(no_labels, {"no dataset 'labels'"});
}

TEST_F(OpenSplit, MissingAttributes) {
  for (const char* name : {shard_names::num_classes, shard_names::sample_shape, shard_names::mean,
                           shard_names::stddev, shard_names::shard_index, shard_names::shard_count}) {
    SCOPED_TRACE(name);
    RawShard spec;
    spec.omit_attributes = {name};
    expect_bad_shard(spec, {std::string("no root attribute '") + name + "'"});
  }
}

TEST_F(OpenSplit, WrongImageTypeOrRank) {
  RawShard floats;
  floats.image_type = H5T_IEEE_F32LE;
  expect_bad_shard(floats, {"float32", "expected uint8"});
  RawShard rank3;
  rank3.image_dims = {5, 4, 4};
  expect_bad_shard(rank3, {"rank 3", "expected rank 4"});
}

TEST_F(OpenSplit, ShapeDifferingFromAttributeOrBetweenShards) {
  RawShard lies;
  lies.shape_attribute = SampleShape{1, 4, 5};
  expect_bad_shard(lies, {"stores 1x4x4 images", "says 1x4x5"});

  // Self-consistent but different from its neighbours: a split-level problem naming both files.
  RawShard other_shape;
  other_shape.shape = {3, 4, 4};
  const fs::path path = split_with_bad_shard(other_shape);
  expect_data_error([&] { open_split(dir()); },
                    {dir().string(), path.string(), (dir() / shard_name(0, 3)).string(), "3x4x4", "1x4x4"});
}

TEST_F(OpenSplit, LabelCountDiffersFromImageCount) {
  RawShard spec;
  spec.label_count = 4;
  expect_bad_shard(spec, {"5 images but 4 labels"});
}

TEST_F(OpenSplit, ShardCountDisagreesWithFiles) {
  testing::write_raw_split(dir(), {4, 4, 4});
  fs::remove(dir() / shard_name(1, 3));
  expect_data_error([&] { open_split(dir()); },
                    {dir().string(), "say the split has 3 files", "holds 2", shard_name(1, 3), "ringtrain prepare"});
  // An extra file from another prepare run.
  testing::write_raw_split(dir() / "two", {4, 4});
  fs::copy_file(dir() / "two" / shard_name(1, 2), dir() / shard_name(1, 2));
  expect_data_error([&] { open_split(dir()); }, {dir().string(), "holds 3"});
}

TEST_F(OpenSplit, ValidSplitOpens) {
  testing::write_raw_split(dir(), {3, 9, 1}, {2, 3, 4}, 5);
  const SplitIndex split = open_split(dir());
  EXPECT_EQ(split.dir, dir());
  EXPECT_EQ(split.shard_sizes(), (std::vector<int64_t>{3, 9, 1}));
  EXPECT_EQ(split.meta.shape, (SampleShape{2, 3, 4}));
  EXPECT_EQ(split.meta.num_classes, 5);
  EXPECT_EQ(split.meta.mean, (std::vector<float>{100.5f, 100.5f}));
}

class InspectSplit : public OpenSplit {};

TEST_F(InspectSplit, ValidSplitHasHistogramsAndAReport) {
  testing::write_raw_split(dir(), {7, 6}, {1, 4, 4}, 3);
  const SplitReport report = inspect_split(dir());
  EXPECT_TRUE(report.valid());
  ASSERT_EQ(report.shards.size(), 2u);
  EXPECT_EQ(report.shards[0].samples, 7);
  EXPECT_EQ(report.shards[0].class_histogram, (std::vector<int64_t>{3, 2, 2}));  // samples 0..6 mod 3
  EXPECT_EQ(report.shards[1].class_histogram, (std::vector<int64_t>{2, 2, 2}));  // samples 7..12 mod 3
  const std::string text = format_report(report);
  for (const std::string part : {"13 in 2 shards", "1x4x4", "classes     3", "100.50", "50.25", "3 2 2", "2 2 2",
                                 "OK"})
    EXPECT_NE(text.find(part), std::string::npos) << "report lacks '" << part << "':\n" << text;
}

TEST_F(InspectSplit, FindsWrongShapeOutOfRangeLabelAndTruncationTogether) {
  testing::write_raw_split(dir(), {5, 5, 5, 5});
  RawShard wrong_shape;  // images 1x4x3 while the others (and its own attribute) say 1x4x4
  wrong_shape.first_sample = 5;
  wrong_shape.samples = 5;
  wrong_shape.shape = {1, 4, 3};
  wrong_shape.shape_attribute = SampleShape{1, 4, 4};
  wrong_shape.shard_index = 1;
  wrong_shape.shard_count = 4;
  testing::write_raw_shard(dir() / shard_name(1, 4), wrong_shape);
  RawShard bad_label;
  bad_label.first_sample = 10;
  bad_label.samples = 5;
  bad_label.labels = {0, 1, 12, 3, -1};
  bad_label.shard_index = 2;
  bad_label.shard_count = 4;
  testing::write_raw_shard(dir() / shard_name(2, 4), bad_label);
  const fs::path cut = dir() / shard_name(3, 4);
  fs::resize_file(cut, fs::file_size(cut) / 2);

  const SplitReport report = inspect_split(dir());
  EXPECT_FALSE(report.valid());
  ASSERT_EQ(report.shards.size(), 4u);
  auto has = [](const std::vector<std::string>& problems, const std::string& part) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& p) { return p.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(report.shards[0].problems.empty());
  EXPECT_EQ(report.shards[0].class_histogram, (std::vector<int64_t>{1, 1, 1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(has(report.shards[1].problems, "stores 1x4x3 images")) << format_report(report);
  EXPECT_TRUE(has(report.problems, "1x4x3")) << "split level: shapes differ between shards";
  EXPECT_TRUE(has(report.shards[2].problems, "2 labels outside [0, 10)"));
  EXPECT_TRUE(has(report.shards[2].problems, "label 12 at sample 2"));
  EXPECT_EQ(report.shards[2].class_histogram, (std::vector<int64_t>{1, 1, 0, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(has(report.shards[3].problems, "truncated")) << format_report(report);

  const std::string text = format_report(report);
  EXPECT_NE(text.find("INVALID"), std::string::npos);
  EXPECT_NE(text.find(cut.string()), std::string::npos);
  EXPECT_NE(text.find((dir() / shard_name(2, 4)).string()), std::string::npos);
  // open_split stops at the first of them.
  expect_data_error([&] { open_split(dir()); }, {shard_name(1, 4)});
}

TEST_F(InspectSplit, EmptyFolderIsAProblemAndMissingFolderThrows) {
  const SplitReport empty = inspect_split(dir());
  EXPECT_FALSE(empty.valid());
  EXPECT_NE(format_report(empty).find("no shard-*.h5"), std::string::npos);
  expect_data_error([&] { inspect_split(dir() / "nope"); }, {(dir() / "nope").string()});
}

TEST(H5Check, FailureCarriesHdf5sStackAndPrintsNothing) {
  ::testing::internal::CaptureStderr();
  try {
    H5_CHECK(H5Fopen("/nonexistent/folder/file.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    ADD_FAILURE() << "H5_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::library);
    const std::string message = e.what();
    for (const std::string part : {"HDF5", "H5Fopen(\"/nonexistent/folder/file.h5\"", "test_split_errors.cpp",
                                   "unable to open file"})
      EXPECT_NE(message.find(part), std::string::npos) << "message lacks '" << part << "':\n" << message;
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "HDF5 printed its error stack itself";

  // HDF5's automatic printing is per thread in thread-safe builds: a loader thread must be silent too.
  ::testing::internal::CaptureStderr();
  std::string thread_message;
  std::thread loader([&] {
    try {
      H5_CHECK(H5Fopen("/nonexistent/from-a-thread.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    } catch (const Error& e) {
      thread_message = e.what();
    }
  });
  loader.join();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "HDF5 printed from the second thread";
  EXPECT_NE(thread_message.find("unable to open file"), std::string::npos) << thread_message;

  const hid_t space = H5_CHECK(H5Screate(H5S_SCALAR));  // success passes the value through
  EXPECT_GE(space, 0);
  H5Dataspace owned(space);
  owned.close();
  EXPECT_FALSE(owned.valid());
}

}  // namespace
}  // namespace ringtrain::io
