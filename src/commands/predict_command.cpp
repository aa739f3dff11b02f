// Owns `ringtrain predict`: the model of a checkpoint (its job is inside it) on split folders, folders of images
// and image files, on the CPU or a GPU like training, as JSON lines on stdout: each sample's (or image file's)
// top-k classes with their probabilities, a split sample's label, and optionally the logits. One rank. Images go
// through the decode and resize of `prepare images` (for a model trained on JPEG shards: the evaluation crop of the
// photo, as the loader makes it) and the loader's normalisation, with the shape and the
// statistics of the data the model was trained on, so an image gives what its sample in shards gives.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/device_setup.h"
#include "commands/commands.h"
#include "commands/on_every_rank.h"
#include "commands/results_on_stdout.h"
#include "common/error.h"
#include "common/stderr_print.h"
#include "config/job_config.h"
#include "data/batch_loader.h"
#include "data/loader_work.h"
#include "data/normalisation.h"
#include "data/photo_sample.h"
#include "data/split_part.h"
#include "dist/world.h"
#include "infer/classifier.h"
#include "infer/inference_keys.h"
#include "infer/predict_inputs.h"
#include "infer/top_classes.h"
#include "infer/training_split.h"
#include "io/checkpoint_file.h"
#include "io/dataset_meta.h"
#include "io/image_decode.h"
#include "io/image_sample.h"
#include "train/run_context.h"
#include "train/start_point.h"
#include "util/json_text.h"

