// Owns `ringtrain import`: an ONNX image classifier as a job file, a checkpoint of its weights and a split of no
// samples that describes its input (sample shape, classes, the normalisation), so predict, evaluate and export
// take it as a model ringtrain trained. The graph's ends are read first (model/onnx_graph_ends.h: a ringtrain
// export's own normalisation and probabilities), then its layers are mapped by the import pass (model/onnx_import.h); the
// network is built from the layers on the CPU (one sample) to check that they take the input and give one logit a
// class, and that every weight tensor has the size its layer takes, before anything is written. Every output is
// checked first (not an input, not a folder), the job file and the checkpoint are written under temporary names and
// renamed last, and a failure removes only what this run made, so a refusal leaves nothing and loses nothing.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "commands/commands.h"
#include "commands/one_process.h"
#include "common/error.h"
#include "common/stderr_print.h"
#include "config/job_config.h"
#include "config/layers_toml.h"
#include "io/checkpoint_file.h"
#include "io/dataset_meta.h"
#include "io/onnx_model.h"
#include "io/output_paths.h"
#include "io/shard_header.h"
#include "io/shard_writer.h"
#include "io/whole_file.h"
#include "model/network.h"
#include "model/onnx_graph_ends.h"
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
                     const io::DatasetMeta& meta, int eval_resize, const fs::path& data) {
  const std::string split = config::toml_string(fs::absolute(data).string());
  return fmt::format(
      "# Made by `ringtrain import` from {} ({}, opset {}): {} classes of {}x{}x{} images.\n"
      "# data.train and data.test name a split of no samples that holds what predict and export read: the sample\n"
      "# shape, the classes and the normalisation (per channel mean and std, 0..255 units). Point them (or --data) at\n"
      "# real splits of this shape to evaluate or train. mean and std are the model's: every split it evaluates, predicts\n"
      "# or fine-tunes on is normalised with them, not with the split's own statistics. eval_resize (import\n"
      "# --eval-resize, or a ringtrain export's own): above 0, predict on image files resizes their shorter side to\n"
      "# it, then crops the centre.\n"
      "[data]\ntrain = {}\ntest = {}\nmean = [{}]\nstd = [{}]\neval_resize = {}\n\n[train]\nepochs = 1\n"
      "batch_per_rank = 16\n\n"
      "[optimizer]\nbase_lr = 0.01\nbase_batch = 16\n\n[run]\ndir = {}\n\n[model]\nname = {}\n{}",
      a.onnx.string(), onnx.producer.empty() ? "no producer named" : onnx.producer, onnx.opset, meta.num_classes,
      meta.shape.channels, meta.shape.height, meta.shape.width, split, split, fmt::join(meta.mean, ", "),
      fmt::join(meta.stddev, ", "), eval_resize,
      config::toml_string("runs/" + a.job.stem().string()), config::toml_string(a.onnx.stem().string()),
      config::layers_toml(m.layers));
}

