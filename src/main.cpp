// Owns the command line: parses it with CLI11 and dispatches to commands/. Every error ends here as a
// message naming what went wrong and how to fix it, with a distinct exit code (common/error.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sstream>

#include "commands/commands.h"
#include "common/error.h"

namespace {

std::vector<int> parse_shape(const std::string& text) {
  std::vector<int> dims;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    try {
      size_t used = 0;
      const int v = std::stoi(part, &used);
      if (used != part.size() || v < 1) throw std::invalid_argument(part);
      dims.push_back(v);
    } catch (const std::exception&) {
      throw ringtrain::UsageError(fmt::format("--shape '{}': expected C,H,W with positive integers, e.g. 3,224,224", text));
    }
  }
  if (dims.size() != 3) throw ringtrain::UsageError(fmt::format("--shape '{}': expected three numbers C,H,W", text));
  return dims;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringtrain;
  CLI::App app{"ringtrain: data-parallel training of neural networks over MPI ranks (one rank per GPU, or CPU)"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the versions of ringtrain and every library it uses");

  commands::TrainArgs train_args;
  auto* train = app.add_subcommand("train", "train the model of a job file (run under mpirun/srun for several ranks)");
  train->add_option("job", train_args.job, "job file (TOML), e.g. jobs/fashion_mnist.toml")->required();
  train->add_option("--set", train_args.overrides, "override a job-file key, e.g. --set train.epochs=3 (repeatable)");
  train->add_flag("--resume", train_args.resume,
                  "continue from the latest checkpoint in <run.dir>/checkpoints (any number of ranks)");

  auto* prepare = app.add_subcommand("prepare", "write a dataset as sharded HDF5 splits (train/ and test/)");
  prepare->require_subcommand(1);
  std::string source = "/usr/share/datasets/fashion-mnist", out;
  int shards = 8;
  bool overwrite = false;
  auto* fmnist = prepare->add_subcommand("fashion-mnist", "Fashion-MNIST from its IDX files (Debian: dataset-fashion-mnist)");
  fmnist->add_option("--source", source, "folder of the *-ubyte.gz files")->capture_default_str();
  fmnist->add_option("--out", out, "output folder")->required();
  fmnist->add_option("--shards", shards, "shards per split")->capture_default_str()->check(CLI::Range(1, 100000));
  fmnist->add_flag("--overwrite", overwrite, "replace existing shards");
  io::SyntheticOptions synthetic;
  std::string shape_text = "3,224,224";
  auto* synth = prepare->add_subcommand("synthetic", "learnable random images of any shape, for benchmarks");
  synth->add_option("--shape", shape_text, "C,H,W")->capture_default_str();
  synth->add_option("--classes", synthetic.num_classes, "classes")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  synth->add_option("--samples", synthetic.samples, "training samples")->capture_default_str()->check(CLI::PositiveNumber);
  synth->add_option("--test-samples", synthetic.test_samples, "test samples (default: samples/10)");
  synth->add_option("--shards", synthetic.shards, "shards per split")->capture_default_str()->check(CLI::Range(1, 100000));
  synth->add_option("--seed", synthetic.seed, "seed")->capture_default_str();
  synth->add_option("--out", out, "output folder")->required();
  synth->add_flag("--overwrite", overwrite, "replace existing shards");

  commands::ArraysArgs arrays;
  auto* arrays_command = prepare->add_subcommand("arrays", "uint8 image arrays with integer labels: .npy files or an HDF5 file");
  arrays_command->add_option("--images", arrays.images, "images .npy (uint8, N x C x H x W or N x H x W x C or N x H x W)");
  arrays_command->add_option("--labels", arrays.labels, "labels .npy (integers 0..K-1, N)");
  arrays_command->add_option("--test-images", arrays.test_images, "test images .npy (default: hold out --test-fraction)");
  arrays_command->add_option("--test-labels", arrays.test_labels, "test labels .npy");
  arrays_command->add_option("--from-hdf5", arrays.from_hdf5, "read images and labels from datasets of this HDF5 file");
  arrays_command->add_option("--images-dataset", arrays.images_dataset, "images dataset in --from-hdf5")->capture_default_str();
  arrays_command->add_option("--labels-dataset", arrays.labels_dataset, "labels dataset in --from-hdf5")->capture_default_str();
  arrays_command->add_option("--test-images-dataset", arrays.test_images_dataset, "test images dataset in --from-hdf5");
  arrays_command->add_option("--test-labels-dataset", arrays.test_labels_dataset, "test labels dataset in --from-hdf5");
  arrays_command->add_option("--layout", arrays.layout, "nchw or nhwc (rank-4 images)")->capture_default_str();
  arrays_command->add_option("--test-fraction", arrays.options.test_fraction, "held out per class, seeded")->capture_default_str();
  arrays_command->add_option("--seed", arrays.options.seed, "seed of the hold-out")->capture_default_str();
  arrays_command->add_option("--classes", arrays.options.num_classes, "classes (default: largest label + 1)");
  arrays_command->add_option("--class-names", arrays.class_names, "class names by index, comma-separated");
  arrays_command->add_option("--shards", arrays.options.shards, "shards per split")->capture_default_str()->check(CLI::Range(1, 100000));
  arrays_command->add_option("--out", arrays.options.out, "output folder")->required();
  arrays_command->add_flag("--overwrite", arrays.options.overwrite, "replace existing shards");

  io::ImagesOptions images;
  std::string size_text;
  auto* images_command = prepare->add_subcommand("images", "a folder of class subfolders of JPEG/PNG images");
  images_command->add_option("--source", images.source, "folder with one subfolder of images per class")->required();
  images_command->add_option("--test-source", images.test_source, "test images, same class folders (default: hold out --test-fraction)");
  images_command->add_option("--size", size_text, "H or H,W: shorter side resized to fit, then centre crop")->required();
  images_command->add_option("--channels", images.channels, "1 gray, 3 RGB, 4 RGBA")->capture_default_str();
  images_command->add_flag("--strict", images.strict, "stop at the first unreadable image instead of skipping it");
  images_command->add_option("--threads", images.threads, "decoding threads (default: every core)");
  images_command->add_option("--test-fraction", images.arrays.test_fraction, "held out per class, seeded")->capture_default_str();
  images_command->add_option("--seed", images.arrays.seed, "seed of the hold-out")->capture_default_str();
  images_command->add_option("--shards", images.arrays.shards, "shards per split")->capture_default_str()->check(CLI::Range(1, 100000));
  images_command->add_option("--out", images.arrays.out, "output folder")->required();
  images_command->add_flag("--overwrite", images.arrays.overwrite, "replace existing shards");

  std::string inspect_dir;
  auto* inspect = app.add_subcommand("inspect", "print and validate every shard of a split, or a checkpoint file");
  inspect->add_option("split", inspect_dir,
                      "split folder (e.g. data/fmnist/train), or a checkpoint (e.g. runs/x/checkpoints/ckpt-s000000468.h5)")
      ->required();
  app.add_subcommand("keys", "list every job-file key with its type, default and meaning");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : static_cast<int>(ExitCode::usage);
  }

  try {
    if (version) return commands::print_versions();
    if (*train) return commands::train(&argc, &argv, train_args);
    if (*fmnist) return commands::prepare_fashion_mnist(source, out, shards, overwrite);
    if (*synth) {
      const auto dims = parse_shape(shape_text);
      synthetic.shape = {dims[0], dims[1], dims[2]};
      synthetic.shards = std::max(1, synthetic.shards);
      return commands::prepare_synthetic(out, synthetic, overwrite);
    }
    if (*arrays_command) return commands::prepare_arrays(arrays);
    if (*images_command) return commands::prepare_images(images, size_text);
    if (*inspect) return commands::inspect(inspect_dir);
    if (app.got_subcommand("keys")) return commands::print_keys();
    fmt::print("{}", app.help());
    return static_cast<int>(ExitCode::usage);
  } catch (const Error& e) {
    fmt::print(stderr, "ringtrain: {} (exit {}):\n  {}\n", exit_code_name(e.code()), static_cast<int>(e.code()), e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringtrain: internal error (exit 1): {}\n", e.what());
    return static_cast<int>(ExitCode::internal);
  }
}
