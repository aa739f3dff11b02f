// Owns `prepare images`: a class-per-subfolder tree of JPEG/PNG files decoded on all cores, brought to one
// size and channel count, and written as train/ and test/ splits with the class names.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "io/image_resize.h"
#include "io/prepare_arrays.h"

namespace ringtrain::io {

struct ImagesOptions {
  std::filesystem::path source, test_source;  // test_source empty: hold out arrays.test_fraction per class
  ImageSize size;
  int channels = 3;      // 1 gray, 3 RGB, 4 RGBA: every image is converted to this
  bool strict = false;   // an undecodable image stops the import instead of being skipped and listed
  int threads = 0;       // 0: every hardware thread
  ArraysOptions arrays;  // out, shards, test_fraction, seed, overwrite (classes and names come from folders)
};

// What the decode pass found, for the summary the command prints.
struct ImagesSummary {
  std::vector<std::string> class_names;
  std::vector<int64_t> train_per_class, test_per_class;  // decoded images per class, before any hold-out
  std::vector<std::string> skipped;                      // "FILE: why"
  double seconds = 0;
  int threads = 0;
};

ImagesSummary prepare_images(const ImagesOptions& options);

}  // namespace ringtrain::io
