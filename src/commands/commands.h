// Owns the subcommands' entry points; main.cpp only parses the command line and dispatches.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "io/prepare.h"

namespace ringtrain::commands {

struct TrainArgs {
  std::filesystem::path job;
  std::vector<std::string> overrides;
  bool resume = false;
};

int train(int* argc, char*** argv, const TrainArgs& args);  // initialises MPI; returns the exit code
int prepare_fashion_mnist(const std::filesystem::path& source, const std::filesystem::path& out, int shards, bool overwrite);
int prepare_synthetic(const std::filesystem::path& out, const io::SyntheticOptions& options, bool overwrite);
int inspect(const std::filesystem::path& path);  // a split folder, or a checkpoint file
int print_versions();
int print_keys();

}  // namespace ringtrain::commands
