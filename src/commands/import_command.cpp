// Owns `ringtrain import`: an ONNX image classifier as a job file, a checkpoint of its weights and a split of no
// samples that describes its input (sample shape, classes, the normalisation), so predict, evaluate and export
// take it as a model ringtrain trained. The graph is mapped by the import pass (model/onnx_import.h); the
// network is built from the layers on the CPU (one sample) to check that they take the input and give one logit a
// class, and that every weight tensor has the size its layer takes, before anything is written. The checkpoint is
// written atomically, the job file under a temporary name renamed last, so a refusal leaves neither behind.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "commands/commands.h"
#include "common/error.h"
#include "config/job_config.h"
#include "config/layers_toml.h"
#include "io/checkpoint_file.h"
#include "io/dataset_meta.h"
#include "io/onnx_model.h"
#include "io/shard_writer.h"
#include "model/network.h"
#include "model/onnx_import.h"
#include "util/versions.h"

namespace ringtrain::commands {
namespace {

namespace fs = std::filesystem;

// The sample shape: --shape, else the model's declared input.
io::SampleShape sample_shape(const model::ImportedModel& m, const std::vector<int>& shape) {
  if (!shape.empty()) return {shape[0], shape[1], shape[2]};
  const auto& d = m.input_dims;
  if (d.size() != 4 || d[1] < 1 || d[2] < 1 || d[3] < 1)
    throw UsageError(fmt::format("the ONNX model's input '{}' has no fixed C x H x W (its dimensions: [{}]); give "
                                 "the image size with --shape C,H,W, e.g. --shape 3,224,224",
                                 m.input, fmt::join(d, ", ")));
  return {static_cast<int>(d[1]), static_cast<int>(d[2]), static_cast<int>(d[3])};
}

// Classes: the units of the last layer, a dense one (the classifier's Gemm).
int class_count(const model::ImportedModel& m) {
  if (m.layers.empty() || !m.layers.back().is("dense"))
    throw JobFileError(fmt::format("the ONNX graph does not end in a Gemm (its last layer is {}); import maps a "
                                   "classifier whose output is its final Gemm's logits",
                                   m.layers.empty() ? "none" : m.layers.back().where));
  return m.layers.back().integer("units");
}

// Refuses a weight tensor whose size is not what its layer takes (a convolution's input channels that the
// graph's previous layer does not give).
void refuse_misfit_weights(const model::ImportedModel& m, const model::Network& net, const io::SampleShape& shape) {
  const auto& tensors = net.param_tensors();
  for (size_t i = 0; i < std::min(tensors.size(), m.tensor_sizes.size()); ++i)
    if (tensors[i].count != m.tensor_sizes[i])
      throw JobFileError(fmt::format("{}: its tensor '{}' holds {} values, but on {}x{}x{} images (the model's "
                                     "declared input, or --shape) the layer takes {}",
                                     m.tensor_sources[i], tensors[i].name, m.tensor_sizes[i], shape.channels,
                                     shape.height, shape.width, tensors[i].count));
  if (tensors.size() != m.tensor_sizes.size() || net.state_count() != static_cast<int64_t>(m.states.size()))
    throw Error(ExitCode::internal, fmt::format("import: {} weight tensors and {} statistics for a network of {} and {}",
                                                m.tensor_sizes.size(), m.states.size(), tensors.size(),
                                                net.state_count()));
}

std::string job_text(const ImportArgs& a, const io::OnnxModel& onnx, const model::ImportedModel& m,
                     const io::DatasetMeta& meta, const fs::path& data) {
  const std::string split = config::toml_string(fs::absolute(data).string());
  return fmt::format(
      "# Made by `ringtrain import` from {} ({}, opset {}): {} classes of {}x{}x{} images.\n"
      "# data.train and data.test name a split of no samples that holds what predict and export read: the sample\n"
      "# shape, the classes and the normalisation (per channel mean and std, 0..255 units). Point them (or --data) at\n"
      "# real splits of this shape to evaluate or train.\n"
      "[data]\ntrain = {}\ntest = {}\n\n[train]\nepochs = 1\nbatch_per_rank = 16\n\n"
      "[optimizer]\nbase_lr = 0.01\nbase_batch = 16\n\n[run]\ndir = {}\n\n[model]\nname = {}\n{}",
      a.onnx.string(), onnx.producer.empty() ? "no producer named" : onnx.producer, onnx.opset, meta.num_classes,
      meta.shape.channels, meta.shape.height, meta.shape.width, split, split,
      config::toml_string("runs/" + a.job.stem().string()), config::toml_string(a.onnx.stem().string()),
      config::layers_toml(m.layers));
}

// Per channel, in 0..255 units as shards keep them, from the 0..1 units torchvision's are given in.
std::vector<float> in_pixel_units(const std::vector<float>& values, int channels, const char* option) {
  if (static_cast<int>(values.size()) != channels)
    throw UsageError(fmt::format("{} has {} values for the model's {} input channels; give one a channel", option,
                                 values.size(), channels));
  std::vector<float> scaled;
  for (const float v : values) scaled.push_back(v * 255.0f);
  return scaled;
}

// One name a line, as many as the model has classes.
std::vector<std::string> class_names(const fs::path& file, int classes) {
  if (file.empty()) return {};
  std::ifstream in(file);
  if (!in) throw UsageError(fmt::format("--class-names '{}' cannot be read", file.string()));
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    names.push_back(line);
  }
  while (!names.empty() && names.back().empty()) names.pop_back();
  if (static_cast<int>(names.size()) != classes)
    throw UsageError(fmt::format("--class-names '{}' names {} classes, the model has {}; give one name a line",
                                 file.string(), names.size(), classes));
  return names;
}

// The folder is import's own: one that holds samples (a real split) is never overwritten.
void refuse_real_split(const fs::path& data) {
  std::error_code error;
  if (!fs::is_directory(data, error)) return;
  try {
    if (io::open_split(data).total_samples() == 0) return;
  } catch (const DataError&) {
    return;  // no split there, or a broken one: write_description_split replaces its shards
  }
  throw UsageError(fmt::format("--data '{}' holds a split with samples; import writes a split of none there, so "
                               "point --data at another folder",
                               data.string()));
}

io::CheckpointData checkpoint_of(const model::ImportedModel& m, const model::Network& net, const config::JobConfig& job) {
  io::CheckpointData d;
  d.ranks = 1;
  d.global_batch = job.train.batch_per_rank;
  for (const auto& t : net.param_tensors()) d.tensor_names.push_back(t.name), d.tensor_sizes.push_back(t.count);
  d.params = m.params;
  d.states = m.states;
  d.state_count = static_cast<int64_t>(m.states.size());
  d.run_id = "import";
  d.job_toml = job.resolved_toml;
  d.versions_json = util::versions_json(util::host_library_versions());
  return d;
}

void write_job(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw JobFileError(fmt::format("cannot write the job file '{}'", tmp.string()));
  }
  fs::rename(tmp, path);
}

}  // namespace

