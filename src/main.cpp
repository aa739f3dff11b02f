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

// The commands that use a trained model: evaluate, predict, export.
struct UseCommands {
  CLI::App *evaluate = nullptr, *predict = nullptr, *export_onnx = nullptr;
  ringtrain::commands::EvaluateArgs evaluate_args;
  ringtrain::commands::PredictArgs predict_args;
  ringtrain::commands::ExportArgs export_args;
};

void add_use_commands(CLI::App& app, UseCommands& u) {
  u.evaluate = app.add_subcommand("evaluate", "evaluate a checkpoint on a split: loss, accuracy, top-5, per class, "
                                              "confusion matrix (run under mpirun/srun like training)");
  auto& e = u.evaluate_args;
  u.evaluate->add_option("job", e.job, "the job file the model was trained with")->required();
  u.evaluate->add_option("--set", e.overrides, "override a job-file key (repeatable)");
  u.evaluate->add_option("--checkpoint", e.checkpoint, "checkpoint file (default: the newest in <run.dir>/checkpoints)");
  u.evaluate->add_option("--data", e.data, "split folder to evaluate (default: the job's data.test)");
  u.evaluate->add_option("--out", e.out, "write the results as JSON to this file");
  u.predict = app.add_subcommand("predict", "top-k classes of every sample of split folders, as JSON lines on stdout");
  auto& p = u.predict_args;
  u.predict->add_option("--checkpoint", p.checkpoint, "checkpoint file (its job is inside it)")->required();
  u.predict->add_option("inputs", p.inputs, "split folders, e.g. data/fmnist/test")->required();
  u.predict->add_option("--top", p.top, "classes per sample")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  u.predict->add_flag("--logits", p.logits, "also print each sample's logits");
  u.predict->add_option("--device", p.device, "auto | cpu | cuda")->capture_default_str();
  u.export_onnx = app.add_subcommand("export", "write a checkpoint's model in inference form as an ONNX file");
  auto& x = u.export_args;
  u.export_onnx->add_option("--checkpoint", x.checkpoint, "checkpoint file (its job is inside it)")->required();
  u.export_onnx->add_option("--onnx", x.onnx, "the ONNX file to write")->required();
  u.export_onnx->add_option("--data", x.data, "a split of the training data (default: the job's data.train): "
                                              "sample shape and normalisation");
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

  std::string inspect_dir;
  auto* inspect = app.add_subcommand("inspect", "print and validate every shard of a split, or a checkpoint file");
  inspect->add_option("split", inspect_dir,
                      "split folder (e.g. data/fmnist/train), or a checkpoint (e.g. runs/x/checkpoints/ckpt-s000000468.h5)")
      ->required();
  app.add_subcommand("keys", "list every job-file key with its type, default and meaning");
  UseCommands use;
  add_use_commands(app, use);

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
    if (*inspect) return commands::inspect(inspect_dir);
    if (*use.evaluate) return commands::evaluate(&argc, &argv, use.evaluate_args);
    if (*use.predict) return commands::predict(&argc, &argv, use.predict_args);
    if (*use.export_onnx) return commands::export_onnx(use.export_args);
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
