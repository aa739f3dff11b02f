// Owns the command line: parses it with CLI11 and dispatches to commands/. Every error ends here as a
// message naming what went wrong and how to fix it, with a distinct exit code (common/error.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sstream>

#include "commands/commands.h"
#include "commands/results_on_stdout.h"
#include "common/error.h"
#include "common/stderr_print.h"
#include "util/blas_restart.h"

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

// `prepare`: datasets into shards.
struct PrepareCommands {
  CLI::App *fmnist = nullptr, *synth = nullptr, *arrays_command = nullptr, *images_command = nullptr;
  std::string source = "/usr/share/datasets/fashion-mnist", out;
  int shards = 8;
  bool overwrite = false;
  ringtrain::io::SyntheticOptions synthetic;
  std::string shape_text = "3,224,224";
  ringtrain::commands::ArraysArgs arrays;
  ringtrain::io::ImagesOptions images;
  std::string size_text, store_text = "auto";
  double images_timeout_s = ringtrain::commands::kPrepareCollectiveTimeoutS;
};

void add_prepare_commands(CLI::App& app, PrepareCommands& p) {
  auto* prepare = app.add_subcommand("prepare", "write a dataset as sharded HDF5 splits (train/ and test/)");
  prepare->require_subcommand(1);
  p.fmnist = prepare->add_subcommand("fashion-mnist", "Fashion-MNIST from its IDX files (Debian: dataset-fashion-mnist)");
  p.fmnist->add_option("--source", p.source, "folder of the *-ubyte.gz files")->capture_default_str();
  p.fmnist->add_option("--out", p.out, "output folder")->required();
  p.fmnist->add_option("--shards", p.shards, "shards per split")->capture_default_str()->check(CLI::Range(1, 100000));
  p.fmnist->add_flag("--overwrite", p.overwrite, "replace existing shards");
  p.synth = prepare->add_subcommand("synthetic", "learnable random images of any shape, for benchmarks");
  p.synth->add_option("--shape", p.shape_text, "C,H,W")->capture_default_str();
  p.synth->add_option("--classes", p.synthetic.num_classes, "classes")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  p.synth->add_option("--samples", p.synthetic.samples, "training samples")->capture_default_str()->check(CLI::Range(int64_t{1}, INT64_MAX));
  p.synth->add_option("--test-samples", p.synthetic.test_samples, "test samples (default: samples/10)");
  p.synth->add_option("--shards", p.synthetic.shards, "shards per split")->capture_default_str()->check(CLI::Range(1, 100000));
  p.synth->add_option("--seed", p.synthetic.seed, "seed")->capture_default_str();
  p.synth->add_option("--out", p.out, "output folder")->required();
  p.synth->add_flag("--overwrite", p.overwrite, "replace existing shards");

  p.arrays_command = prepare->add_subcommand("arrays", "uint8 image arrays with integer labels: .npy files or an HDF5 file");
  p.arrays_command->add_option("--images", p.arrays.images, "images .npy (uint8, N x C x H x W or N x H x W x C or N x H x W)");
  p.arrays_command->add_option("--labels", p.arrays.labels, "labels .npy (integers 0..K-1, N)");
  p.arrays_command->add_option("--test-images", p.arrays.test_images, "test images .npy (default: hold out --test-fraction)");
  p.arrays_command->add_option("--test-labels", p.arrays.test_labels, "test labels .npy");
  p.arrays_command->add_option("--from-hdf5", p.arrays.from_hdf5, "read images and labels from datasets of this HDF5 file");
  p.arrays_command->add_option("--images-dataset", p.arrays.images_dataset, "images dataset in --from-hdf5")->capture_default_str();
  p.arrays_command->add_option("--labels-dataset", p.arrays.labels_dataset, "labels dataset in --from-hdf5")->capture_default_str();
  p.arrays_command->add_option("--test-images-dataset", p.arrays.test_images_dataset, "test images dataset in --from-hdf5");
  p.arrays_command->add_option("--test-labels-dataset", p.arrays.test_labels_dataset, "test labels dataset in --from-hdf5");
  p.arrays_command->add_option("--layout", p.arrays.layout,
                               "nchw or nhwc (rank-4 images; without it nchw, except that an array whose last axis "
                               "looks like colour channels (1, 3 or 4) and whose second does not is refused)");
  p.arrays_command->add_option("--test-fraction", p.arrays.options.test_fraction, "held out per class, seeded")->capture_default_str();
  p.arrays_command->add_option("--seed", p.arrays.options.seed, "seed of the hold-out")->capture_default_str();
  p.arrays_command->add_option("--classes", p.arrays.options.num_classes, "classes (default: largest label + 1)")
      ->check(CLI::Range(1, 1 << 24));
  p.arrays_command->add_option("--class-names", p.arrays.class_names, "class names by index, comma-separated");
  p.arrays_command->add_option("--shards", p.arrays.options.shards, "shards per split")->capture_default_str()->check(CLI::Range(1, 100000));
  p.arrays_command->add_option("--out", p.arrays.options.out, "output folder")->required();
  p.arrays_command->add_flag("--overwrite", p.arrays.options.overwrite, "replace existing shards");

  p.images_command = prepare->add_subcommand("images", "a folder of class subfolders of JPEG/PNG images");
  p.images_command->add_option("--source", p.images.source, "folder with one subfolder of images per class")->required();
  p.images_command->add_option("--test-source", p.images.test_source, "test images, same class folders (default: hold out --test-fraction)");
  p.images_command->add_option("--size", p.size_text, "H or H,W: the sample size (raw: shorter side resized to fit, then centre crop; jpeg: what the training crop "
                                "and the evaluation crop become)")->required();
  p.images_command->add_option("--channels", p.images.channels, "1 gray, 3 RGB, 4 RGBA")->capture_default_str();
  p.images_command->add_flag("--strict", p.images.strict, "stop at the first unreadable image instead of skipping it");
  p.images_command->add_option("--threads", p.images.threads, "decoding threads per rank (default: the cores the rank is bound to, split among the node's ranks bound alike)");
  p.images_command->add_option("--test-fraction", p.images.arrays.test_fraction, "held out per class, seeded")->capture_default_str();
  p.images_command->add_option("--seed", p.images.arrays.seed, "seed of the training order and the hold-out")->capture_default_str();
  p.images_command->add_option("--shards", p.images.arrays.shards, "shards per split")->capture_default_str()->check(CLI::Range(1, 100000));
  p.images_command->add_option("--out", p.images.arrays.out, "output folder")->required();
  p.images_command->add_flag("--overwrite", p.images.arrays.overwrite, "replace existing shards");
  p.images_command->add_option("--store", p.store_text,
                               "raw (decoded at --size), jpeg (each image's JPEG bytes, cropped when read) or auto "
                               "(jpeg when the photos are larger than --size)")
      ->capture_default_str();
  p.images_command->add_option("--max-side", p.images.max_side,
                               "jpeg: shrink photos whose shorter side is over this and re-encode them (0: keep every "
                               "JPEG as it is)")
      ->capture_default_str();
  p.images_command->add_option("--quality", p.images.quality, "jpeg: quality of re-encoded images (PNG sources, shrunk "
                                                              "photos)")
      ->capture_default_str();
  p.images_command->add_option("--collective-timeout", p.images_timeout_s,
                               "seconds a rank waits for the others at a shard round's end before it ends the job "
                               "naming the ranks missing (a stalled or dead rank); 0: no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  p.images_command->add_flag("--keep-jpeg-bytes", p.images.keep_jpeg_bytes,
                             "jpeg: store each kept JPEG byte for byte; by default it is rewritten losslessly (the same "
                             "pixels; metadata dropped) with restart markers, so training decodes only the blocks its "
                             "crop covers");
}

