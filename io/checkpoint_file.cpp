// Owns the checkpoint file's layout on disk; see checkpoint_file.h.
#include "io/checkpoint_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/path_probe.h"
#include "io/chunk_coverage.h"
#include "io/data_checksum.h"
#include "io/h5_attributes.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"
#include "io/h5_write_file.h"
#include "io/hdf5_lock.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "ringtrain-checkpoint-1";

template <typename T>
hid_t native_type();
template <>
hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <>
hid_t native_type<int64_t>() { return H5T_NATIVE_INT64; }
template <>
hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }

// What a chunk HDF5 thinks is missing reads as, in any reader (h5py, an older ringtrain): NaN, or a size no tensor
// has, rather than zeros that pass for a model. Set as a user-defined fill value (filled only where a chunk is
// allocated but not wholly written, which write_array never leaves). Not H5D_FILL_TIME_NEVER: HDF5 then skips a
// missing chunk on read altogether, leaving whatever the caller's buffer held. Not H5D_ALLOC_TIME_EARLY: it
// would allocate every chunk before a byte is written, so "every chunk stored" would no longer mean "every chunk
// written".
template <typename T>
T fill_value() {
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::quiet_NaN();
  else return std::numeric_limits<T>::min();
}

// Chunks of at most 4 MiB, each with its Fletcher-32 checksum: HDF5 verifies them on every read. An empty array
// has no chunk (and no bytes to check). The CRC-32C of the whole array (io/data_checksum.h) covers what
// Fletcher-32 cannot see: a damaged chunk index that drops a chunk or points at other bytes.
constexpr hsize_t kChunkBytes = hsize_t{4} << 20;