namespace ringtrain::commands {
namespace {

namespace fs = std::filesystem;

void print_line(nlohmann::ordered_json line, std::span<const float> logits, const std::vector<std::string>& names,
                const PredictArgs& args) {
  line.update(infer::top_classes(logits, names, {args.top, args.logits}));
  fmt::print("{}\n", util::json_text(line));
}

// Every split input opened before the first line is printed: one that cannot be read, or that holds no samples (it
// describes a model's input only, as `ringtrain import` writes it), would otherwise be refused after the lines of the
// inputs before it, leaving results that look complete.
void refuse_empty_splits(const std::vector<infer::PredictInput>& inputs) {
  for (const infer::PredictInput& input : inputs) {
    if (!input.is_split()) continue;
    io::SplitIndex split;
    try {
      split = io::open_split(input.path);
    } catch (const DataError& e) {
      throw DataError(fmt::format("{} (from the input)", e.what()));
    }
    if (split.total_samples() == 0)
      throw DataError(fmt::format("the input '{}' holds no samples (it describes a model's input only, as `ringtrain "
                                  "import` writes it); predict on a split with samples, or on image files",
                                  input.path.string()));
  }
}

void predict_split(const train::RunContext& run, const PredictArgs& args, const fs::path& dir) {
  train::SplitPart part = train::open_split_part(run.world, dir, "the input");
  const int classes = part.meta().num_classes;
  infer::Classifier classifier(run, args.checkpoint, part.meta().shape, classes, train::weights_named(args.weights));
  std::string norm_note;
  const train::InputNorm model_norm = infer::model_input_norm(run.job, args.data, part.meta(), norm_note);
  if (!norm_note.empty()) stderr_print("{}\n", norm_note);
  const int64_t n = part.range.size(), per_batch = classifier.batch(), batches = (n + per_batch - 1) / per_batch;
  train::BatchLoader loader(
      *part.reader, classifier.batch(), batches,
      [&](int64_t i, std::vector<int64_t>& out) {
        out.clear();
        for (int64_t k = i * per_batch; k < std::min(n, (i + 1) * per_batch); ++k) out.push_back(k);
      },
      run.job.data.prefetch_batches,
      train::plain_loader_work(run.job, run.world, train::batch_form(run.job, run.backend), part.meta(), model_norm));
  const std::vector<std::string> names = io::named_classes(part.meta());
  for (int64_t b = 0; b < batches; ++b) {
    auto host = loader.next(nullptr);
    const std::span<const float> logits = classifier.logits(*host);
    for (int i = 0; i < host->count; ++i)
      print_line({{"input", dir.string()}, {"sample", b * per_batch + i}, {"label", host->labels[static_cast<size_t>(i)]}},
                 logits.subspan(static_cast<size_t>(i * classes), static_cast<size_t>(classes)), names, args);
    loader.recycle(std::move(host));
  }
}

// The model for image files: the shape, normalisation and class names of the data it was trained on.
struct ImageModel {
  io::DatasetMeta meta;
  train::Normalisation normalisation;
  infer::Classifier classifier;
  // The evaluation crop of each photo (data.eval_resize, then the centre), for a model trained on JPEG shards or
  // whose job sets data.eval_resize (an imported one's: torchvision's Resize(256) + CenterCrop(224)); else the
  // shorter side scaled to the sample's and the centre, as a raw split stores an image.
  train::PhotoSampling sampling;
  bool crops_photos = false;
};

std::unique_ptr<ImageModel> image_model(const train::RunContext& run, const PredictArgs& args) {
  const io::SplitIndex trained_on = infer::open_training_split(run.job, args.data);
  const io::DatasetMeta& meta = trained_on.meta;
  if (!io::convertible_channels(meta.shape.channels))
    throw DataError(fmt::format("the model takes {}-channel samples (its training data '{}'), but images convert only "
                                "to 1 (gray), 3 (RGB) or 4 (RGBA) channels; give predict such samples as a split "
                                "folder (`ringtrain prepare arrays`)",
                                meta.shape.channels, trained_on.dir.string()));
  train::refuse_eval_resize_below_the_sample(run.job, meta.shape);
  const train::PhotoSampling sampling{false, {}, train::evaluation_resize(run.job.data.eval_resize, meta.shape), meta.shape};
  return std::unique_ptr<ImageModel>(new ImageModel{meta, train::Normalisation(meta, train::input_norm(meta, run.job.data)),
                                                    infer::Classifier(run, args.checkpoint, meta.shape, meta.num_classes,
                                                                      train::weights_named(args.weights)),
                                                    sampling,
                                                    meta.storage == io::SampleStorage::jpeg || run.job.data.eval_resize > 0});
}

void predict_images(ImageModel& model, const std::vector<fs::path>& files, const PredictArgs& args) {
  const auto per_sample = static_cast<size_t>(model.meta.shape.elements());
  const auto per_batch = static_cast<size_t>(model.classifier.batch());
  const auto classes = static_cast<size_t>(model.meta.num_classes);
  const std::vector<std::string> names = io::named_classes(model.meta);
  // The batch in the classifier's form: uint8 pixels for the device to normalise, or floats normalised here.
  train::HostBatch batch;
  batch.form = model.classifier.form();
  batch.norm = &model.normalisation.norm();
  const bool pixels_out = batch.form == train::BatchForm::pixels;
  if (pixels_out)
    batch.pixels.resize(per_batch * per_sample);
  else
    batch.images.resize(per_batch * per_sample);
  batch.labels.assign(per_batch, 0);
  std::vector<uint8_t> pixels(per_sample);
  for (size_t first = 0; first < files.size(); first += per_batch) {
    batch.count = static_cast<int>(std::min(per_batch, files.size() - first));
    for (size_t i = 0; i < static_cast<size_t>(batch.count); ++i) {
      if (model.crops_photos)
        train::photo_file_sample(model.sampling, files[first + i], pixels);
      else
        io::image_to_sample(files[first + i], model.meta.shape, pixels);
      if (pixels_out)
        std::copy(pixels.begin(), pixels.end(), batch.pixels.begin() + static_cast<std::ptrdiff_t>(i * per_sample));
      else
        model.normalisation.apply(pixels.data(), batch.images.data() + i * per_sample);
    }
    const std::span<const float> logits = model.classifier.logits(batch);
    for (size_t i = 0; i < static_cast<size_t>(batch.count); ++i)
      print_line({{"input", files[first + i].string()}}, logits.subspan(i * classes, classes), names, args);
  }
}

// Every input's lines, in the order given.
int predict_all(dist::World& world, const PredictArgs& args) {
  if (world.size() != 1)  // every rank sees the same size: no rank needs to abort the others
    throw AgreedError(ExitCode::usage,
                      "predict runs as one process (it writes one stream of predictions): run it without mpirun/srun");
  const std::vector<infer::PredictInput> inputs = infer::resolve_predict_inputs(args.inputs);
  refuse_empty_splits(inputs);
  io::CheckpointData checkpoint = io::read_checkpoint(args.checkpoint, io::CheckpointUse::named);
  // Refused here, before any device is opened or line printed, where the checkpoint lacks the weights asked for.
  train::choose_weights(checkpoint, args.checkpoint, train::weights_named(args.weights));
  std::vector<std::string> overrides{"run.device=" + args.device};
  if (!args.precision.empty()) overrides.push_back("train.precision=" + args.precision);
  const config::JobConfig job =
      config::parse_job(checkpoint.job_toml, args.checkpoint, infer::with_inference_keys(std::move(overrides)));
  backend::DeviceSetup device = backend::open_device(job, world, backend::DeviceUse::inference);
  const train::RunContext run{job, world, *device.backend, false};
  // Set up before the first line, so a model that cannot take images fails with nothing printed.
  std::unique_ptr<ImageModel> images;
  if (std::any_of(inputs.begin(), inputs.end(), [](const infer::PredictInput& i) { return !i.is_split(); }))
    images = image_model(run, args);
  for (const infer::PredictInput& input : inputs) {
    if (input.is_split())
      predict_split(run, args, input.path);
    else
      predict_images(*images, input.images, args);
  }
  return 0;
}

}  // namespace

int predict(int* argc, char*** argv, const PredictArgs& args) {
  dist::World world(argc, argv);
  return on_every_rank(world, [&] { return with_results_on_stdout([&] { return predict_all(world, args); }); });
}

}  // namespace ringtrain::commands
