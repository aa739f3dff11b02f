// Owns `ringtrain export`: a checkpoint, the job it was written by (inside it) and the data it was trained on
// (for the sample shape and the normalisation) into an ONNX model. One process; no MPI, no device.
#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "commands/commands.h"
#include "commands/one_process.h"
#include "common/stderr_print.h"
#include "io/output_paths.h"
#include "config/job_config.h"
#include "data/loader_work.h"
#include "infer/inference_keys.h"
#include "infer/onnx_export.h"
#include "io/onnx_graph.h"
#include "infer/training_split.h"
#include "io/checkpoint_file.h"
#include "io/dataset_meta.h"
#include "model/network.h"
#include "train/network_setup.h"
#include "train/start_point.h"

namespace ringtrain::commands {
namespace {

// The model built on this data as evaluate and predict build it (one sample, on the CPU): data of another class
// count, or of a sample shape the checkpoint's weights do not fit, is refused with their messages, not exported into
// a graph whose weights do not fit its input; a shape they fit (global pooling) is exported at that size, said in a
// note.
void refuse_other_data(const io::CheckpointData& checkpoint, const std::filesystem::path& path,
                       const config::JobConfig& job, const io::DatasetMeta& data) {
  backend::CpuBackend cpu(1);
  const model::Shape input{1, data.shape.channels, data.shape.height, data.shape.width};
  const model::Network net = [&] {
    try {
      return model::Network(job.model.layers, cpu, input, data.num_classes);
    } catch (const JobFileError& e) {  // another class count, or a shape the layers cannot take
      throw JobFileError(fmt::format("{}: {}", train::model_source(job), e.what()));
    }
  }();
  train::refuse_another_model(checkpoint, path, net, false);
  if (const std::string note = train::other_sample_shape_note(checkpoint, path.string(), input); !note.empty())
    stderr_print("{}\n", note);
}

}  // namespace

int export_onnx(const ExportArgs& args) {
  refuse_several_processes("export");
  io::refuse_output_over_input("--onnx", args.onnx, {{"the checkpoint", args.checkpoint}});
  io::refuse_unwritable_output("--onnx", args.onnx);
  io::CheckpointData checkpoint = io::read_checkpoint(args.checkpoint, io::CheckpointUse::named);
  train::choose_weights(checkpoint, args.checkpoint, train::weights_named(args.weights));
  const config::JobConfig job = config::parse_job(checkpoint.job_toml, args.checkpoint, infer::with_inference_keys({}));
  const io::SplitIndex split = infer::open_training_split(job, args.data);
  io::refuse_output_over_input("--onnx", args.onnx, io::shard_inputs(split, "a shard of the training data"));
  refuse_other_data(checkpoint, args.checkpoint, job, split.meta);
  train::refuse_eval_resize_below_the_sample(job, split.meta.shape);  // as predict and evaluate refuse it
  infer::export_onnx({checkpoint, args.checkpoint.string(), job, split.meta, io::named_classes(split.meta)}, args.onnx);
  fmt::print("exported {} ({} classes, input {}x{}x{}, opset {}) to {}\n", args.checkpoint.string(),
             split.meta.num_classes, split.meta.shape.channels, split.meta.shape.height, split.meta.shape.width,
             io::OnnxGraph::kOpset, args.onnx.string());
  return 0;
}

}  // namespace ringtrain::commands
