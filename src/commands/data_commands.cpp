// Owns `ringtrain prepare` and `ringtrain inspect` (a split, or a checkpoint): thin wrappers over io/ that print
// results.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

#include "commands/commands.h"
#include "commands/one_process.h"
#include "common/error.h"
#include "common/path_probe.h"
#include "io/checkpoint_file.h"
#include "io/inspect.h"
#include "io/prepare.h"
#include "io/shard_header.h"

namespace ringtrain::commands {

int prepare_fashion_mnist(const std::filesystem::path& source, const std::filesystem::path& out, int shards, bool overwrite) {
  refuse_several_processes("prepare fashion-mnist");
  io::prepare_fashion_mnist(source, out, shards, overwrite);
  fmt::print("wrote {}/train and {}/test ({} shards each)\n", out.string(), out.string(), shards);
  return 0;
}

int prepare_synthetic(const std::filesystem::path& out, const io::SyntheticOptions& options, bool overwrite) {
  refuse_several_processes("prepare synthetic");
  io::prepare_synthetic(out, options, overwrite);
  fmt::print("wrote {}/train and {}/test: {}x{}x{} images, {} classes, {} training samples, {} shards\n", out.string(),
             out.string(), options.shape.channels, options.shape.height, options.shape.width, options.num_classes,
             options.samples, options.shards);
  return 0;
}

namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find(',', begin)) != std::string::npos; begin = end + 1)
    items.push_back(text.substr(begin, end - begin));
  items.push_back(text.substr(begin));
  return items;
}

io::LabelledArrays load_arrays(const commands::ArraysArgs& args, bool test) {
  const io::ArrayLayout layout = io::parse_array_layout(args.layout);
  if (!args.from_hdf5.empty()) {
    if (test && args.test_images_dataset.empty()) return {};
    return io::load_hdf5_arrays({args.from_hdf5, test ? args.test_images_dataset : args.images_dataset,
                                 test ? args.test_labels_dataset : args.labels_dataset},
                                layout);
  }
  if (test && args.test_images.empty()) return {};
  return io::load_npy_arrays(test ? args.test_images : args.images, test ? args.test_labels : args.labels, layout);
}

// Which inputs go together is checked here, before any file is read.
void check_sources(const commands::ArraysArgs& args) {
  const bool npy = !args.images.empty() || !args.labels.empty();
  if (npy == !args.from_hdf5.empty())
    throw UsageError("prepare arrays needs either --images and --labels (.npy) or --from-hdf5 FILE, not both");
  if (npy && (args.images.empty() || args.labels.empty()))
    throw UsageError("prepare arrays needs both --images and --labels");
  if (args.test_images.empty() != args.test_labels.empty())
    throw UsageError("--test-images and --test-labels go together");
  if (args.test_images_dataset.empty() != args.test_labels_dataset.empty())
    throw UsageError("--test-images-dataset and --test-labels-dataset go together");
}

}  // namespace

int prepare_arrays(ArraysArgs args) {
  refuse_several_processes("prepare arrays");
  check_sources(args);
  if (args.test_images.empty() && args.test_images_dataset.empty()) io::check_test_fraction(args.options);
  args.options.class_names = split_commas(args.class_names);
  io::LabelledArrays train = load_arrays(args, false);
  io::LabelledArrays test = load_arrays(args, true);
  const std::vector<int> constant = io::prepare_arrays(std::move(train), std::move(test), args.options);
  const io::SplitIndex written = io::open_split(args.options.out / "train");
  const io::SplitIndex written_test = io::open_split(args.options.out / "test");
  fmt::print("wrote {}/train ({} samples) and {}/test ({} samples) of {}, {} classes\n", args.options.out.string(),
             written.total_samples(), args.options.out.string(), written_test.total_samples(),
             io::detail::describe(written.meta.shape), written.meta.num_classes);
  if (!constant.empty())
    fmt::print("note: channel{} {} held one value in every training pixel: stored with std 1 (normalisation maps it to "
               "0); check the arrays (all zero? the wrong --layout?) if that is not meant\n",
               constant.size() == 1 ? "" : "s", fmt::join(constant, ", "));
  return 0;
}