// The prepare command chosen, run; -1 when none was.
int run_prepare(PrepareCommands& p) {
  namespace commands = ringtrain::commands;
  if (*p.fmnist) return commands::prepare_fashion_mnist(p.source, p.out, p.shards, p.overwrite);
  if (*p.synth) {
    const auto dims = parse_shape(p.shape_text);
    p.synthetic.shape = {dims[0], dims[1], dims[2]};
    p.synthetic.shards = std::max(1, p.synthetic.shards);
    return commands::prepare_synthetic(p.out, p.synthetic, p.overwrite);
  }
  if (*p.arrays_command) return commands::prepare_arrays(p.arrays);
  return -1;
}

// The commands that use a trained model: evaluate, predict, export, and import, which makes one of an ONNX file.
struct UseCommands {
  CLI::App *evaluate = nullptr, *predict = nullptr, *export_onnx = nullptr, *import_onnx = nullptr;
  ringtrain::commands::EvaluateArgs evaluate_args;
  ringtrain::commands::PredictArgs predict_args;
  ringtrain::commands::ExportArgs export_args;
  ringtrain::commands::ImportArgs import_args;
  std::string shape_text;
};

// --weights, alike on evaluate, predict and export.
void add_weights_option(CLI::App* command, std::string& weights) {
  command->add_option("--weights", weights, "params | ema: the moving average of the weights train.ema_decay kept "
                                            "(the checkpoint must hold one)")
      ->capture_default_str()
      ->check(CLI::IsMember({"params", "ema"}));
}

