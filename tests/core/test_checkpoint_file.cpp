// Proves the checkpoint file: every field round-trips exactly, the write is atomic (no temporary file left,
// an existing checkpoint survives a failed write), a truncated or foreign file is a CheckpointError that
// names it, and damage no HDF5 checksum sees (the chunk index, the array's bytes) is one that names the array.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "io/checkpoint_file.h"
#include "train/start_point.h"

namespace fs = std::filesystem;
using namespace ringtrain;

namespace {

io::CheckpointData sample() {
  io::CheckpointData d;
  d.epoch = 3, d.step_in_epoch = 17, d.global_step = 3 * 40 + 17, d.steps_per_epoch = 40;
  d.ranks = 2, d.global_batch = 128, d.seed = 0xfedcba9876543210ull;
  d.train_time_s = 12.5, d.train_samples = 19456;
  d.optimizer_updates = 101;  // not the global step: a run re-planned on another world, or fp16's skipped steps
  d.tensor_names = {"conv.weight", "bn.gamma", "bn.beta"};
  d.tensor_sizes = {6, 2, 2};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  d.optimizer = "sgd";
  d.optimizer_state = {{"velocity", {}}};
  for (int i = 0; i < 10; ++i) d.params.push_back(normal(rng)), d.optimizer_state[0].values.push_back(normal(rng));
  d.state_count = 4;
  for (int i = 0; i < 8; ++i) d.states.push_back(normal(rng));
  d.run_id = "20261124T120000Z-0a1b2c3d";
  d.job_toml = "[train]\nepochs = 5\n";
  d.versions_json = R"({"HDF5":"1.10.8"})";
  return d;
}

// A fresh folder under the system temp dir for one test, removed when the test ends (also after a failed ASSERT).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// read_checkpoint(path) must throw a CheckpointError whose message holds every one of `parts`.
void expect_checkpoint_error(const fs::path& path, const std::vector<std::string>& parts) {
  try {
    (void)io::read_checkpoint(path);
    ADD_FAILURE() << "expected a CheckpointError for " << path;
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' in: " << message;
  }
}

// Replaces the array `name` of the checkpoint at `path` with `values`, without the CRCs, as an older ringtrain wrote
// arrays of other lengths.
void as_an_older_ringtrain_wrote(const fs::path& path, const char* name, const std::vector<double>& values) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_GE(H5Ldelete(file, name, H5P_DEFAULT), 0);
  const hsize_t count = values.size();
  const hid_t space = H5Screate_simple(1, &count, nullptr);
  const hid_t set = H5Dcreate2(file, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  H5Dclose(set);
  H5Sclose(space);
  EXPECT_GE(H5Adelete(file, "array_checksums"), 0);  // no CRCs to check
  H5Fclose(file);
}

}  // namespace

TEST(CheckpointFile, EveryFieldRoundTripsExactly) {
  const ScratchDir scratch("rt-ckpt");
  const fs::path& dir = scratch.path();
  const auto d = sample();
  const fs::path path = dir / io::checkpoint_name(d.global_step);
  io::write_checkpoint(path, d);
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  const auto r = io::read_checkpoint(path);
  EXPECT_EQ(r.epoch, d.epoch);
  EXPECT_EQ(r.step_in_epoch, d.step_in_epoch);
  EXPECT_EQ(r.global_step, d.global_step);
  EXPECT_EQ(r.steps_per_epoch, d.steps_per_epoch);
  EXPECT_EQ(r.ranks, d.ranks);
  EXPECT_EQ(r.global_batch, d.global_batch);
  EXPECT_EQ(r.seed, d.seed);
  EXPECT_EQ(r.train_time_s, d.train_time_s);
  EXPECT_EQ(r.train_samples, d.train_samples);
  EXPECT_EQ(r.optimizer_updates, d.optimizer_updates);
  EXPECT_EQ(r.tensor_names, d.tensor_names);
  EXPECT_EQ(r.tensor_sizes, d.tensor_sizes);
  EXPECT_EQ(r.params, d.params);  // bit-exact: resume must be bit-identical
  EXPECT_EQ(r.optimizer, d.optimizer);
  ASSERT_EQ(r.optimizer_state.size(), 1u);
  EXPECT_EQ(r.optimizer_state[0].name, "velocity");
  EXPECT_EQ(r.optimizer_state[0].values, d.optimizer_state[0].values);
  EXPECT_EQ(r.states, d.states);
  EXPECT_EQ(r.state_count, d.state_count);
  EXPECT_EQ(r.run_id, d.run_id);
  EXPECT_EQ(r.job_toml, d.job_toml);
  EXPECT_EQ(r.versions_json, d.versions_json);
}

