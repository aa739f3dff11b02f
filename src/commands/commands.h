// Owns the subcommands' entry points; main.cpp only parses the command line and dispatches.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "io/prepare.h"
#include "io/prepare_arrays.h"
#include "io/prepare_images.h"

namespace ringtrain::commands {

struct TrainArgs {
  std::filesystem::path job;
  std::vector<std::string> overrides;
  bool resume = false;
};

int train(int* argc, char*** argv, const TrainArgs& args);  // initialises MPI; returns the exit code
int prepare_fashion_mnist(const std::filesystem::path& source, const std::filesystem::path& out, int shards, bool overwrite);
int prepare_synthetic(const std::filesystem::path& out, const io::SyntheticOptions& options, bool overwrite);

// `prepare arrays`: either .npy files (images, labels, optional test pair) or datasets of one HDF5 file.
struct ArraysArgs {
  std::string images, labels, test_images, test_labels;
  std::string from_hdf5, images_dataset = "images", labels_dataset = "labels";
  std::string test_images_dataset, test_labels_dataset;
  std::string layout = "nchw", class_names;  // class_names: comma-separated
  io::ArraysOptions options;
};
int prepare_arrays(ArraysArgs args);

// `prepare images`: size_text is "H" (square) or "H,W"; prints the decode summary.
int prepare_images(io::ImagesOptions options, const std::string& size_text);
int inspect(const std::filesystem::path& path);  // a split folder, or a checkpoint file
int print_versions();
int print_keys();

}  // namespace ringtrain::commands