// Per channel, in 0..255 units as shards keep them, from the 0..1 units torchvision's are given in (worked out in
// double, so 0.224 gives the float nearest 57.12, which the job file then reads as 57.12).
std::vector<float> in_pixel_units(const std::vector<double>& values, int channels, const char* option, bool divisor) {
  if (static_cast<int>(values.size()) != channels)
    throw UsageError(fmt::format("{} has {} values for the model's {} input channels; give one a channel", option,
                                 values.size(), channels));
  std::vector<float> scaled;
  for (const double v : values) {
    if (!std::isfinite(v) || (divisor && v <= 0))
      throw UsageError(fmt::format("{} {}: each value must be a finite number{} (0..1 units, as torchvision's, e.g. "
                                   "{})",
                                   option, v, divisor ? " above 0" : "",
                                   divisor ? "0.229,0.224,0.225" : "0.485,0.456,0.406"));
    scaled.push_back(static_cast<float>(v * 255.0));
  }
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

// data.eval_resize of the job: --eval-resize where given; else the evaluation resize of photos a ringtrain export
// keeps in its metadata ("eval_resize": the shorter side its model's evaluation resizes photos to before the centre
// crop, 0 where it scales them to the sample), so predict on image files crops them as the exported model did; a
// value that cannot be one (not a whole number, or below the samples' side) is set aside with a note saying why.
int job_eval_resize(const ImportArgs& args, const io::OnnxModel& onnx, const io::SampleShape& shape) {
  const int side = std::max(shape.height, shape.width);
  if (args.eval_resize_given) {
    if (args.eval_resize > 0 && args.eval_resize < side)
      throw UsageError(fmt::format("--eval-resize {} is smaller than the samples' side {}: predict resizes an image's "
                                   "shorter side to it and then crops the centre {}x{}, which must fit; give at least "
                                   "{} (256 for 224, torchvision's), or 0",
                                   args.eval_resize, side, shape.height, shape.width, side));
    return args.eval_resize;
  }
  const std::string* value = onnx.written_by_ringtrain() ? onnx.metadata_value("eval_resize") : nullptr;
  if (!value) return 0;
  const nlohmann::json resize = nlohmann::json::parse(*value, nullptr, false);
  if (resize.is_number_integer() &&
      (resize.get<int64_t>() == 0 || (resize.get<int64_t>() >= side && resize.get<int64_t>() <= 65536)))
    return resize.get<int>();
  stderr_print("ringtrain import: the eval_resize '{}' in the metadata of '{}' is not used (it is no 0 or whole "
               "number of at least the samples' side {}); image files are scaled to the sample unless "
               "--eval-resize gives the shorter side to resize them to\n",
               *value, args.onnx.string(), side);
  return 0;
}

// The normalisation: the graph's own where it applies one (ringtrain's export, on 0..255 pixels as shards keep
// them), else --mean and --std (torchvision's ImageNet ones unless given).
void set_normalisation(const ImportArgs& args, const std::optional<model::InputNormalisation>& in_graph,
                       io::DatasetMeta& meta) {
  if (!in_graph) {
    meta.mean = in_pixel_units(args.mean, meta.shape.channels, "--mean", false);
    meta.stddev = in_pixel_units(args.stddev, meta.shape.channels, "--std", true);
    return;
  }
  if (args.normalisation_given)
    throw UsageError(fmt::format("'{}' normalises its input itself (a ringtrain export: mean [{}], std [{}] on 0..255 "
                                 "pixels), which import takes as the model's normalisation; leave out --mean and --std",
                                 args.onnx.string(), fmt::join(in_graph->mean, ", "), fmt::join(in_graph->stddev, ", ")));
  if (static_cast<int>(in_graph->mean.size()) != meta.shape.channels) {
    const std::string why = fmt::format("'{}' normalises images of {} channels, but {} gives {}", args.onnx.string(),
                                        in_graph->mean.size(), args.shape.empty() ? "its declared input" : "--shape",
                                        meta.shape.channels);
    if (args.shape.empty()) throw JobFileError(why);
    throw UsageError(why + fmt::format("; give --shape {},H,W", in_graph->mean.size()));
  }
  meta.mean = in_graph->mean;
  meta.stddev = in_graph->stddev;
}

// Why a metadata list of class names cannot name these classes ("" where it can): a shard keeps one name a line.
std::string unusable_names(const nlohmann::json& names, int classes) {
  if (!names.is_array()) return "it is no JSON list";
  if (static_cast<int>(names.size()) != classes)
    return fmt::format("it names {} classes, the model has {}", names.size(), classes);
  for (const nlohmann::json& n : names) {
    if (!n.is_string()) return fmt::format("{} is no text", n.dump());
    if (n.get<std::string>().find_first_of("\r\n") != std::string::npos)
      return fmt::format("{} holds a line break", n.dump());
  }
  return "";
}

// The class names an export keeps in its metadata ("class_names", a JSON list, as ringtrain's export writes it),
// where they name the classes; else none ("class 0", "class 1", ... then), with a note saying why.
std::vector<std::string> names_in_metadata(const io::OnnxModel& onnx, const fs::path& file, int classes) {
  const std::string* value = onnx.metadata_value("class_names");
  if (!value) return {};
  const nlohmann::json names = nlohmann::json::parse(*value, nullptr, false);
  if (const std::string why = unusable_names(names, classes); !why.empty()) {
    stderr_print("ringtrain import: the class names in the metadata of '{}' are not used ({}); the classes are named "
                 "\"class 0\", \"class 1\", ... unless --class-names gives a file of them\n",
                 file.string(), why);
    return {};
  }
  return names.get<std::vector<std::string>>();
}

constexpr std::string_view kImportOf = "ringtrain import of ", kDescriptionOnly = ": no samples, only the description "
                                                                                 "of the model's input";

std::string description_provenance(const fs::path& onnx) {
  return fmt::format("{}{}{}", kImportOf, onnx.string(), kDescriptionOnly);
}

// Whether the job file at `job` (an earlier import's, about to be replaced) reads `data`: its description is then
// this import's to replace, whichever model it described.
bool job_reads(const fs::path& job, const fs::path& data) {
  std::ifstream in(job);
  std::string text;
  std::getline(in, text, '\0');  // the whole file: a job file holds no NUL
  return !text.empty() && text.find(config::toml_string(fs::absolute(data).string())) != std::string::npos;
}

// --data is import's own folder of one description shard: a file, a folder holding anything else, or shards that are
// not an earlier import's description of the same model (a real split, whole or damaged, or the description another
// import's job file reads) are never replaced.
void refuse_foreign_data(const fs::path& data, const fs::path& onnx, const fs::path& job) {
  const auto refuse = [&](const std::string& why) {
    throw UsageError(fmt::format("--data '{}' {}; import writes a split of no samples there and would replace it, so "
                                 "point --data at a new or empty folder",
                                 data.string(), why));
  };
  std::error_code error;
  if (!fs::exists(data, error)) return;
  if (!fs::is_directory(data, error)) refuse("is not a folder");
  for (const fs::directory_entry& entry : fs::directory_iterator(data, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(io::shard_names::file_prefix) || !(name.ends_with(".h5") || name.ends_with(".h5.tmp")))
      refuse(fmt::format("holds other things than an earlier import's description (e.g. '{}')", name));
  }
  if (!io::detail::holds_shard_files(data)) return;
  try {
    const io::SplitIndex split = io::open_split(data);
    const std::string& provenance = split.meta.provenance;
    if (split.total_samples() != 0 || split.shards.size() != 1 || !provenance.starts_with(kImportOf) ||
        !provenance.ends_with(kDescriptionOnly))
      refuse(fmt::format("holds a split with {} samples", split.total_samples()));
    const fs::path theirs =
        provenance.substr(kImportOf.size(), provenance.size() - kImportOf.size() - kDescriptionOnly.size());
    if (theirs == fs::absolute(onnx) || io::same_file(theirs, onnx) || job_reads(job, data)) return;
    refuse(fmt::format("holds the description of another import's model ('{}'), which that import's job file reads",
                       theirs.string()));
  } catch (const DataError& e) {
    refuse(fmt::format("holds shards that do not open as an earlier import's description ({})", e.what()));
  }
}

// What import writes, and what it reads.
struct ImportPaths {
  fs::path job, checkpoint, data;
  std::vector<io::CommandInput> inputs;  // the ONNX model, the class names
};

// Every output checked before anything is written: none may be an input or the other output, or a folder.
void refuse_unusable_outputs(const ImportPaths& p) {
  std::error_code error;
  const std::pair<const char*, const fs::path*> outputs[] = {{"--out", &p.job}, {"--checkpoint", &p.checkpoint}};
  for (const auto& [option, path] : outputs) {
    if (fs::is_directory(*path, error))
      throw UsageError(fmt::format("{} '{}' is a folder; name the file to write, e.g. '{}'", option, path->string(),
                                   (*path / (option == std::string("--out") ? "model.toml" : "model.h5")).string()));
    io::refuse_output_over_input(option, *path, p.inputs);
  }
  if (fs::absolute(p.job).lexically_normal() == fs::absolute(p.checkpoint).lexically_normal() ||
      io::same_file(p.job, p.checkpoint))
    throw UsageError(fmt::format("--out and --checkpoint name the same file '{}'; give each its own", p.job.string()));
}

io::CheckpointData checkpoint_of(const model::ImportedModel& m, const model::Network& net, const config::JobConfig& job) {
  io::CheckpointData d;
  d.ranks = 1;
  d.global_batch = job.train.batch_per_rank;
  for (const auto& t : net.param_tensors()) d.tensor_names.push_back(t.name), d.tensor_sizes.push_back(t.count);
  d.params = m.params;
  d.states = m.states;
  d.state_count = static_cast<int64_t>(m.states.size());
  const model::Shape input = net.input_shape();
  d.sample_shape = {input.c, input.h, input.w};
  d.run_id = "import";
  d.job_toml = job.resolved_toml;
  d.versions_json = util::versions_json(util::host_library_versions());
  return d;
}

void write_text(const fs::path& path, const std::string& text) {
  if (const std::string why = io::write_whole_file(path, text); !why.empty())
    throw JobFileError(fmt::format("cannot write the job file '{}': {}; pick a writable folder for --out (free "
                                   "space there if its file system is full)",
                                   path.string(), why));
}

// The folders an output goes in, made where missing; returns those this run made, deepest last.
std::vector<fs::path> make_parent_folders(const std::vector<fs::path>& outputs) {
  std::vector<fs::path> made;
  for (const fs::path& output : outputs) {
    std::error_code error;
    fs::path folder;
    for (const fs::path& part : fs::absolute(output).parent_path()) {
      folder /= part;
      if (!fs::exists(folder, error) && fs::create_directory(folder, error)) made.push_back(folder);
    }
  }
  return made;
}

// Puts each output in place, keeping what was at its path until every output is: `restore` then puts the earlier
// ones back (an import that fails on its last output loses nothing of an earlier import), `commit` lets them go.
class OutputSwap {
 public:
  // The earlier file stays at its path (hard-linked aside) while the new one replaces it in one rename.
  void put(const fs::path& from, const fs::path& to, const char* option) {
    std::error_code error;
    const bool had = fs::is_regular_file(to, error);
    const fs::path kept = io::temporary_beside(to).concat(".kept");
    if (had) {
      fs::create_hard_link(to, kept, error);
      if (error) fs::copy_file(to, kept, fs::copy_options::overwrite_existing, error);
      if (error) refuse(option, to, error);
    }
    fs::rename(from, to, error);
    if (error) {
      std::error_code ignored;
      if (had) fs::remove(kept, ignored);
      refuse(option, to, error);
    }
    done_.push_back({to, had ? kept : fs::path()});
  }
  void restore() noexcept {
    std::error_code ignored;
    for (auto step = done_.rbegin(); step != done_.rend(); ++step) {
      if (step->kept.empty())
        fs::remove(step->path, ignored);
      else
        fs::rename(step->kept, step->path, ignored);
    }
    done_.clear();
  }
  void commit() noexcept {
    std::error_code ignored;
    for (const Done& step : done_)
      if (!step.kept.empty()) fs::remove(step.kept, ignored);
    done_.clear();
  }

 private:
  struct Done {
    fs::path path, kept;  // kept: where the earlier output waits; empty where there was none
  };
  [[noreturn]] static void refuse(const char* option, const fs::path& path, const std::error_code& error) {
    throw JobFileError(fmt::format("{} '{}' cannot be written: {}", option, path.string(), error.message()));
  }
  std::vector<Done> done_;
};

// Writes the three outputs under temporary names, then puts them in place together (the description's one shard
// into --data, never the folder itself); a failure anywhere puts back what was there before and removes the
// temporaries and the folders this run made for them.
void write_outputs(const ImportPaths& p, const std::string& job_text, const io::CheckpointData& checkpoint,
                   const io::DatasetMeta& meta) {
  std::error_code error;
  const fs::path shard = io::shard_file_name(0, 1);
  const fs::path job_tmp = io::temporary_beside(p.job), checkpoint_tmp = io::temporary_beside(p.checkpoint),
                 data_tmp = io::temporary_beside(p.data);
  const std::vector<fs::path> made = make_parent_folders({p.job, p.checkpoint, p.data / shard});
  OutputSwap swap;
  try {
    write_text(job_tmp, job_text);
    io::write_checkpoint(checkpoint_tmp, checkpoint);
    io::write_description_split(data_tmp, meta, false);
    swap.put(data_tmp / shard, p.data / shard, "--data");
    swap.put(checkpoint_tmp, p.checkpoint, "--checkpoint");
    swap.put(job_tmp, p.job, "--out");
  } catch (...) {
    swap.restore();
    fs::remove(job_tmp, error);
    fs::remove(checkpoint_tmp, error);
    fs::remove_all(data_tmp, error);
    for (auto folder = made.rbegin(); folder != made.rend(); ++folder) fs::remove(*folder, error);  // if empty
    throw;
  }
  swap.commit();
  fs::remove_all(data_tmp, error);
}

}  // namespace