// train.ema_decay's average comes back bit for bit where the run kept one, and is absent (not zeros) where not;
// choose_weights puts it in the parameters' place for --weights ema, and refuses with exit 3 where there is none.
TEST(CheckpointFile, TheWeightsAverageRoundTripsAndIsOptional) {
  const ScratchDir scratch("rt-ckpt-ema");
  io::CheckpointData d = sample();
  const fs::path plain = scratch.path() / io::checkpoint_name(1), averaged = scratch.path() / io::checkpoint_name(2);
  io::write_checkpoint(plain, d);
  for (const float p : d.params) d.ema_params.push_back(p * 0.5f + 0.125f);
  io::write_checkpoint(averaged, d);
  io::CheckpointData r = io::read_checkpoint(averaged);
  EXPECT_EQ(r.ema_params, d.ema_params);
  train::choose_weights(r, averaged, train::Weights::ema);
  EXPECT_EQ(r.params, d.ema_params);
  io::CheckpointData without = io::read_checkpoint(plain);
  EXPECT_TRUE(without.ema_params.empty());
  train::choose_weights(without, plain, train::Weights::params);
  EXPECT_EQ(without.params, d.params);
  try {
    train::choose_weights(without, plain, train::Weights::ema);
    ADD_FAILURE() << "a checkpoint without an average was taken for --weights ema";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::job_file);
    EXPECT_NE(std::string(e.what()).find("holds no moving average"), std::string::npos) << e.what();
  }
}

// An optimizer's state is whatever arrays it names: AdamW's two moments come back by name, in order.
TEST(CheckpointFile, AnOptimizersArraysRoundTripByName) {
  const ScratchDir scratch("rt-ckpt-adamw");
  io::CheckpointData d = sample();
  d.optimizer = "adamw";
  d.optimizer_state = {{"adam_m", std::vector<float>(10, 0.5f)}, {"adam_v", std::vector<float>(10, 0.125f)}};
  const fs::path path = scratch.path() / io::checkpoint_name(3);
  io::write_checkpoint(path, d);
  const io::CheckpointData r = io::read_checkpoint(path);
  EXPECT_EQ(r.optimizer, "adamw");
  ASSERT_EQ(r.optimizer_state.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.optimizer_state[i].name, d.optimizer_state[i].name);
    EXPECT_EQ(r.optimizer_state[i].values, d.optimizer_state[i].values);
  }
}

// fp16's loss scale travels with the checkpoint, so a resumed run scales as the uninterrupted one would; a run
// without loss scaling stores none and reads back 0.
TEST(CheckpointFile, TheLossScaleRoundTripsAndIsAbsentWithoutOne) {
  const ScratchDir scratch("rt-ckpt-loss-scale");
  io::CheckpointData d = sample();
  d.loss_scale = 0x1p13, d.loss_scale_finite_in_a_row = 0, d.loss_scale_skipped_steps = 17;
  d.loss_scale_skips_in_a_row = 3;
  const fs::path scaled = scratch.path() / io::checkpoint_name(3);
  io::write_checkpoint(scaled, d);
  const io::CheckpointData r = io::read_checkpoint(scaled);
  EXPECT_EQ(r.loss_scale, 0x1p13);
  EXPECT_EQ(r.loss_scale_finite_in_a_row, 0);
  EXPECT_EQ(r.loss_scale_skipped_steps, 17);
  EXPECT_EQ(r.loss_scale_skips_in_a_row, 3);
  const fs::path unscaled = scratch.path() / io::checkpoint_name(4);
  io::write_checkpoint(unscaled, sample());
  const io::CheckpointData u = io::read_checkpoint(unscaled);
  EXPECT_EQ(u.loss_scale, 0.0);
  EXPECT_EQ(u.loss_scale_finite_in_a_row, 0);
}