void add_use_commands(CLI::App& app, UseCommands& u) {
  u.evaluate = app.add_subcommand("evaluate", "evaluate a checkpoint on a split: loss, accuracy, top-5, per class, "
                                              "confusion matrix (run under mpirun/srun like training)");
  auto& e = u.evaluate_args;
  u.evaluate->add_option("job", e.job, "the job file the model was trained with")->required();
  u.evaluate->add_option("--set", e.overrides, "override a job-file key (repeatable)");
  u.evaluate->add_option("--checkpoint", e.checkpoint, "checkpoint file (default: the newest in <run.dir>/checkpoints)");
  u.evaluate->add_option("--data", e.data, "split folder to evaluate (default: the job's data.test)");
  u.evaluate->add_option("--out", e.out, "write the results as JSON to this file");
  add_weights_option(u.evaluate, e.weights);
  u.predict = app.add_subcommand("predict", "top-k classes of every sample of split folders, folders of images or "
                                            "image files, as JSON lines on stdout");
  auto& p = u.predict_args;
  u.predict->add_option("--checkpoint", p.checkpoint, "checkpoint file (its job is inside it)")->required();
  u.predict->add_option("inputs", p.inputs, "split folders (data/fmnist/test), folders of JPEG/PNG images, image files")
      ->required();
  u.predict->add_option("--data", p.data, "for images: a split of the training data (default: the job's data.train): "
                                          "sample shape and normalisation");
  u.predict->add_option("--top", p.top, "classes per sample")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  u.predict->add_flag("--logits", p.logits, "also print each sample's logits");
  u.predict->add_option("--device", p.device, "auto | cpu | cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  u.predict->add_option("--precision", p.precision,
                        "fp32 | tf32 | bf16 | fp16: the arithmetic of the forward pass (default: the checkpoint's "
                        "train.precision; tf32 runs as fp32 on the CPU)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  add_weights_option(u.predict, p.weights);
  u.export_onnx = app.add_subcommand("export", "write a checkpoint's model in inference form as an ONNX file");
  auto& x = u.export_args;
  u.export_onnx->add_option("--checkpoint", x.checkpoint, "checkpoint file (its job is inside it)")->required();
  u.export_onnx->add_option("--onnx", x.onnx, "the ONNX file to write")->required();
  u.export_onnx->add_option("--data", x.data, "a split of the training data (default: the job's data.train): "
                                              "sample shape and normalisation");
  add_weights_option(u.export_onnx, x.weights);
  u.import_onnx = app.add_subcommand("import", "turn an ONNX image classifier into a job file and a checkpoint that "
                                               "predict, evaluate and export take (docs/import.md)");
  auto& i = u.import_args;
  u.import_onnx->add_option("--onnx", i.onnx, "the ONNX model to import")->required();
  u.import_onnx->add_option("--out", i.job, "the job file to write")->required();
  u.import_onnx->add_option("--checkpoint", i.checkpoint, "the checkpoint to write")->required();
  u.import_onnx->add_option("--data", i.data, "folder for the split that describes the model's input (default: "
                                              "beside the job file, <job stem>-data)");
  u.import_onnx->add_option("--shape", u.shape_text, "C,H,W of the images (default: the model's declared input)");
  u.import_onnx->add_option("--class-names", i.class_names, "text file of the class names, one a line in class order");
  u.import_onnx->add_option("--mean", i.mean, "per channel mean of 0..1 pixels, comma-separated (not for a graph "
                                              "that normalises its input itself, as ringtrain's export does)")
      ->delimiter(',')
      ->capture_default_str();
  u.import_onnx->add_option("--std", i.stddev, "per channel standard deviation of 0..1 pixels, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  u.import_onnx->add_option("--eval-resize", i.eval_resize, "predict on image files: resize the shorter side to this, "
                                                            "then crop the centre (256: torchvision's evaluation "
                                                            "transform for 224); 0: scale it to the sample's side "
                                                            "(default: a ringtrain export's own, else 0)")
      ->check(CLI::Range(0, 65536));
}

CLI::App* add_train_command(CLI::App& app, ringtrain::commands::TrainArgs& a) {
  auto* train = app.add_subcommand("train", "train the model of a job file (run under mpirun/srun for several ranks)");
  train->add_option("job", a.job, "job file (TOML), e.g. jobs/fashion_mnist.toml")->required();
  train->add_option("--set", a.overrides, "override a job-file key, e.g. --set train.epochs=3 (repeatable)");
  train->add_flag("--resume", a.resume, "continue from the latest checkpoint in <run.dir>/checkpoints (any number of ranks)");
  train->add_option("--failed-node", a.failed_node,
                    "from an elastic launcher (with --resume, or on a restart from the start): the node whose failure "
                    "shrank the world; written to metrics.jsonl's membership record (docs/faults.md)");
  train->add_option("--seconds-lost", a.seconds_lost,
                    "with --resume, from an elastic launcher: wall seconds from the checkpoint to this relaunch")
      ->check(CLI::NonNegativeNumber);
  return train;
}

CLI::App* add_input_bench_command(CLI::App& app, ringtrain::commands::InputBenchArgs& a) {
  auto* bench = app.add_subcommand("input-bench", "time a job's training input pipeline alone (read, decode, "
                                                  "augment, to uint8 batches) and print one JSON line");
  bench->add_option("job", a.job, "job file (TOML)")->required();
  bench->add_option("--set", a.overrides, "override a job-file key (repeatable)");
  bench->add_option("--threads", a.threads, "loader threads per rank (default: data.loader_threads)");
  bench->add_option("--batches", a.batches, "batches timed")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  bench->add_option("--warmup", a.warmup, "batches made before the clock starts")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  return bench;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringtrain;
  util::restart_with_cpu_blas_kernels(argv);
  CLI::App app{"ringtrain: data-parallel training of neural networks over MPI ranks (one rank per GPU, or CPU)"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the versions of ringtrain and every library it uses");

  commands::TrainArgs train_args;
  CLI::App* train = add_train_command(app, train_args);
  PrepareCommands prep;
  add_prepare_commands(app, prep);
  commands::InputBenchArgs bench_args;
  CLI::App* input_bench = add_input_bench_command(app, bench_args);

  std::string inspect_dir;
  auto* inspect = app.add_subcommand("inspect", "print and validate every shard of a split, or a checkpoint file");
  inspect->add_option("split", inspect_dir,
                      "split folder (e.g. data/fmnist/train), or a checkpoint (e.g. runs/x/checkpoints/ckpt-s000000468.h5)")
      ->required();
  bool layer_keys = false;
  app.add_subcommand("keys", "list every job-file key with its type, default and meaning")
      ->add_flag("--layers", layer_keys, "list the layer types of [[model.layers]] and their keys instead");
  UseCommands use;
  add_use_commands(app, use);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : static_cast<int>(ExitCode::usage);
  }

  try {
    // train, evaluate and predict check stdout on their ranks (so that one rank's failure ends the job).
    if (*train) return commands::train(&argc, &argv, train_args);
    if (*use.evaluate) return commands::evaluate(&argc, &argv, use.evaluate_args);
    if (*use.predict) return commands::predict(&argc, &argv, use.predict_args);
    if (*input_bench) return commands::input_bench(&argc, &argv, bench_args);
    const auto checked = commands::with_results_on_stdout;
    if (version) return checked([] { return commands::print_versions(); });
    if (*prep.images_command)
      return commands::prepare_images(&argc, &argv, prep.images, {prep.size_text, prep.store_text,
                                                                  prep.images_timeout_s});
    if (*prep.fmnist || *prep.synth || *prep.arrays_command)
      return checked([&] { return run_prepare(prep); });
    if (*inspect) return checked([&] { return commands::inspect(inspect_dir); });
    if (*use.export_onnx) return checked([&] { return commands::export_onnx(use.export_args); });
    if (*use.import_onnx) return checked([&] {
      if (!use.shape_text.empty()) use.import_args.shape = parse_shape(use.shape_text);
      use.import_args.normalisation_given = use.import_onnx->count("--mean") + use.import_onnx->count("--std") > 0;
      use.import_args.eval_resize_given = use.import_onnx->count("--eval-resize") > 0;
      return commands::import_onnx(use.import_args);
    });
    if (app.got_subcommand("keys")) return checked([&] { return commands::print_keys(layer_keys); });
    fmt::print("{}", app.help());
    return static_cast<int>(ExitCode::usage);
  } catch (const Error& e) {
    stderr_print("ringtrain: {} (exit {}):\n  {}\n", exit_code_name(e.code()), static_cast<int>(e.code()), e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    stderr_print("ringtrain: internal error (exit 1): {}\n", e.what());
    return static_cast<int>(ExitCode::internal);
  }
}
