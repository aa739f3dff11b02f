// Owns the evaluate command's phases; see evaluate.h.
#include "infer/evaluate.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/stderr_print.h"
#include "data/decode_ahead.h"
#include "data/device_batch.h"
#include "data/loader_work.h"
#include "data/split_part.h"
#include "infer/class_tally.h"
#include "infer/training_split.h"
#include "io/output_paths.h"
#include "io/whole_file.h"
#include "train/evaluation.h"
#include "train/fault_injection.h"
#include "train/network_setup.h"
#include "train/start_point.h"
#include "util/json_text.h"

namespace ringtrain::infer {
namespace {

// Rank 0's reading of the model's input normalisation, for every rank (and its note, said once): each rank opening
// its own copy of data.train would let a node whose copy is missing or stale normalise its share of the samples with
// other numbers, and the loss and accuracy would not be the training run's.
train::InputNorm agreed_input_norm(const train::RunContext& run, const io::DatasetMeta& split) {
  train::InputNorm norm;
  std::string note;
  run.world.all_succeed([&] {
    if (run.root()) norm = infer::model_input_norm(run.job, {}, split, note);
  });
  const auto channels = static_cast<std::size_t>(split.shape.channels);
  norm.mean.resize(channels);
  norm.stddev.resize(channels);
  run.world.broadcast_floats(norm.mean.data(), static_cast<long long>(channels));
  run.world.broadcast_floats(norm.stddev.data(), static_cast<long long>(channels));
  if (!note.empty()) run.say(note);
  return norm;
}

nlohmann::ordered_json result_json(const train::RunContext& run, const train::RestoredCheckpoint& restored,
                                   const train::SplitPart& part, const train::Totals& totals, const ClassTally& tally) {
  nlohmann::ordered_json j{{"kind", "evaluation"},
                           {"checkpoint", restored.path},
                           {"epochs_done", restored.position.epoch},
                           {"optimizer_steps", restored.position.global_step},
                           {"split", part.split.dir.string()},
                           {"ranks", run.ranks()},
                           {"samples", static_cast<int64_t>(totals.samples)},
                           {"loss", totals.mean_loss()},
                           {"accuracy", totals.accuracy()},
                           {"top5_accuracy", tally.classes() >= 5 ? nlohmann::ordered_json(tally.top5_accuracy())
                                                                   : nlohmann::ordered_json()}};
  j.update(tally.json(io::named_classes(part.meta())));
  return j;
}

void write_json(const std::filesystem::path& file, const nlohmann::ordered_json& j) {
  if (const std::string why = io::write_whole_file(file, util::json_text(j, 1) + "\n"); !why.empty())
    throw JobFileError(fmt::format("--out '{}' cannot be written: {}; pick a writable file with --out (free space "
                                   "there if its file system is full)",
                                   file.string(), why));
}

}  // namespace

int evaluate(const train::RunContext& run, const EvaluateOptions& options) {
  const bool own_data = !options.data.empty();
  train::SplitPart part =
      train::open_split_part(run.world, own_data ? options.data : run.job.data.test, own_data ? "--data" : "data.test");
  // Every rank holds the same split index, so every rank refuses alike. A split of no samples is what `ringtrain
  // import` writes to describe a model's input; its loss and accuracy would read as 0.
  if (part.split.total_samples() == 0)
    throw AgreedError(ExitCode::data, fmt::format("{} '{}' holds no samples (it describes a model's input only, as "
                                                  "`ringtrain import` writes it); evaluate on a split with samples "
                                                  "with --data",
                                                  own_data ? "--data" : "data.test", part.split.dir.string()));
  const io::SampleShape& s = part.meta().shape;
  run.world.all_succeed([&] {
    train::refuse_eval_resize_below_the_sample(run.job, s);
    if (run.root()) io::refuse_unwritable_output("--out", options.out);
  });
  const model::Shape input{run.job.train.batch_per_rank, s.channels, s.height, s.width};
  const double loader_bytes = (run.job.data.prefetch_batches + 1.0) * input.n * (input.per_sample() * 4.0 + 4.0);
  const double decode_bytes =
      train::decodes_on_device(run.job, part.meta()) ? train::evaluation_decode_bytes(input) : 0.0;
  const auto net = train::build_network(run, input, part.meta().num_classes, {loader_bytes, decode_bytes}, nullptr);
  const train::RestoredCheckpoint restored =
      train::restore_checkpoint(run, *net, nullptr, options.checkpoint, options.weights);
  if (!restored.other_sample_shape.empty()) stderr_print("{}\n", restored.other_sample_shape);

  // The newest checkpoint is known only now (no --checkpoint given).
  run.world.all_succeed([&] {
    if (!run.root()) return;  // rank 0 writes --out: every rank looking at every shard would only load the file system
    std::vector<io::CommandInput> inputs = io::shard_inputs(part.split, "a shard of the split evaluated");
    inputs.push_back({"the checkpoint", restored.path});
    io::refuse_output_over_input("--out", options.out, inputs);
  });
  train::DeviceBatch device_batch(run.backend, input, train::batch_form(run.job, run.backend));
  train::InputNorm model_norm = agreed_input_norm(run, part.meta());
  train::Evaluator evaluator(run, *net, part, input.n, device_batch, std::move(model_norm));
  ClassTally tally(part.meta().num_classes);
  train::Totals totals;  // a sample one rank cannot read or decode stops every rank with its message
  run.world.all_succeed([&] { totals = evaluator.run([&](const train::EvaluatedBatch& b) { tally.add(b); }); });
  train::stall_if_asked("evaluate", run.world.rank());
  totals.sum_across(run.world);
  tally.sum_across(run.world);

  run.say(fmt::format("evaluate: {} (after {} epochs, {} optimizer steps) on {} ({} samples, {} rank{})", restored.path,
                      restored.position.epoch, restored.position.global_step, part.split.dir.string(), totals.samples,
                      run.ranks(), run.ranks() == 1 ? "" : "s"));
  run.say(fmt::format("loss {:.6f} accuracy {:.4f}{}", totals.mean_loss(), totals.accuracy(),
                      tally.classes() >= 5 ? fmt::format(" top-5 {:.4f}", tally.top5_accuracy()) : std::string()));
  run.say(tally.table(io::named_classes(part.meta())));
  run.world.all_succeed([&] {
    if (run.root() && !options.out.empty()) write_json(options.out, result_json(run, restored, part, totals, tally));
  });
  if (!options.out.empty())
    run.say(fmt::format("written: {} (a PNG of the confusion matrix: python3 scripts/plot_confusion.py {})",
                        options.out.string(), options.out.string()));
  return 0;
}

}  // namespace ringtrain::infer