// The loss_scale array of an older ringtrain (two or three values) reads with the counts it lacks at 0, and a newer
// one's values past the four read here are left unread; skips in a row past the skipped steps are refused.
TEST(CheckpointFile, LossScaleArraysOfOtherLengthsReadWhatTheyHold) {
  const ScratchDir scratch("rt-ckpt-loss-scale-lengths");
  io::CheckpointData d = sample();
  d.loss_scale = 0x1p13;
  const fs::path path = scratch.path() / io::checkpoint_name(5);
  const auto with_loss_scale = [&](std::vector<double> values) {
    io::write_checkpoint(path, d);
    as_an_older_ringtrain_wrote(path, "loss_scale", values);
    return io::read_checkpoint(path, io::CheckpointUse::named);
  };
  const io::CheckpointData two = with_loss_scale({0x1p10, 7});
  EXPECT_EQ(two.loss_scale, 0x1p10);
  EXPECT_EQ(two.loss_scale_finite_in_a_row, 7);
  EXPECT_EQ(two.loss_scale_skipped_steps, 0);
  EXPECT_EQ(two.loss_scale_skips_in_a_row, 0);
  const io::CheckpointData three = with_loss_scale({0x1p10, 0, 5});
  EXPECT_EQ(three.loss_scale_skipped_steps, 5);
  EXPECT_EQ(three.loss_scale_skips_in_a_row, 0);
  const io::CheckpointData five = with_loss_scale({0x1p10, 0, 5, 2, 99});
  EXPECT_EQ(five.loss_scale_skips_in_a_row, 2);
  EXPECT_THROW(with_loss_scale({0x1p10, 0, 5, 6}), CheckpointError);
  EXPECT_THROW(with_loss_scale({0x1p10}), CheckpointError);
}

// A file without the optimizer's update count (an older ringtrain, which never changed it apart from the steps)
// reads back the count that ringtrain used: the global step less fp16's skipped steps.
TEST(CheckpointFile, AFileWithoutTheUpdateCountReadsTheStepsLessTheSkippedOnes) {
  const ScratchDir scratch("rt-ckpt-updates");
  io::CheckpointData d = sample();
  d.loss_scale = 0x1p13, d.loss_scale_skipped_steps = 17;
  const fs::path path = scratch.path() / io::checkpoint_name(4);
  io::write_checkpoint(path, d);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    EXPECT_GE(H5Ldelete(file, "optimizer_updates", H5P_DEFAULT), 0);
    H5Fclose(file);
  }
  EXPECT_EQ(io::read_checkpoint(path).optimizer_updates, d.global_step - 17);
}