template <typename T>
void write_array(hid_t file, const char* name, const std::vector<T>& values) {
  const hsize_t dims[1] = {static_cast<hsize_t>(values.size())};
  H5Dataspace space(H5_CHECK(H5Screate_simple(1, dims, nullptr)));
  H5PropList create(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  const T fill = fill_value<T>();
  H5_CHECK(H5Pset_fill_value(create.id(), native_type<T>(), &fill));
  if (!values.empty()) {
    const hsize_t chunk[1] = {std::min<hsize_t>(dims[0], kChunkBytes / sizeof(T))};
    H5_CHECK(H5Pset_chunk(create.id(), 1, chunk));
    H5_CHECK(H5Pset_fletcher32(create.id()));
  }
  H5Dataset set(H5_CHECK(H5Dcreate2(file, name, native_type<T>(), space.id(), H5P_DEFAULT, create.id(), H5P_DEFAULT)));
  if (!values.empty()) H5_CHECK(H5Dwrite(set.id(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  detail::write_data_checksum(set.id(), crc32c(values.data(), values.size() * sizeof(T)));
  set.close();
}

// Every chunk in place before reading (a missing one would read as the fill value, unseen by Fletcher-32), every
// chunk's Fletcher-32 while reading, the array's CRC-32C after: required where the file says its arrays carry
// one, absent in files of older ringtrains.
template <typename T>
std::vector<T> read_array(hid_t file, const char* name, bool crc_required) {
  if (H5_CHECK(H5Lexists(file, name, H5P_DEFAULT)) <= 0)
    throw CheckpointError(fmt::format("dataset '{}' is missing", name));
  H5Dataset set(H5_CHECK(H5Dopen2(file, name, H5P_DEFAULT)));
  H5Dataspace space(H5_CHECK(H5Dget_space(set.id())));
  if (H5_CHECK(H5Sget_simple_extent_ndims(space.id())) != 1)
    throw CheckpointError(fmt::format("dataset '{}' is not one-dimensional", name));
  hsize_t n = 0;
  H5_CHECK(H5Sget_simple_extent_dims(space.id(), &n, nullptr));
  std::string missing;
  try {
    missing = detail::chunk_coverage_problem(set.id());
  } catch (const Error& e) {
    missing = fmt::format("has a chunk index HDF5 cannot read ({})", e.what());
  }
  if (!missing.empty()) throw CheckpointError(fmt::format("array '{}' {}; the file is damaged", name, missing));
  std::vector<T> values(static_cast<size_t>(n));
  try {
    if (n > 0) H5_CHECK(H5Dread(set.id(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  } catch (const Error&) {  // a chunk's Fletcher-32 checksum failed, or its bytes cannot be decoded
    throw CheckpointError(fmt::format("array '{}' fails its checksum, the file is damaged", name));
  }
  std::optional<uint32_t> stored;
  try {
    stored = detail::read_data_checksum(set.id());
  } catch (const h5::AttributeTypeError& e) {
    throw CheckpointError(fmt::format("array '{}' has a damaged checksum: {}", name, e.what()));
  }
  if (!stored && crc_required)
    throw CheckpointError(fmt::format("array '{}' has lost its CRC-32C (the file says every array carries one), the "
                                      "file is damaged or was edited",
                                      name));
  const uint32_t actual = crc32c(values.data(), values.size() * sizeof(T));
  if (stored && *stored != actual)
    throw CheckpointError(fmt::format("array '{}' fails its checksum (CRC-32C {:08x} stored, {:08x} read), the file is "
                                      "damaged",
                                      name, *stored, actual));
  return values;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  return out;
}

// Data reaches the disk before the rename makes it the checkpoint: the file (H5WriteFile::commit), then its folder.
void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw CheckpointError(fmt::format("cannot open '{}' to sync it: {}", folder.string(), std::strerror(errno)));
  ::fsync(fd);  // some file systems refuse to sync a folder; the rename is then as durable as they make it
  ::close(fd);
}

// What one array takes on disk: an array larger than a chunk is stored in whole chunks, its last one padded.
double stored_array_bytes(std::size_t bytes) {
  const auto chunk = static_cast<std::size_t>(kChunkBytes);
  return static_cast<double>(bytes <= chunk ? bytes : (bytes + chunk - 1) / chunk * chunk);
}

// What the file will take on disk: its arrays (in whole chunks) and texts, and HDF5's object headers and chunk
// index (a few KiB an array).
double checkpoint_bytes(const CheckpointData& d) {
  double bytes = stored_array_bytes(d.params.size() * sizeof(float)) +
                 stored_array_bytes(d.ema_params.size() * sizeof(float)) +
                 stored_array_bytes(d.states.size() * sizeof(float));
  for (const NamedArray& a : d.optimizer_state) bytes += stored_array_bytes(a.values.size() * sizeof(float));
  std::size_t text = d.job_toml.size() + d.versions_json.size() + d.run_id.size();
  for (const std::string& name : d.tensor_names) text += name.size() + 1;
  bytes += static_cast<double>(text + (d.tensor_sizes.size() + 8 + 2 + 2 + 3) * sizeof(int64_t));
  return bytes + 16.0 * 1024 * (5 + static_cast<double>(d.optimizer_state.size()));
}

// A full file system is the usual cause and has a plain remedy; HDF5's own account of a failure is a long stack.
std::string why_write_failed(const std::exception& e) {
  if (const auto* full = dynamic_cast<const DiskSpaceError*>(&e))
    return fmt::format("{}; free space there, or move run.dir elsewhere (its checkpoints/ folder with it) and --resume "
                       "from there",
                       full->what());
  std::string text = e.what();
  if (text.size() > 400) text = text.substr(0, 400) + "...";
  return text;
}

// "'name' holds N non-finite (NaN/Inf) values of M", or "" when every value is finite.
std::string non_finite_values(const std::string& name, const std::vector<float>& values) {
  const auto bad = std::count_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  return bad > 0 ? fmt::format("'{}' holds {} non-finite (NaN/Inf) values of {}", name, bad, values.size()) : "";
}

// The optimizer's name and arrays; a file written before they were recorded holds SGD's "velocity".
void read_optimizer_state(hid_t file, CheckpointData& d, bool crc) {
  const bool recorded = h5::has_attribute(file, "optimizer");
  d.optimizer = recorded ? h5::read_string_attribute(file, "optimizer") : "sgd";
  const std::vector<std::string> names =
      recorded ? split_lines(h5::read_string_attribute(file, "optimizer_state")) : std::vector<std::string>{"velocity"};
  d.optimizer_state.clear();
  for (const std::string& name : names) d.optimizer_state.push_back({name, read_array<float>(file, name.c_str(), crc)});
}

// Where the run stood: epoch, step, world, seed and the statistics' count ("position"), its time and samples.
void read_position(hid_t file, CheckpointData& d, bool crc) {
  const auto pos = read_array<int64_t>(file, "position", crc);
  const auto timing = read_array<double>(file, "timing", crc);
  if (pos.size() != 8 || timing.size() != 2) throw CheckpointError("position or timing has the wrong length");
  d.epoch = pos[0], d.step_in_epoch = pos[1], d.global_step = pos[2], d.steps_per_epoch = pos[3];
  d.ranks = pos[4], d.global_batch = pos[5], d.state_count = pos[7];
  std::memcpy(&d.seed, &pos[6], sizeof d.seed);
  d.train_time_s = timing[0], d.train_samples = timing[1];
}

// The optional arrays of a run inside an epoch and of fp16: the interrupted epoch's training totals and its steps'
// gradient norms and skips, the loss scale with its counts (two or three values from an older ringtrain, which
// counted no skipped steps, or none in a row; more from a newer one); the optimizer's updates.
void read_run_totals(hid_t file, CheckpointData& d, bool crc) {
  if (H5_CHECK(H5Lexists(file, "epoch_train", H5P_DEFAULT)) > 0) {
    const auto so_far = read_array<double>(file, "epoch_train", crc);
    if (so_far.size() != 3 || !std::all_of(so_far.begin(), so_far.end(), [](double v) { return std::isfinite(v) && v >= 0; }))
      throw CheckpointError("its epoch_train array is not three finite totals of at least 0");
    d.epoch_train.loss_sum = so_far[0], d.epoch_train.correct = so_far[1], d.epoch_train.samples = so_far[2];
    d.epoch_train.known = true;
  }
  // The epoch's clipped-step norms and skipped steps, absent where an older ringtrain wrote the file; values past the
  // four read here (a newer ringtrain's) are left unread.
  if (H5_CHECK(H5Lexists(file, "epoch_train_steps", H5P_DEFAULT)) > 0) {
    const auto steps = read_array<double>(file, "epoch_train_steps", crc);
    const bool counts = steps.size() >= 4 && std::all_of(steps.begin(), steps.begin() + 4, [](double v) {
                          return std::isfinite(v) && v >= 0 && v <= 1e18;
                        });
    if (!counts || steps[1] > steps[0])
      throw CheckpointError("its epoch_train_steps array is not a gradient-norm sum, its largest term (no more than "
                            "the sum), and step counts, each finite and at least 0");
    d.epoch_train.grad_norm_sum = steps[0], d.epoch_train.grad_norm_max = steps[1];
    d.epoch_train.grad_norm_steps = static_cast<int64_t>(steps[2]);
    d.epoch_train.skipped_steps = static_cast<int64_t>(steps[3]);
  }
  if (H5_CHECK(H5Lexists(file, "loss_scale", H5P_DEFAULT)) > 0) {
    const auto scaling = read_array<double>(file, "loss_scale", crc);
    // Values past the four read here (a newer ringtrain's) are left unread, so that adding one breaks no reader.
    const bool counts = std::all_of(scaling.begin() + std::min<std::ptrdiff_t>(1, std::ssize(scaling)), scaling.end(),
                                    [](double v) { return v >= 0 && v <= 1e18; });
    if (scaling.size() < 2 || !(scaling[0] > 0) || !std::isfinite(scaling[0]) || !counts ||
        (scaling.size() >= 4 && scaling[3] > scaling[2]))
      throw CheckpointError("its loss_scale array is not a positive scale and step counts of at least 0 (of which "
                            "the skips in a row are no more than the skipped steps)");
    d.loss_scale = scaling[0], d.loss_scale_finite_in_a_row = static_cast<int64_t>(scaling[1]);
    if (scaling.size() >= 3) d.loss_scale_skipped_steps = static_cast<int64_t>(scaling[2]);
    if (scaling.size() >= 4) d.loss_scale_skips_in_a_row = static_cast<int64_t>(scaling[3]);
  }
  if (H5_CHECK(H5Lexists(file, "sample_shape", H5P_DEFAULT)) > 0) {
    d.sample_shape = read_array<int64_t>(file, "sample_shape", crc);
    if (d.sample_shape.size() != 3 || std::any_of(d.sample_shape.begin(), d.sample_shape.end(), [](int64_t v) {
          return v < 1 || v > (int64_t{1} << 20);
        }))
      throw CheckpointError("its sample_shape array is not three sizes (C, H, W) of at least 1");
  }
  if (H5_CHECK(H5Lexists(file, "optimizer_updates", H5P_DEFAULT)) > 0) {
    const auto updates = read_array<int64_t>(file, "optimizer_updates", crc);
    if (updates.size() != 1 || updates[0] < 0) throw CheckpointError("its optimizer_updates array is not one count of at least 0");
    d.optimizer_updates = updates[0];
  } else {
    d.optimizer_updates = std::max<int64_t>(d.global_step - d.loss_scale_skipped_steps, 0);
  }
}

// Arrays that disagree in length, or hold NaN/Inf, are a damaged file.
void refuse_inconsistent(const CheckpointData& d) {
  const bool state_fits = std::all_of(d.optimizer_state.begin(), d.optimizer_state.end(),
                                      [&](const NamedArray& a) { return a.values.size() == d.params.size(); });
  const bool ema_fits = d.ema_params.empty() || d.ema_params.size() == d.params.size();
  if (!state_fits || !ema_fits || d.tensor_names.size() != d.tensor_sizes.size() || d.ranks < 1 ||
      d.states.size() != static_cast<size_t>(d.ranks * d.state_count))
    throw CheckpointError("its arrays disagree in length");
  // Resuming from NaN/Inf would only fail a step later as a "non-finite loss" that blames the optimizer.
  if (const std::string bad = non_finite_array(d); !bad.empty()) throw CheckpointError(bad);
}

}  // namespace

std::string non_finite_array(const CheckpointData& d) {
  if (std::string bad = non_finite_values("params", d.params); !bad.empty()) return bad;
  for (const NamedArray& a : d.optimizer_state)
    if (std::string bad = non_finite_values(a.name, a.values); !bad.empty()) return bad;
  if (std::string bad = non_finite_values("ema_params", d.ema_params); !bad.empty()) return bad;
  return non_finite_values("states", d.states);
}

std::string checkpoint_name(int64_t global_step) { return fmt::format("ckpt-s{:09}.h5", global_step); }

int64_t checkpoint_number(const fs::path& path) {
  const std::string name = path.filename().string();
  if (!name.starts_with("ckpt-s") || !name.ends_with(".h5")) return -1;
  int64_t number = -1;
  const char* const digits_end = name.data() + name.size() - 3;
  const auto [end, error] = std::from_chars(name.data() + 6, digits_end, number);
  if (error != std::errc{} || end != digits_end || number < 0) return -1;
  // Only the name ringtrain writes for that step: a copy with an extra leading zero would otherwise sort as the
  // newest, be resumed from and make the cleanup delete the real newest ones.
  return name == checkpoint_name(number) ? number : -1;
}

bool is_checkpoint_name(const std::string& name) { return checkpoint_number(name) >= 0; }

void write_checkpoint(const fs::path& path, const CheckpointData& d) {
  const fs::path tmp = path.string() + ".tmp";
  try {
    {
      Hdf5Lock lock;
      H5WriteFile file(tmp, checkpoint_bytes(d));
      write_array(file.id(), "params", d.params);
      std::vector<std::string> state_names;
      for (const NamedArray& a : d.optimizer_state) {
        write_array(file.id(), a.name.c_str(), a.values);
        state_names.push_back(a.name);
      }
      if (!d.ema_params.empty()) write_array(file.id(), "ema_params", d.ema_params);
      write_array(file.id(), "states", d.states);
      write_array(file.id(), "tensor_sizes", d.tensor_sizes);
      int64_t seed_bits = 0;
      std::memcpy(&seed_bits, &d.seed, sizeof seed_bits);
      write_array(file.id(), "position", std::vector<int64_t>{d.epoch, d.step_in_epoch, d.global_step, d.steps_per_epoch,
                                                              d.ranks, d.global_batch, seed_bits, d.state_count});
      write_array(file.id(), "timing", std::vector<double>{d.train_time_s, d.train_samples});
      write_array(file.id(), "optimizer_updates", std::vector<int64_t>{d.optimizer_updates});
      if (!d.sample_shape.empty()) write_array(file.id(), "sample_shape", d.sample_shape);
      // Two arrays: a reader from before the second refuses an epoch_train of any length but three.
      if (const EpochTrainSoFar& e = d.epoch_train; e.known) {
        write_array(file.id(), "epoch_train", std::vector<double>{e.loss_sum, e.correct, e.samples});
        write_array(file.id(), "epoch_train_steps",
                    std::vector<double>{e.grad_norm_sum, e.grad_norm_max, static_cast<double>(e.grad_norm_steps),
                                        static_cast<double>(e.skipped_steps)});
      }
      if (d.loss_scale > 0)
        write_array(file.id(), "loss_scale",
                    std::vector<double>{d.loss_scale, static_cast<double>(d.loss_scale_finite_in_a_row),
                                        static_cast<double>(d.loss_scale_skipped_steps),
                                        static_cast<double>(d.loss_scale_skips_in_a_row)});
      h5::write_string_attribute(file.id(), "format", kFormat);
      h5::write_string_attribute(file.id(), "run_id", d.run_id);
      h5::write_string_attribute(file.id(), "optimizer", d.optimizer);
      h5::write_string_attribute(file.id(), "optimizer_state", join_lines(state_names));
      h5::write_string_attribute(file.id(), "tensor_names", join_lines(d.tensor_names));
      h5::write_string_attribute(file.id(), "job_toml", d.job_toml);
      h5::write_string_attribute(file.id(), "versions_json", d.versions_json);
      detail::mark_file_checksummed(file.id());
      file.commit();
    }
    fs::rename(tmp, path);
    sync_folder(path.parent_path().empty() ? fs::path(".") : path.parent_path());
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw CheckpointError(fmt::format("writing checkpoint '{}' failed: {}; the previous checkpoints are untouched",
                                      path.string(), why_write_failed(e)));
  }
}

namespace {

// A file the user may not read is not damaged: moving it out would drop what may be the newest good checkpoint, so
// it is refused here with its own remedy. The probe says what else the path is.
PathProbe probe_checkpoint(const fs::path& path) {
  PathProbe probe = probe_path(path);
  const std::string unreadable = probe.kind == PathProbe::Kind::unreachable ? probe.reason
                                 : probe.kind == PathProbe::Kind::regular   ? unreadable_reason(path)
                                                                            : "";
  if (!unreadable.empty())
    throw CheckpointError(fmt::format("checkpoint '{}' cannot be read: {}; the file may well be intact: give the user "
                                      "that runs ringtrain read permission on it and its folders (chmod, chown, or run "
                                      "as the user that wrote it), then try again",
                                      path.string(), unreadable));
  return probe;
}

// Only a regular file is opened: a FIFO named like a checkpoint would block the open for ever.
void refuse_other_than_a_file(const PathProbe& probe) {
  if (probe.kind != PathProbe::Kind::regular)
    throw CheckpointError(probe.kind == PathProbe::Kind::missing ? "no such file" : "it " + probe.describe());
}

}  // namespace

CheckpointData read_checkpoint(const fs::path& path, CheckpointUse use) {
  // The way out of any unusable checkpoint: the one before it, which --resume takes once this one is moved.
  const std::string folder = path.parent_path().empty() ? std::string(".") : path.parent_path().string();
  const std::string fallback =
      use == CheckpointUse::newest_in_folder
          ? fmt::format("move it out of '{}' and --resume (or evaluate) takes the newest one left (run.keep_checkpoints "
                        "keeps several), or start again without --resume",
                        folder)
          : fmt::format("name another checkpoint: a run keeps its last run.keep_checkpoints in its checkpoints folder "
                        "(here '{}')",
                        folder);
  const PathProbe probe = probe_checkpoint(path);
  try {
    refuse_other_than_a_file(probe);
    Hdf5Lock lock;
    if (H5_CHECK(H5Fis_hdf5(path.c_str())) <= 0) throw CheckpointError("not an HDF5 file (truncated or corrupt?)");
    H5File file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
    if (!h5::has_attribute(file.id(), "format") || h5::read_string_attribute(file.id(), "format") != kFormat)
      throw CheckpointError(fmt::format("not a {} file", kFormat));
    CheckpointData d;
    const bool crc = detail::file_says_checksummed(file.id());
    d.crc_verified = crc;
    d.params = read_array<float>(file.id(), "params", crc);
    read_optimizer_state(file.id(), d, crc);
    if (H5_CHECK(H5Lexists(file.id(), "ema_params", H5P_DEFAULT)) > 0)
      d.ema_params = read_array<float>(file.id(), "ema_params", crc);
    d.states = read_array<float>(file.id(), "states", crc);
    d.tensor_sizes = read_array<int64_t>(file.id(), "tensor_sizes", crc);
    read_position(file.id(), d, crc);
    read_run_totals(file.id(), d, crc);
    d.tensor_names = split_lines(h5::read_string_attribute(file.id(), "tensor_names"));
    if (h5::has_attribute(file.id(), "run_id")) d.run_id = h5::read_string_attribute(file.id(), "run_id");
    d.job_toml = h5::read_string_attribute(file.id(), "job_toml");
    d.versions_json = h5::read_string_attribute(file.id(), "versions_json");
    refuse_inconsistent(d);
    return d;
  } catch (const CheckpointError& e) {
    throw CheckpointError(fmt::format("checkpoint '{}' cannot be used: {}\n  {}", path.string(), e.what(), fallback));
  } catch (const std::exception& e) {  // HDF5 itself failed: the file is damaged (its metadata fails a checksum, ...)
    throw CheckpointError(
        fmt::format("checkpoint '{}' cannot be used, the file is damaged: {}\n  {}", path.string(), e.what(), fallback));
  }
}

CheckpointWorld read_checkpoint_world(const fs::path& path) {
  const PathProbe probe = probe_checkpoint(path);
  try {
    refuse_other_than_a_file(probe);
    Hdf5Lock lock;
    H5File file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
    const auto pos = read_array<int64_t>(file.id(), "position", detail::file_says_checksummed(file.id()));
    if (pos.size() != 8 || pos[4] < 1) throw CheckpointError("its position array is not one");
    return {pos[4], pos[5], pos[2],
            h5::has_attribute(file.id(), "job_toml") ? h5::read_string_attribute(file.id(), "job_toml") : ""};
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("checkpoint '{}' cannot be used: {}; --resume reads the newest checkpoint, "
                                      "so move it out of '{}' to fall back to the one before",
                                      path.string(), e.what(), path.parent_path().string()));
  }
}

std::vector<fs::path> list_checkpoints(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  fs::directory_iterator entries(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return found;
  for (; !ec && entries != fs::directory_iterator(); entries.increment(ec))
    if (is_checkpoint_name(entries->path().filename().string())) found.push_back(entries->path());
  if (ec) throw CheckpointError(fmt::format("checkpoint folder '{}' cannot be read: {}", dir.string(), ec.message()));
  std::sort(found.begin(), found.end(),
            [](const fs::path& a, const fs::path& b) { return checkpoint_number(a) < checkpoint_number(b); });
  return found;
}

}  // namespace ringtrain::io
