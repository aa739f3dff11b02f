// Owns decoding the IDX format (gzip'd or plain) used by MNIST and Fashion-MNIST.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

namespace ringtrain::io {

struct IdxImages {
  int64_t count = 0;
  int rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols
};

// Throw DataError naming the file on a wrong magic number, truncation or gzip corruption.
IdxImages read_idx_images(const std::filesystem::path& file);
std::vector<uint8_t> read_idx_labels(const std::filesystem::path& file);

}  // namespace ringtrain::io