// An interrupted epoch's training totals, gradient norms and skipped steps come back as written; a file without
// them (an older ringtrain) says so, and one with the totals alone (an older one's) reads the rest as 0. The totals
// stay three values, which is all a reader from before the norms takes; counts past 1e18 are refused.
TEST(CheckpointFile, TheInterruptedEpochsTotalsRoundTripAndAreKnownOnlyWhereStored) {
  const ScratchDir scratch("rt-ckpt-epoch-train");
  io::CheckpointData d = sample();
  d.epoch_train.loss_sum = 1234.5625, d.epoch_train.correct = 871, d.epoch_train.samples = 1088;
  d.epoch_train.grad_norm_sum = 17.25, d.epoch_train.grad_norm_max = 3.5, d.epoch_train.grad_norm_steps = 9;
  d.epoch_train.skipped_steps = 2, d.epoch_train.known = true;
  const fs::path with = scratch.path() / io::checkpoint_name(3);
  io::write_checkpoint(with, d);
  const io::EpochTrainSoFar r = io::read_checkpoint(with).epoch_train;
  EXPECT_TRUE(r.known);
  EXPECT_EQ(r.loss_sum, 1234.5625);
  EXPECT_EQ(r.correct, 871);
  EXPECT_EQ(r.samples, 1088);
  EXPECT_EQ(r.grad_norm_sum, 17.25);
  EXPECT_EQ(r.grad_norm_max, 3.5);
  EXPECT_EQ(r.grad_norm_steps, 9);
  EXPECT_EQ(r.skipped_steps, 2);
  const fs::path without = scratch.path() / io::checkpoint_name(4);
  io::write_checkpoint(without, sample());
  EXPECT_FALSE(io::read_checkpoint(without).epoch_train.known);

  {
    const hid_t file = H5Fopen(with.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hid_t set = H5Dopen2(file, "epoch_train", H5P_DEFAULT);
    const hid_t space = H5Dget_space(set);
    EXPECT_EQ(H5Sget_simple_extent_npoints(space), 3);
    H5Sclose(space);
    H5Dclose(set);
    H5Fclose(file);
  }

  const fs::path older = scratch.path() / io::checkpoint_name(5);
  io::write_checkpoint(older, d);
  {
    const hid_t file = H5Fopen(older.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    EXPECT_GE(H5Ldelete(file, "epoch_train_steps", H5P_DEFAULT), 0);
    EXPECT_GE(H5Adelete(file, "array_checksums"), 0);  // as an older ringtrain wrote it: no CRCs to check
    H5Fclose(file);
  }
  const io::EpochTrainSoFar o = io::read_checkpoint(older, io::CheckpointUse::named).epoch_train;
  EXPECT_TRUE(o.known);
  EXPECT_EQ(o.samples, 1088);
  EXPECT_EQ(o.grad_norm_steps, 0);
  EXPECT_EQ(o.skipped_steps, 0);

  const fs::path hostile = scratch.path() / io::checkpoint_name(6);
  io::write_checkpoint(hostile, d);
  as_an_older_ringtrain_wrote(hostile, "epoch_train_steps", {17.25, 3.5, 1e30, 2});
  EXPECT_THROW(io::read_checkpoint(hostile, io::CheckpointUse::named), CheckpointError);
  io::write_checkpoint(hostile, d);
  as_an_older_ringtrain_wrote(hostile, "epoch_train_steps", {17.25, 30, 9, 2});  // a largest term over the sum
  EXPECT_THROW(io::read_checkpoint(hostile, io::CheckpointUse::named), CheckpointError);
}

// Checkpoints written before the optimizer was recorded have no "optimizer" attributes and SGD's momentum in
// "velocity": they read back as SGD, so runs that old still resume.
TEST(CheckpointFile, AFileWithoutOptimizerAttributesIsSgdWithItsVelocity) {
  const ScratchDir scratch("rt-ckpt-old");
  const io::CheckpointData d = sample();
  const fs::path path = scratch.path() / io::checkpoint_name(4);
  io::write_checkpoint(path, d);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    EXPECT_GE(H5Adelete(file, "optimizer"), 0);
    EXPECT_GE(H5Adelete(file, "optimizer_state"), 0);
    H5Fclose(file);
  }
  const io::CheckpointData r = io::read_checkpoint(path);
  EXPECT_EQ(r.optimizer, "sgd");
  ASSERT_EQ(r.optimizer_state.size(), 1u);
  EXPECT_EQ(r.optimizer_state[0].name, "velocity");
  EXPECT_EQ(r.optimizer_state[0].values, d.optimizer_state[0].values);
}

// A file whose format says every array carries its CRC-32C refuses one that has lost it (a damaged or edited file),
// where a file of an older ringtrain, without the mark, is read on its Fletcher-32 checksums alone.
TEST(CheckpointFile, AnArrayThatLostItsCrcIsRefusedWhereTheFileSaysItHadOne) {
  const ScratchDir scratch("rt-ckpt-crc");
  const fs::path path = scratch.path() / io::checkpoint_name(5);
  io::write_checkpoint(path, sample());
  EXPECT_TRUE(io::read_checkpoint(path).crc_verified);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hid_t params = H5Dopen2(file, "params", H5P_DEFAULT);
    EXPECT_GE(H5Adelete(params, "crc32c"), 0);
    H5Dclose(params);
    H5Fclose(file);
  }
  expect_checkpoint_error(path, {path.string(), "array 'params' has lost its CRC-32C", "move it out of"});
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    EXPECT_GE(H5Adelete(file, "array_checksums"), 0);  // as an older ringtrain wrote it: no mark, no CRCs
    H5Fclose(file);
  }
  EXPECT_FALSE(io::read_checkpoint(path).crc_verified);
}

