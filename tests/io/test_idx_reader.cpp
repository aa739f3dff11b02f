// Proves the IDX decoder on tiny files written here: gzip'd and plain, and that a wrong magic number,
// truncated data, trailing data and a corrupt gzip stream are DataErrors naming the file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>

#include "io/idx_reader.h"
#include "io_test_support.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

class IdxReader : public testing::IoTest {
 protected:
  static std::vector<uint8_t> header(uint32_t magic, const std::vector<uint32_t>& dims) {
    std::vector<uint8_t> bytes;
    const auto put = [&](uint32_t value) {
      for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(value >> shift));
    };
    put(magic);
    for (const uint32_t dim : dims) put(dim);
    return bytes;
  }

  fs::path write_gz(const std::string& name, const std::vector<uint8_t>& bytes) const {
    const fs::path path = dir() / name;
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr);
    EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    EXPECT_EQ(gzclose(file), Z_OK);
    return path;
  }

  fs::path write_plain(const std::string& name, const std::vector<uint8_t>& bytes) const {
    const fs::path path = dir() / name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  // Three 2x3 images with pixel value 10*image + position.
  static std::vector<uint8_t> three_images() {
    std::vector<uint8_t> bytes = header(0x803, {3, 2, 3});
    for (int i = 0; i < 3; ++i)
      for (int p = 0; p < 6; ++p) bytes.push_back(static_cast<uint8_t>(10 * i + p));
    return bytes;
  }
};

TEST_F(IdxReader, ReadsGzipAndPlainImagesAndLabels) {
  for (const bool gzip : {true, false}) {
    const fs::path images_path =
        gzip ? write_gz("images.gz", three_images()) : write_plain("images", three_images());
    const IdxImages images = read_idx_images(images_path);
    EXPECT_EQ(images.count, 3);
    EXPECT_EQ(images.rows, 2);
    EXPECT_EQ(images.cols, 3);
    ASSERT_EQ(images.pixels.size(), 18u);
    EXPECT_EQ(images.pixels[0], 0);
    EXPECT_EQ(images.pixels[7], 11);
    EXPECT_EQ(images.pixels[17], 25);

    std::vector<uint8_t> label_bytes = header(0x801, {4});
    for (const uint8_t label : {9, 0, 3, 7}) label_bytes.push_back(label);
    const fs::path labels_path = gzip ? write_gz("labels.gz", label_bytes) : write_plain("labels", label_bytes);
    EXPECT_EQ(read_idx_labels(labels_path), (std::vector<uint8_t>{9, 0, 3, 7}));
  }
}

TEST_F(IdxReader, WrongMagicNamesTheFile) {
  const fs::path labels_as_images = write_gz("labels.gz", [] {
    std::vector<uint8_t> bytes = header(0x801, {2});
    bytes.push_back(1);
    bytes.push_back(2);
    return bytes;
  }());
  testing::expect_data_error([&] { read_idx_images(labels_as_images); },
                             {labels_as_images.string(), "magic number 0x00000801", "0x00000803"});
  const fs::path images_as_labels = write_gz("images.gz", three_images());
  testing::expect_data_error([&] { read_idx_labels(images_as_labels); }, {images_as_labels.string(), "magic"});
}

TEST_F(IdxReader, TruncatedOrOverlongDataNamesTheFile) {
  std::vector<uint8_t> short_bytes = three_images();
  short_bytes.resize(short_bytes.size() - 4);  // header says 3 images, the data holds 2 and a bit
  const fs::path truncated = write_gz("truncated.gz", short_bytes);
  testing::expect_data_error([&] { read_idx_images(truncated); }, {truncated.string(), "truncated"});

  const fs::path header_only = write_plain("header-only", header(0x803, {3, 2}));
  testing::expect_data_error([&] { read_idx_images(header_only); }, {header_only.string(), "truncated"});

  std::vector<uint8_t> long_bytes = three_images();
  long_bytes.push_back(0);
  const fs::path overlong = write_gz("overlong.gz", long_bytes);
  testing::expect_data_error([&] { read_idx_images(overlong); }, {overlong.string(), "more data"});
}

TEST_F(IdxReader, CutGzipStreamAndMissingFileNameTheFile) {
  std::vector<uint8_t> big = header(0x803, {100, 28, 28});
  for (int i = 0; i < 100 * 28 * 28; ++i) big.push_back(static_cast<uint8_t>(i * 7919 % 251));
  const fs::path whole = write_gz("whole.gz", big);
  const auto size = fs::file_size(whole);
  fs::resize_file(whole, size / 2);  // the gzip stream itself is cut
  testing::expect_data_error([&] { read_idx_images(whole); }, {whole.string(), "truncated"});

  const fs::path missing = dir() / "absent.gz";
  testing::expect_data_error([&] { read_idx_labels(missing); }, {missing.string()});
}

}  // namespace
}  // namespace ringtrain::io
