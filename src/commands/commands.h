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
  std::string failed_node;   // --failed-node: an elastic launcher's account of the failure, for the record
  double seconds_lost = -1;  // --seconds-lost
};

int train(int* argc, char*** argv, const TrainArgs& args);  // initialises MPI; returns the exit code

struct EvaluateArgs {
  std::filesystem::path job;
  std::vector<std::string> overrides;
  std::filesystem::path checkpoint, data, out;  // empty: the newest checkpoint, data.test, no JSON
  std::string weights = "params";               // --weights: params | ema (the moving average)
};
int evaluate(int* argc, char*** argv, const EvaluateArgs& args);  // initialises MPI

struct PredictArgs {
  std::filesystem::path checkpoint;
  std::vector<std::filesystem::path> inputs;  // split folders, folders of images, image files
  std::filesystem::path data;  // images: a split of the training data; empty: the job's data.train
  int top = 5;
  bool logits = false;
  std::string device = "auto";
  std::string weights = "params";
  std::string precision;  // train.precision for the forward pass; empty: the checkpoint's job's
};
int predict(int* argc, char*** argv, const PredictArgs& args);  // initialises MPI (one rank)

struct ExportArgs {
  std::filesystem::path checkpoint, onnx;
  std::filesystem::path data;  // a split of the data the model was trained on; empty: the job's data.train
  std::string weights = "params";
};
int export_onnx(const ExportArgs& args);

// `import`: an ONNX classifier as a job file, a checkpoint and a split describing its input (docs/import.md).
struct ImportArgs {
  std::filesystem::path onnx, job, checkpoint;
  std::filesystem::path data;  // the input's description split; empty: beside the job file, "<job stem>-data"
  std::vector<int> shape;      // C, H, W; empty: the model's declared input
  std::filesystem::path class_names;  // a text file of the class names, one a line by index; empty: "class <i>"
  // The normalisation per channel on 0..1 pixels: torchvision's ImageNet mean and std unless given.
  std::vector<double> mean = {0.485, 0.456, 0.406}, stddev = {0.229, 0.224, 0.225};
  bool normalisation_given = false;  // --mean or --std on the command line
  // data.eval_resize of the job: above 0, predict on image files resizes their shorter side to it and crops the
  // centre (torchvision's evaluation transform at 256); 0: the shorter side scaled to the sample's size.
  int eval_resize = 0;
  bool eval_resize_given = false;  // --eval-resize on the command line (else a ringtrain export's own is taken)
};
int import_onnx(const ImportArgs& args);
int prepare_fashion_mnist(const std::filesystem::path& source, const std::filesystem::path& out, int shards, bool overwrite);
int prepare_synthetic(const std::filesystem::path& out, const io::SyntheticOptions& options, bool overwrite);

// `prepare arrays`: either .npy files (images, labels, optional test pair) or datasets of one HDF5 file.
struct ArraysArgs {
  std::string images, labels, test_images, test_labels;
  std::string from_hdf5, images_dataset = "images", labels_dataset = "labels";
  std::string test_images_dataset, test_labels_dataset;
  std::string layout, class_names;  // class_names: comma-separated
  io::ArraysOptions options;
};
int prepare_arrays(ArraysArgs args);

// `prepare images` on every rank of the job (each writes its shards); prints the summary. Initialises MPI.
// A round of shards takes a rank seconds to minutes, so the waits at its end are given far longer than training's
// steps before a rank that does not arrive ends the job.
inline constexpr double kPrepareCollectiveTimeoutS = 1800;
struct ImagesCommandText {
  std::string size;                                  // "H" (square) or "H,W"
  std::string store = "auto";                        // auto, raw or jpeg
  double collective_timeout_s = kPrepareCollectiveTimeoutS;  // <= 0: no limit
};
int prepare_images(int* argc, char*** argv, io::ImagesOptions options, const ImagesCommandText& text);
int inspect(const std::filesystem::path& path);  // a split folder, or a checkpoint file
// `input-bench`: the training input pipeline alone, timed. Initialises MPI.
struct InputBenchArgs {
  std::filesystem::path job;
  std::vector<std::string> overrides;
  int threads = 0;  // 0: data.loader_threads
  int batches = 50, warmup = 5;
};
int input_bench(int* argc, char*** argv, const InputBenchArgs& args);
int print_versions();
int print_keys(bool layers);  // the job keys, or the layer types and their keys

}  // namespace ringtrain::commands