int import_onnx(const ImportArgs& args) {
  refuse_several_processes("import");
  io::OnnxModel onnx = io::read_onnx(args.onnx);
  model::drop_probability_outputs(onnx);
  const std::optional<model::InputNormalisation> in_graph = model::take_input_normalisation(onnx);
  const model::ImportedModel imported = model::import_onnx(onnx);
  io::DatasetMeta meta;
  meta.shape = sample_shape(imported, args.shape);
  const int eval_resize = job_eval_resize(args, onnx, meta.shape);
  meta.num_classes = class_count(imported);
  set_normalisation(args, in_graph, meta);
  meta.class_names = args.class_names.empty() ? names_in_metadata(onnx, args.onnx, meta.num_classes)
                                              : class_names(args.class_names, meta.num_classes);
  meta.provenance = description_provenance(fs::absolute(args.onnx));
  backend::CpuBackend cpu(1);
  const model::Network net(imported.layers, cpu, {1, meta.shape.channels, meta.shape.height, meta.shape.width},
                           meta.num_classes);
  refuse_misfit_weights(imported, net, meta.shape);

  const fs::path data = args.data.empty() ? fs::path(fs::path(args.job).replace_extension("").string() + "-data") : args.data;
  ImportPaths paths{args.job, args.checkpoint, data, {{"the ONNX model", args.onnx}}};
  if (!args.class_names.empty()) paths.inputs.push_back({"the class names", args.class_names});
  refuse_unusable_outputs(paths);
  const std::string text = job_text(args, onnx, imported, meta, eval_resize, data);
  const config::JobConfig job = config::parse_job(text, args.job, {});
  if (config::layers_toml(job.model.layers) != config::layers_toml(imported.layers))
    throw Error(ExitCode::internal, "import: the job file's layers read back differently from the imported ones");
  refuse_foreign_data(data, args.onnx, args.job);
  write_outputs(paths, text, checkpoint_of(imported, net, job), meta);
  fmt::print("imported {} ({} layers, {} parameters, {} classes, input {}x{}x{}): job {}, checkpoint {}, input "
             "description {}\n",
             args.onnx.string(), imported.layers.size(), imported.params.size(), meta.num_classes, meta.shape.channels,
             meta.shape.height, meta.shape.width, args.job.string(), args.checkpoint.string(), data.string());
  return 0;
}

}  // namespace ringtrain::commands