namespace {

// A checkpoint file: every array read (and so its chunks proven present and its checksums verified), then what it
// holds, saying which checks its format allowed: CRC-32C per array, Fletcher-32 only (files from before the
// CRC), or none (files without a run id come from ringtrains that wrote no checksums at all).
int inspect_checkpoint(const std::filesystem::path& file) {
  const io::CheckpointData d = io::read_checkpoint(file, io::CheckpointUse::named);
  std::string state;
  for (const io::NamedArray& a : d.optimizer_state) state += (state.empty() ? "" : ", ") + a.name;
  fmt::print("checkpoint {}: valid ({})\n  run {}\n  next: epoch {} step {} (after {} "
             "optimizer steps of {} per epoch)\n  written by {} rank{} at global batch {}\n  {} parameters in {} "
             "tensors, {} batch-norm statistics per rank\n  optimizer {} (state: {}; {} updates applied)\n",
             file.string(),
             d.crc_verified      ? "every array's chunks present and its CRC-32C verified"
             : d.run_id.empty()  ? "every array's chunks present, read whole and finite; written by an older "
                                   "ringtrain, without checksums"
                                 : "every array's chunks present and its Fletcher-32 checksums verified; written by "
                                   "an older ringtrain, without CRC-32C",
             d.run_id.empty() ? "(not recorded)" : d.run_id, d.epoch + 1, d.step_in_epoch + 1,
             d.global_step, d.steps_per_epoch, d.ranks, d.ranks == 1 ? "" : "s", d.global_batch, d.params.size(),
             d.tensor_names.size(), d.state_count, d.optimizer, state.empty() ? "none" : state, d.optimizer_updates);
  return 0;
}

// The folders a prepare's --out holds (train, test) or any other subfolders that hold shards, in name order.
std::vector<std::filesystem::path> split_subfolders(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> splits;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    if (entry.is_directory(error) && io::detail::holds_shard_files(entry.path())) splits.push_back(entry.path());
  std::sort(splits.begin(), splits.end());
  return splits;
}

// A run directory or its checkpoints folder is no split: its newest checkpoint is what inspect can read there.
std::filesystem::path checkpoints_in(const std::filesystem::path& dir) {
  for (const auto& folder : {dir, dir / "checkpoints"}) {
    const std::vector<std::filesystem::path> found = io::list_checkpoints(folder);
    if (!found.empty()) return found.back();
  }
  return {};
}

int inspect_splits(const std::vector<std::filesystem::path>& splits) {
  int worst = 0;
  for (const auto& split : splits) {
    const io::SplitReport report = io::inspect_split(split);
    fmt::print("{}", io::format_report(report));
    if (!report.valid()) worst = static_cast<int>(ExitCode::data);
  }
  return worst;
}

}  // namespace

// A file is a checkpoint; a folder a split, or a prepare's --out of splits (each inspected); a run directory or a
// checkpoints folder is refused naming its newest checkpoint, not reported as a broken split to prepare again.
int inspect(const std::filesystem::path& path) {
  const PathProbe probe = probe_path(path);
  if (probe.kind == PathProbe::Kind::regular) {
    if (path.extension() != ".h5")
      throw UsageError(fmt::format("inspect takes a split folder or a checkpoint file (.h5); '{}' is neither",
                                   path.string()));
    return inspect_checkpoint(path);
  }
  if (probe.kind == PathProbe::Kind::directory && !io::detail::holds_shard_files(path)) {
    if (const auto splits = split_subfolders(path); !splits.empty()) return inspect_splits(splits);
    if (const auto newest = checkpoints_in(path); !newest.empty())
      throw UsageError(fmt::format("'{}' holds checkpoints, not a split; inspect a checkpoint file, e.g. the newest: "
                                   "ringtrain inspect '{}'",
                                   path.string(), newest.string()));
  }
  return inspect_splits({path});
}

}  // namespace ringtrain::commands