// The number a checkpoint's name carries: what the checkpointer continues from after a resume.
TEST(CheckpointFile, ANameGivesBackItsNumber) {
  EXPECT_EQ(io::checkpoint_number(io::checkpoint_name(41)), 41);
  EXPECT_EQ(io::checkpoint_number(fs::path("run/checkpoints") / io::checkpoint_name(1234567890123)), 1234567890123);
  EXPECT_EQ(io::checkpoint_number("ckpt-s1234567890123456789012345.h5"), -1);  // past int64_t
}

TEST(CheckpointFile, ListsNewestLastAndIgnoresTemporaries) {
  const ScratchDir scratch("rt-ckpt-list");
  const fs::path& dir = scratch.path();
  auto d = sample();
  for (int64_t step : {900, 20, 1000}) io::write_checkpoint(dir / io::checkpoint_name(step), d);
  std::ofstream(dir / (io::checkpoint_name(5000) + ".tmp")) << "half";
  // Names that only start like a checkpoint are not one.
  for (const char* stray : {"ckpt-s000009999-old.h5", "ckpt-s000009999.h5.bak", "ckpt-s00000999x.h5", "ckpt-s.h5",
                            "ckpt-s00009999.h5", "ckpt-s0000000016.h5", "ckpt-s99999999999999999999.h5", "ckpt-s-00000001.h5"})
    std::ofstream(dir / stray) << "stray";
  const auto found = io::list_checkpoints(dir);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found.front().filename(), io::checkpoint_name(20));
  EXPECT_EQ(found.back().filename(), io::checkpoint_name(1000));
  // Past 9 digits the names grow, and still sort by step.
  io::write_checkpoint(dir / io::checkpoint_name(1'000'000'000), d);
  EXPECT_EQ(io::list_checkpoints(dir).back().filename(), "ckpt-s1000000000.h5");
}

// Every byte of the parameter and momentum data is covered: a flip anywhere in them is an error naming the array.
TEST(CheckpointFile, AFlippedDataByteIsRefusedNamingTheArray) {
  const ScratchDir scratch("rt-ckpt-data");
  const fs::path& dir = scratch.path();
  auto d = sample();
  d.params.assign(5000, 0.25f), d.optimizer_state[0].values.assign(5000, -0.5f), d.tensor_sizes = {4996, 2, 2};
  const fs::path path = dir / io::checkpoint_name(7);
  io::write_checkpoint(path, d);
  std::string bytes(static_cast<size_t>(fs::file_size(path)), '\0');
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  // The arrays' stored bytes are the runs of their repeated values.
  for (const auto& [name, value] : {std::pair{"params", 0.25f}, {"velocity", -0.5f}}) {
    std::string pattern(64, '\0');
    for (size_t i = 0; i < pattern.size(); i += 4) std::memcpy(pattern.data() + i, &value, 4);
    const size_t at = bytes.find(pattern);
    ASSERT_NE(at, std::string::npos) << name;
    for (const size_t offset : {at + 3, at + 1000, at + 19990}) {
      std::string flipped = bytes;
      flipped[offset] = static_cast<char>(flipped[offset] ^ 0x01);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << flipped;
      expect_checkpoint_error(path, {path.string(), std::string("array '") + name + "' fails its checksum",
                                     "move it out of '" + dir.string() + "'"});
    }
  }
}

TEST(CheckpointFile, TruncatedOrForeignFilesAreNamedCheckpointErrors) {
  const ScratchDir scratch("rt-ckpt-bad");
  const fs::path& dir = scratch.path();
  const fs::path good = dir / "good.h5";
  io::write_checkpoint(good, sample());
  const fs::path truncated = dir / "truncated.h5";
  fs::copy_file(good, truncated);
  fs::resize_file(truncated, fs::file_size(good) / 3);
  const fs::path text = dir / "text.h5";
  std::ofstream(text) << "not a checkpoint";
  for (const fs::path& bad : {truncated, text, dir / "missing.h5"}) expect_checkpoint_error(bad, {bad.string()});
}

// The elastic restart's early look (train/on_shrink.cpp): the world a checkpoint was written on, read alone; an
// unreadable file is a CheckpointError naming it, as the whole read would be, and a FIFO named like a checkpoint is
// refused without being opened (an open would wait for a writer for ever).
TEST(CheckpointFile, ItsWorldIsReadAloneAndAnUnreadableFileIsNamed) {
  const ScratchDir scratch("rt-ckpt-world");
  const auto d = sample();
  const fs::path good = scratch.path() / io::checkpoint_name(d.global_step);
  io::write_checkpoint(good, d);
  const io::CheckpointWorld world = io::read_checkpoint_world(good);
  EXPECT_EQ(world.ranks, d.ranks);
  EXPECT_EQ(world.global_batch, d.global_batch);
  EXPECT_EQ(world.global_step, d.global_step);
  const fs::path text = scratch.path() / "text.h5";
  std::ofstream(text) << "not a checkpoint";
  const fs::path fifo = scratch.path() / io::checkpoint_name(d.global_step + 1);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const fs::path& bad : {text, scratch.path() / "missing.h5", fifo}) {
    try {
      (void)io::read_checkpoint_world(bad);
      ADD_FAILURE() << "read the world of " << bad;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
    }
  }
}

