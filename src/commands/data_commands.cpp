// Owns `ringtrain prepare` and `ringtrain inspect` (a split, or a checkpoint): thin wrappers over io/ that print
// results.
#include <fmt/format.h>

#include "commands/commands.h"
#include "common/error.h"
#include "common/path_probe.h"
#include "io/checkpoint_file.h"
#include "io/inspect.h"
#include "io/prepare.h"

namespace ringtrain::commands {

int prepare_fashion_mnist(const std::filesystem::path& source, const std::filesystem::path& out, int shards, bool overwrite) {
  io::prepare_fashion_mnist(source, out, shards, overwrite);
  fmt::print("wrote {}/train and {}/test ({} shards each)\n", out.string(), out.string(), shards);
  return 0;
}

int prepare_synthetic(const std::filesystem::path& out, const io::SyntheticOptions& options, bool overwrite) {
  io::prepare_synthetic(out, options, overwrite);
  fmt::print("wrote {}/train and {}/test: {}x{}x{} images, {} classes, {} training samples, {} shards\n", out.string(),
             out.string(), options.shape.channels, options.shape.height, options.shape.width, options.num_classes,
             options.samples, options.shards);
  return 0;
}

namespace {

// A checkpoint file: every array read (and so its checksum verified), then what it holds.
int inspect_checkpoint(const std::filesystem::path& file) {
  const io::CheckpointData d = io::read_checkpoint(file);
  fmt::print("checkpoint {}: valid (every array's checksum verified)\n  run {}\n  next: epoch {} step {} (after {} "
             "optimizer steps of {} per epoch)\n  written by {} rank{} at global batch {}\n  {} parameters in {} "
             "tensors, {} batch-norm statistics per rank\n",
             file.string(), d.run_id.empty() ? "(not recorded)" : d.run_id, d.epoch + 1, d.step_in_epoch + 1,
             d.global_step, d.steps_per_epoch, d.ranks, d.ranks == 1 ? "" : "s", d.global_batch, d.params.size(),
             d.tensor_names.size(), d.state_count);
  return 0;
}

}  // namespace

int inspect(const std::filesystem::path& path) {
  if (probe_path(path).kind == PathProbe::Kind::regular) return inspect_checkpoint(path);
  const io::SplitReport report = io::inspect_split(path);
  fmt::print("{}", io::format_report(report));
  return report.valid() ? 0 : static_cast<int>(ExitCode::data);
}

}  // namespace ringtrain::commands
