// Owns `ringtrain export`: a checkpoint, the job it was written by (inside it) and the data it was trained on
// (for the sample shape and the normalisation) into an ONNX model. One process; no MPI, no device.
#include <fmt/format.h>

#include "commands/commands.h"
#include "config/job_config.h"
#include "infer/onnx_export.h"
#include "infer/onnx_graph.h"
#include "infer/training_split.h"
#include "io/checkpoint_file.h"
#include "io/dataset_meta.h"

namespace ringtrain::commands {

int export_onnx(const ExportArgs& args) {
  const io::CheckpointData checkpoint = io::read_checkpoint(args.checkpoint);
  const config::JobConfig job = config::parse_job(checkpoint.job_toml, args.checkpoint, {});
  const io::SplitIndex split = infer::open_training_split(job, args.data);
  infer::export_onnx({checkpoint, args.checkpoint.string(), job, split.meta, io::named_classes(split.meta)}, args.onnx);
  fmt::print("exported {} ({} classes, input {}x{}x{}, opset {}) to {}\n", args.checkpoint.string(),
             split.meta.num_classes, split.meta.shape.channels, split.meta.shape.height, split.meta.shape.width,
             infer::OnnxGraph::kOpset, args.onnx.string());
  return 0;
}

}  // namespace ringtrain::commands
