// Owns the checkpoint file format: one HDF5 file of named float arrays (parameters, the optimizer's state arrays
// under the names the optimizer gives them, the parameters' moving average when kept, each rank's batch-norm
// statistics), the optimizer's name, the parameter layout (tensor names and sizes, to refuse another model's
// checkpoint), the position in training, the id of the run that wrote it and the provenance (resolved job file,
// library versions). Every array carries HDF5's Fletcher-32 checksum per chunk and our CRC-32C of its bytes, every
// chunk is proven present before it is read, and the file's metadata carries its own checksums (the 1.8 format), so
// a flipped byte anywhere that matters is an error naming what it hit. Written to a temporary name, flushed, then
// renamed, so a crash mid-write never leaves a half checkpoint under a final name. Knows nothing of training:
// src/train/ decides what goes in and what it means.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ringtrain::io {

// One named array of floats (an optimizer's momentum or moments: one value per parameter).
struct NamedArray {
  std::string name;
  std::vector<float> values;
};

// The training totals of an epoch a checkpoint interrupts, over every rank: a resumed epoch's record then covers the
// whole epoch, not only the steps after the resume. The clipped steps' gradient norms and fp16's skipped steps are
// every rank's alike (stored as the array "epoch_train_steps"; 0 where an older ringtrain wrote the file).
struct EpochTrainSoFar {
  double loss_sum = 0, correct = 0, samples = 0;
  double grad_norm_sum = 0, grad_norm_max = 0;
  int64_t grad_norm_steps = 0, skipped_steps = 0;
  bool known = false;  // false in checkpoints of older ringtrains, which did not store them
};

struct CheckpointData {
  // Position: the next step to run is `step_in_epoch` of epoch `epoch` (0-based); global_step counts
  // optimizer steps done.
  int64_t epoch = 0, step_in_epoch = 0, global_step = 0, steps_per_epoch = 0;
  int64_t ranks = 0, global_batch = 0;
  uint64_t seed = 0;
  double train_time_s = 0, train_samples = 0;  // for samples/s over the whole job across a resume
  EpochTrainSoFar epoch_train;                 // stored as the array "epoch_train" where known
  std::vector<std::string> tensor_names;       // parameter layout, in the flat buffer's order
  std::vector<int64_t> tensor_sizes;
  std::vector<float> params;
  // The optimizer that wrote the state, and its arrays. Files without these attributes (ringtrain before the
  // optimizer choice) hold SGD's momentum as "velocity", and read back as such.
  std::string optimizer = "sgd";
  std::vector<NamedArray> optimizer_state;
  // The parameters' moving average (train.ema_decay), one value per parameter, stored as the array
  // "ema_params" only where the run kept one; empty: none (ema_decay 0, or an older ringtrain).
  std::vector<float> ema_params;
  std::vector<float> states;   // ranks x state_count: running statistics differ per rank within an epoch
  int64_t state_count = 0;
  std::string run_id;  // the run that wrote it ("" in checkpoints of older ringtrains)
  // fp16's dynamic loss scale and the finite steps in a row since it last changed; 0 where the run that wrote it
  // had no loss scaling (stored only then, as the array "loss_scale").
  double loss_scale = 0;
  int64_t loss_scale_finite_in_a_row = 0;
  int64_t loss_scale_skipped_steps = 0;  // steps skipped over the job (0 where an older ringtrain wrote the file)
  int64_t loss_scale_skips_in_a_row = 0;  // skipped since the last finite step (0 where an older ringtrain wrote it)
  // The updates the optimizer applied over the job (Adam's count t), stored as the array "optimizer_updates". Not
  // global_step: fp16's skipped steps are no updates, and a resume on another world re-plans the steps. Files
  // without it read back as global_step less the skipped steps, which held until the run changed its world.
  int64_t optimizer_updates = 0;
  // C, H, W of the samples the model was trained (or imported) for, stored as the array "sample_shape"; empty in
  // files of older ringtrains. Not a refusal: a model ending in global pooling runs at any size, and evaluating at
  // another resolution, or resuming at one (progressive resizing), is a choice the commands say aloud.
  std::vector<int64_t> sample_shape;
  // read_checkpoint: every array's CRC-32C was present and verified (false: a file of an older ringtrain, whose
  // arrays carry none; Fletcher-32 and the chunk checks still ran)
  bool crc_verified = false;
  std::string job_toml, versions_json;
};

// Writes `path` atomically (path + ".tmp", fsync'd, renamed). Throws CheckpointError naming the file, and on a
// full disk the space it had and needed.
void write_checkpoint(const std::filesystem::path& path, const CheckpointData& data);

// The first array of `data` holding NaN or Inf, described ("'adam_v' holds 3 non-finite (NaN/Inf) values of 1000"),
// or "" when every value is finite: what read_checkpoint refuses, for a writer to check before it writes.
std::string non_finite_array(const CheckpointData& data);

// Throws CheckpointError naming the file when it is missing, not HDF5, lacks a field, or an array has a chunk
// missing or fails its checksum (naming the array); every such error says how to fall back to the checkpoint
// before it, as `use` reaches it: --resume (and evaluate) take the newest in the folder, the other commands the file
// named. A file the user may not read is not called damaged: that error names the system's reason and the
// permissions to fix, without the fallback.
enum class CheckpointUse { newest_in_folder, named };
CheckpointData read_checkpoint(const std::filesystem::path& path, CheckpointUse use = CheckpointUse::newest_in_folder);

// The world a checkpoint was written on, from its position array alone (checked by its CRC-32C where the file
// carries them): what a resume on another world size must know before it plans its batches, long before the
// whole file is read. Throws CheckpointError naming the file when it cannot be read.
struct CheckpointWorld {
  int64_t ranks = 0, global_batch = 0, global_step = 0;
  std::string job_toml;  // the resolved job that wrote it ("" where it has none)
};
CheckpointWorld read_checkpoint_world(const std::filesystem::path& path);

// Checkpoint files in `dir`, oldest first by global step: exactly the names checkpoint_name() makes (a stray
// "ckpt-s1-backup.h5" or a temporary file is not one). Throws CheckpointError when `dir` cannot be read.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);

// "ckpt-s000001234.h5": names sort by global step.
std::string checkpoint_name(int64_t global_step);
// The number a checkpoint_name() carries; -1 for any other name (past int64_t, or not exactly the name
// checkpoint_name() gives that number, such as one with an extra leading zero).
int64_t checkpoint_number(const std::filesystem::path& path);
bool is_checkpoint_name(const std::string& file_name);

}  // namespace ringtrain::io