int import_onnx(const ImportArgs& args) {
  const io::OnnxModel onnx = io::read_onnx(args.onnx);
  const model::ImportedModel imported = model::import_onnx(onnx);
  io::DatasetMeta meta;
  meta.shape = sample_shape(imported, args.shape);
  meta.num_classes = class_count(imported);
  meta.mean = in_pixel_units(args.mean, meta.shape.channels, "--mean");
  meta.stddev = in_pixel_units(args.stddev, meta.shape.channels, "--std");
  meta.class_names = class_names(args.class_names, meta.num_classes);
  meta.provenance = fmt::format("ringtrain import of {}: no samples, only the description of the model's input",
                                args.onnx.string());
  backend::CpuBackend cpu(1);
  const model::Network net(imported.layers, cpu, {1, meta.shape.channels, meta.shape.height, meta.shape.width},
                           meta.num_classes);
  refuse_misfit_weights(imported, net, meta.shape);

  const fs::path data = args.data.empty() ? fs::path(fs::path(args.job).replace_extension("").string() + "-data") : args.data;
  const std::string text = job_text(args, onnx, imported, meta, data);
  const config::JobConfig job = config::parse_job(text, args.job, {});
  if (config::layers_toml(job.model.layers) != config::layers_toml(imported.layers))
    throw Error(ExitCode::internal, "import: the job file's layers read back differently from the imported ones");
  refuse_real_split(data);

  io::write_description_split(data, meta, true);
  io::write_checkpoint(args.checkpoint, checkpoint_of(imported, net, job));
  try {
    write_job(args.job, text);
  } catch (...) {
    std::error_code ignored;
    fs::remove(args.checkpoint, ignored);
    throw;
  }
  fmt::print("imported {} ({} layers, {} parameters, {} classes, input {}x{}x{}): job {}, checkpoint {}, input "
             "description {}\n",
             args.onnx.string(), imported.layers.size(), imported.params.size(), meta.num_classes, meta.shape.channels,
             meta.shape.height, meta.shape.width, args.job.string(), args.checkpoint.string(), data.string());
  return 0;
}

}  // namespace ringtrain::commands