// One byte flipped inside the root group's object header: the checksummed format (io/h5_file_format.h) makes
// HDF5 refuse it, and the message says the file is damaged and how to resume from the one before it.
TEST(CheckpointFile, AFlippedMetadataByteIsADamagedFileWithAWayOut) {
  const ScratchDir scratch("rt-ckpt-flip");
  const fs::path& dir = scratch.path();
  const fs::path path = dir / io::checkpoint_name(7);
  io::write_checkpoint(path, sample());
  std::string bytes(static_cast<size_t>(fs::file_size(path)), '\0');
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_GT(bytes.size(), 48u);
  ASSERT_EQ(bytes[8], 2) << "superblock version 2 expected (the 1.8 file format)";
  uint64_t root = 0;  // superblock v2: the root group's object header address, little-endian, at offset 36
  for (int i = 7; i >= 0; --i) root = root << 8 | static_cast<uint8_t>(bytes[36 + static_cast<size_t>(i)]);
  ASSERT_LT(root + 12, bytes.size());
  bytes[root + 12] = static_cast<char>(bytes[root + 12] ^ 0xFF);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  expect_checkpoint_error(path, {path.string(), "the file is damaged", "checksum", "move it out of '" + dir.string() + "'"});
}

TEST(CheckpointFile, NonFiniteValuesAreRefusedNamingTheArray) {
  const ScratchDir scratch("rt-ckpt-nan");
  const fs::path& dir = scratch.path();
  io::CheckpointData d = sample();
  d.optimizer_state[0].values[4] = std::numeric_limits<float>::infinity();
  d.optimizer_state[0].values[7] = std::numeric_limits<float>::quiet_NaN();
  const fs::path path = dir / "ckpt.h5";
  io::write_checkpoint(path, d);
  expect_checkpoint_error(path, {path.string(), "'velocity' holds 2 non-finite (NaN/Inf) values of 10"});
}

TEST(CheckpointFile, AFailedWriteLeavesTheExistingCheckpointAlone) {
  const ScratchDir scratch("rt-ckpt-fail");
  const fs::path& dir = scratch.path();
  const fs::path path = dir / io::checkpoint_name(7);
  io::write_checkpoint(path, sample());
  const auto before = fs::file_size(path);
  auto bad = sample();
  bad.tensor_names.clear();  // fine to write; what matters is a write that cannot happen:
  EXPECT_THROW(io::write_checkpoint(dir / "no-such-folder" / "x.h5", bad), CheckpointError);
  EXPECT_EQ(fs::file_size(path), before);
  EXPECT_EQ(io::read_checkpoint(path).global_step, sample().global_step);
}

