// Owns `prepare images`: a class-per-subfolder tree of JPEG/PNG files written as train/ and test/ splits, streaming:
// each shard's images are decoded on every thread of the rank, in order, and appended to the shard as they come,
// so memory stays a few hundred MB for any folder. Samples are stored decoded at the training size (raw) or as
// JPEG bytes (jpeg: decoded, cropped and resized when they are read), with the class names. Parallel over ranks:
// each rank writes the shards it owns; the split's statistics are summed across ranks and set last, and the shards
// take their names only when every rank has written its own, so a failed or killed prepare leaves no split that
// looks complete.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/dataset_meta.h"
#include "io/image_resize.h"
#include "io/prepare_arrays.h"

namespace ringtrain::io {

enum class ImageStore { automatic, raw, jpeg };

struct ImagesOptions {
  std::filesystem::path source, test_source;  // test_source empty: hold out arrays.test_fraction per class
  ImageSize size;
  int channels = 3;      // 1 gray, 3 RGB, 4 RGBA (raw only): every image is converted to this
  bool strict = false;   // an undecodable image stops the import instead of being skipped and listed
  int threads = 0;       // per rank; 0: every hardware thread
  ImageStore store = ImageStore::automatic;  // automatic: jpeg when the photos are larger than `size`
  int max_side = 0;      // jpeg: re-encode photos whose shorter side is over this, shrunk to it (0: keep every JPEG)
  int quality = 90;      // jpeg: quality of re-encoded images (PNG sources, shrunk photos)
  bool keep_jpeg_bytes = false;  // jpeg: store kept JPEGs byte for byte, and none in the region layout
  ArraysOptions arrays;  // out, shards, test_fraction, seed, overwrite (classes and names come from folders)
};

// What io/ cannot do itself (it knows no MPI): the ranks of a parallel prepare and their collectives. The default is
// one rank.
struct PrepareTeam {
  int rank = 0, ranks = 1;
  int ranks_on_node = 1;  // the node's memory is theirs to share
  std::string host;       // this rank's node, for messages
  std::function<void(std::span<int64_t>)> sum = [](std::span<int64_t>) {};  // element-wise across ranks, in place
  // Runs the step on every rank; if it throws on any, every rank throws the same error.
  std::function<void(const std::function<void()>&)> all_succeed = [](const std::function<void()>& step) { step(); };
};

// What the pass found, for the summary the command prints.
struct ImagesSummary {
  std::vector<std::string> class_names;
  std::vector<int64_t> train_per_class, test_per_class;  // images stored per class, every rank's
  std::vector<std::string> skipped;                      // "FILE: why", this rank's
  int64_t skipped_everywhere = 0;
  std::vector<int> constant_channels;      // stored with std 1: one value in every training pixel (dataset_meta.h)
  int64_t ignored_files = 0;               // files in the sources that are no image by name (image_folder.h)
  std::filesystem::path ignored_example;  // the first of them
  SampleStorage storage = SampleStorage::raw;
  double stored_bytes = 0;  // every rank's
  int train_shards = 0, test_shards = 0;  // at most --shards: a split has no more shards than images
  double seconds = 0;
  int threads = 0;
};

ImagesSummary prepare_images(const ImagesOptions& options, const PrepareTeam& team = {});

}  // namespace ringtrain::io