namespace {

std::string file_bytes(const fs::path& path) {
  std::string bytes(static_cast<size_t>(fs::file_size(path)), '\0');
  std::ifstream(path, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

// The v1 B-tree nodes that index the chunks of a chunked dataset: signature "TREE", node type 1.
std::vector<size_t> chunk_index_nodes(const std::string& bytes) {
  std::vector<size_t> nodes;
  for (size_t at = bytes.find("TREE"); at != std::string::npos; at = bytes.find("TREE", at + 1))
    if (at + 4 < bytes.size() && bytes[at + 4] == 1) nodes.push_back(at);
  return nodes;
}

// The array a CheckpointError names, "" when it names none.
std::string named_array(const std::string& message) {
  const size_t at = message.find("array '");
  if (at == std::string::npos) return "";
  const size_t begin = at + 7;
  return message.substr(begin, message.find('\'', begin) - begin);
}

}  // namespace

// The chunk index has no checksum in the 1.8 format: a flipped bit there made HDF5 read a chunk as unallocated,
// i.e. as zeros with no error, and Fletcher-32 never ran. Flipping the entry count (+6, the probe's flip) or
// moving the first chunk's recorded offset (the first key's, +32..39, by 2^60 or by 256 elements) in every
// array's index node must be refused naming that array.
TEST(CheckpointFile, AChunkMissingFromItsIndexIsRefusedNamingTheArray) {
  const ScratchDir scratch("rt-ckpt-tree");
  const fs::path path = scratch.path() / io::checkpoint_name(7);
  io::write_checkpoint(path, sample());
  const std::string original = file_bytes(path);
  const std::vector<size_t> nodes = chunk_index_nodes(original);
  ASSERT_EQ(nodes.size(), 7u) << "one chunk-index node per non-empty array";
  std::set<std::string> named;
  for (const size_t node : nodes) {
    for (const auto& [offset, bit] : {std::pair<size_t, int>{6, 0x10}, {39, 0x10}, {33, 0x01}}) {
      std::string flipped = original;
      flipped[node + offset] = static_cast<char>(flipped[node + offset] ^ bit);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << flipped;
      try {
        (void)io::read_checkpoint(path);
        ADD_FAILURE() << "TREE at " << node << " +" << offset << " ^" << bit << " was read without an error";
      } catch (const CheckpointError& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("the file is damaged"), std::string::npos) << message;
        EXPECT_NE(message.find("move it out of '" + scratch.path().string() + "'"), std::string::npos) << message;
        EXPECT_FALSE(named_array(message).empty()) << message;
        named.insert(named_array(message));
      }
    }
  }
  EXPECT_EQ(named, (std::set<std::string>{"params", "velocity", "states", "tensor_sizes", "position", "timing", "optimizer_updates"}));
}

// Our CRC-32C, kept in each array's (checksummed) object header, is compared with the bytes read back.
TEST(CheckpointFile, AnArrayThatFailsItsCrcIsRefusedNamingIt) {
  const ScratchDir scratch("rt-ckpt-crc");
  const fs::path path = scratch.path() / io::checkpoint_name(7);
  io::write_checkpoint(path, sample());
  for (const char* name : {"params", "velocity", "position"}) {
    io::write_checkpoint(path, sample());
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
    const hid_t crc = H5Aopen(set, "crc32c", H5P_DEFAULT);
    ASSERT_GE(crc, 0) << name << " has no crc32c attribute";
    uint32_t value = 0;
    EXPECT_GE(H5Aread(crc, H5T_NATIVE_UINT32, &value), 0);
    value ^= 1;
    EXPECT_GE(H5Awrite(crc, H5T_NATIVE_UINT32, &value), 0);
    H5Aclose(crc), H5Dclose(set), H5Fclose(file);
    expect_checkpoint_error(path, {path.string(), std::string("array '") + name + "' fails its checksum (CRC-32C",
                                   "move it out of '" + scratch.path().string() + "'"});
  }
}

// Checkpoints of older ringtrains carry no CRC-32C: they still read (their chunks are still proven present).
TEST(CheckpointFile, AFileWithoutCrcAttributesStillReads) {
  const ScratchDir scratch("rt-ckpt-nocrc");
  const fs::path path = scratch.path() / io::checkpoint_name(7);
  io::write_checkpoint(path, sample());
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    for (const char* name : {"params", "velocity", "states", "tensor_sizes", "position", "timing"}) {
      const hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
      EXPECT_GE(H5Adelete(set, "crc32c"), 0) << name;
      H5Dclose(set);
    }
    EXPECT_GE(H5Adelete(file, "array_checksums"), 0);  // as older ringtrains wrote it: no CRCs, no mark
    H5Fclose(file);
  }
  const io::CheckpointData d = io::read_checkpoint(path);
  EXPECT_EQ(d.params, sample().params);
  EXPECT_FALSE(d.crc_verified);
}
