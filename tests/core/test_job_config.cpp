// Proves the job-file contract: required keys, types, ranges, unknown keys (with the valid ones listed),
// --set overrides, layer validation, and the resolved copy.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "config/job_config.h"
#include "infer/inference_keys.h"

namespace fs = std::filesystem;
using ringtrain::JobFileError;
using ringtrain::config::load_job;

namespace {

const char* kMinimal = R"(
[data]
train = "d/train"
test = "d/test"
[train]
epochs = 2
batch_per_rank = 8
[optimizer]
base_lr = 0.1
base_batch = 16
[[model.layers]]
type = "dense"
units = 10
[run]
dir = "runs/x"
)";

class JobConfigTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& text) {
    const fs::path p = fs::temp_directory_path() / ("rt_job_" + std::to_string(::getpid()) + "_" +
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".toml");
    std::ofstream(p) << text;
    files_.push_back(p);
    return p;
  }
  std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
    try {
      load_job(write(text), sets);
    } catch (const JobFileError& e) {
      return e.what();
    }
    return "";
  }
  void TearDown() override {
    for (const auto& f : files_) fs::remove(f);
  }
  std::vector<fs::path> files_;
};

TEST_F(JobConfigTest, MinimalJobGetsDefaults) {
  const auto job = load_job(write(kMinimal), {});
  EXPECT_EQ(job.train.epochs, 2);
  EXPECT_EQ(job.train.batch_per_rank, 8);
  EXPECT_EQ(job.train.accumulate_steps, 1);
  EXPECT_EQ(job.train.seed, 42u);
  EXPECT_DOUBLE_EQ(job.optimizer.momentum, 0.9);
  EXPECT_EQ(job.data.prefetch_batches, 4);
  ASSERT_EQ(job.model.layers.size(), 1u);
  EXPECT_EQ(job.model.layers[0].type, "dense");
  EXPECT_EQ(job.model.layers[0].integer("units"), 10);
  // The resolved file carries defaults so a run records exactly what it used.
  EXPECT_NE(job.resolved_toml.find("accumulate_steps = 1"), std::string::npos);
  EXPECT_NE(job.resolved_toml.find("momentum = 0.9"), std::string::npos);
}

// A section built in code starts from the schema's defaults, the same a job file without the key resolves to.
TEST_F(JobConfigTest, CodeBuiltConfigStartsFromTheSchemaDefaults) {
  const ringtrain::config::JobConfig built;
  const auto parsed = load_job(write(kMinimal), {});
  EXPECT_EQ(built.train.seed, parsed.train.seed);
  EXPECT_EQ(built.train.seed, 42u);
  EXPECT_EQ(built.model.name, parsed.model.name);
  EXPECT_EQ(built.data.prefetch_batches, parsed.data.prefetch_batches);
  EXPECT_EQ(built.data.augment.pad, parsed.data.augment.pad);
  EXPECT_EQ(built.data.augment.min_area, parsed.data.augment.min_area);
  EXPECT_EQ(built.data.normalize, parsed.data.normalize);
  EXPECT_EQ(built.train.loss_scale_growth_interval, parsed.train.loss_scale_growth_interval);
  EXPECT_EQ(built.optimizer.schedule, parsed.optimizer.schedule);
  EXPECT_DOUBLE_EQ(built.optimizer.poly_power, parsed.optimizer.poly_power);
  EXPECT_EQ(built.run.keep_checkpoints, parsed.run.keep_checkpoints);
  EXPECT_DOUBLE_EQ(built.dist.bucket_mb, parsed.dist.bucket_mb);
  EXPECT_EQ(built.gpu.measure_algorithms, parsed.gpu.measure_algorithms);
  EXPECT_EQ(built.gpu.few_channel_gemm, parsed.gpu.few_channel_gemm);
  EXPECT_EQ(built.gpu.candidate_kernels, parsed.gpu.candidate_kernels);
  // A required key has no default: its member starts empty.
  EXPECT_EQ(built.train.epochs, 0);
  EXPECT_TRUE(built.run.dir.empty());
}

// A choice of the wrong type is one problem, said once.
TEST_F(JobConfigTest, ChoiceOfTheWrongTypeIsOneProblem) {
  const std::string e = error_of(kMinimal, {"train.precision=3"});
  EXPECT_NE(e.find("has 1 problem:"), std::string::npos) << e;
  EXPECT_NE(e.find("'train.precision' must be a string, got an integer"), std::string::npos) << e;
}

TEST_F(JobConfigTest, UnknownKeyIsNamedWithTheValidOnes) {
  const std::string text = std::string(kMinimal) + "\n[dist]\nbuket_mb = 4\n";
  const std::string e = error_of(text);
  EXPECT_NE(e.find("unknown key 'dist.buket_mb'"), std::string::npos) << e;
  EXPECT_NE(e.find("bucket_mb"), std::string::npos) << e;
}

TEST_F(JobConfigTest, TypoInTrainTableListsValidKeys) {
  std::string text = kMinimal;
  text.replace(text.find("epochs"), 6, "epocs");
  const std::string e = error_of(text);
  EXPECT_NE(e.find("unknown key 'train.epocs'"), std::string::npos) << e;
  EXPECT_NE(e.find("batch_per_rank"), std::string::npos) << e;
  EXPECT_NE(e.find("missing required key 'train.epochs'"), std::string::npos) << e;
}

TEST_F(JobConfigTest, WrongTypeIsNamed) {
  std::string text = kMinimal;
  text.replace(text.find("epochs = 2"), 10, "epochs = \"2\"");
  const std::string e = error_of(text);
  EXPECT_NE(e.find("'train.epochs' must be an integer, got a string"), std::string::npos) << e;
}

TEST_F(JobConfigTest, NegativeBatchIsRefused) {
  const std::string e = error_of(kMinimal, {"train.batch_per_rank=-4"});
  EXPECT_NE(e.find("'train.batch_per_rank' must be"), std::string::npos) << e;
  EXPECT_NE(e.find("-4"), std::string::npos) << e;
}

TEST_F(JobConfigTest, MissingRequiredKey) {
  std::string text = kMinimal;
  text.erase(text.find("base_batch = 16"), 15);
  const std::string e = error_of(text);
  EXPECT_NE(e.find("missing required key 'optimizer.base_batch'"), std::string::npos) << e;
}

TEST_F(JobConfigTest, UnknownTableIsNamed) {
  const std::string e = error_of(std::string(kMinimal) + "\n[trian]\nepochs = 1\n");
  EXPECT_NE(e.find("unknown table [trian]"), std::string::npos) << e;
  EXPECT_NE(e.find("[train]"), std::string::npos) << e;
}

TEST_F(JobConfigTest, SetOverridesAnyKey) {
  const auto job = load_job(write(kMinimal), {"train.epochs=7", "run.dir=elsewhere", "optimizer.base_lr=0.5",
                                              "train.shuffle=false"});
  EXPECT_EQ(job.train.epochs, 7);
  EXPECT_EQ(job.run.dir, "elsewhere");
  EXPECT_DOUBLE_EQ(job.optimizer.base_lr, 0.5);
  EXPECT_FALSE(job.train.shuffle);
}

TEST_F(JobConfigTest, OptimizersScalingAndLabelSmoothingParse) {
  const auto job = load_job(write(kMinimal), {"optimizer.name=lars", "optimizer.lr_scaling=sqrt",
                                              "optimizer.trust_coefficient=0.02", "train.label_smoothing=0.1"});
  EXPECT_EQ(job.optimizer.kind, ringtrain::config::OptimizerKind::lars);
  EXPECT_EQ(job.optimizer.lr_scaling, ringtrain::config::LrScaling::sqrt);
  EXPECT_DOUBLE_EQ(job.optimizer.trust_coefficient, 0.02);
  EXPECT_DOUBLE_EQ(job.train.label_smoothing, 0.1);
  const auto plain = load_job(write(kMinimal), {});
  EXPECT_EQ(plain.optimizer.kind, ringtrain::config::OptimizerKind::sgd);
  EXPECT_EQ(plain.optimizer.lr_scaling, ringtrain::config::LrScaling::linear);
  EXPECT_DOUBLE_EQ(plain.train.label_smoothing, 0.0);
  const std::string e = error_of(kMinimal, {"optimizer.name=adam", "train.label_smoothing=1.5"});
  EXPECT_NE(e.find("optimizer.name"), std::string::npos) << e;
  EXPECT_NE(e.find("adamw"), std::string::npos) << e;  // the valid choices are listed
  EXPECT_NE(e.find("train.label_smoothing"), std::string::npos) << e;
}

// dist.on_shrink: keep_per_rank_batch by default (what a resume on fewer ranks always did), keep_global_batch
// taken, anything else refused naming the key and both choices.
TEST_F(JobConfigTest, OnShrinkKeepsThePerRankBatchByDefault) {
  using ringtrain::config::OnShrink;
  EXPECT_EQ(load_job(write(kMinimal), {}).dist.on_shrink, OnShrink::keep_per_rank_batch);
  EXPECT_EQ(load_job(write(kMinimal), {"dist.on_shrink=\"keep_global_batch\""}).dist.on_shrink,
            OnShrink::keep_global_batch);
  const std::string e = error_of(kMinimal, {"dist.on_shrink=\"keep_batch\""});
  EXPECT_NE(e.find("dist.on_shrink"), std::string::npos) << e;
  EXPECT_NE(e.find("keep_global_batch"), std::string::npos) << e;
  EXPECT_NE(e.find("keep_per_rank_batch"), std::string::npos) << e;
}

// train.ema_decay: 0 (off) by default, any d in (0, 1) taken; 1 (an average frozen at the first weights), a
// negative decay or one past 1 refused naming the key and the half-open range.
TEST_F(JobConfigTest, EmaDecayIsOffByDefaultAndRefusedOutsideZeroToOne) {
  EXPECT_DOUBLE_EQ(load_job(write(kMinimal), {}).train.ema_decay, 0.0);
  EXPECT_DOUBLE_EQ(load_job(write(kMinimal), {"train.ema_decay=0.9999"}).train.ema_decay, 0.9999);
  for (const char* bad : {"1", "1.5", "-0.1"}) {
    const std::string e = error_of(kMinimal, {std::string("train.ema_decay=") + bad});
    EXPECT_NE(e.find("'train.ema_decay' must be in [0, 1), got"), std::string::npos) << bad << ": " << e;
  }
}

TEST_F(JobConfigTest, Fp16AndItsLossScalingParse) {
  const auto job = load_job(write(kMinimal), {"train.precision=\"fp16\"", "train.loss_scale_init=1024",
                                              "train.loss_scale_growth_interval=0"});
  EXPECT_EQ(job.train.precision, ringtrain::config::Precision::fp16);
  EXPECT_DOUBLE_EQ(job.train.loss_scale_init, 1024);
  EXPECT_EQ(job.train.loss_scale_growth_interval, 0);
  const auto plain = load_job(write(kMinimal), {});
  EXPECT_DOUBLE_EQ(plain.train.loss_scale_init, 65536);
  EXPECT_EQ(plain.train.loss_scale_growth_interval, 2000);
  const std::string e = error_of(kMinimal, {"train.loss_scale_init=0"});
  EXPECT_NE(e.find("train.loss_scale_init"), std::string::npos) << e;
  const std::string p = error_of(kMinimal, {"train.precision=\"fp8\""});
  EXPECT_NE(p.find("fp16"), std::string::npos) << p;  // the valid choices are listed
}

TEST_F(JobConfigTest, CudaGraphsAreOffByDefaultAndRefusedWithFp16) {
  EXPECT_FALSE(load_job(write(kMinimal), {}).gpu.cuda_graphs);
  for (const char* precision : {"fp32", "bf16"})
    EXPECT_TRUE(load_job(write(kMinimal), {"gpu.cuda_graphs=true", fmt::format("train.precision=\"{}\"", precision)})
                    .gpu.cuda_graphs)
        << precision;
  const std::string e = error_of(kMinimal, {"gpu.cuda_graphs=true", "train.precision=\"fp16\""});
  EXPECT_NE(e.find("'gpu.cuda_graphs' = true cannot go with train.precision = \"fp16\""), std::string::npos) << e;
  EXPECT_NE(e.find("loss scaling"), std::string::npos) << e;  // the reason, not only the refusal
}

TEST_F(JobConfigTest, CudaGraphsAreRefusedWithWorkTheHostDoesInsideTheStep) {
  const std::string sync = error_of(kMinimal, {"gpu.cuda_graphs=true", "dist.sync_batchnorm_group=2"});
  EXPECT_NE(sync.find("'gpu.cuda_graphs' = true cannot go with dist.sync_batchnorm_group"), std::string::npos) << sync;
  const std::string profile = error_of(kMinimal, {"gpu.cuda_graphs=true", "run.profile_layers=true"});
  EXPECT_NE(profile.find("'gpu.cuda_graphs' = true cannot go with run.profile_layers"), std::string::npos) << profile;
  EXPECT_NE(profile.find("gpu.cuda_graphs = false"), std::string::npos) << profile;  // the way out
  EXPECT_TRUE(load_job(write(kMinimal), {"gpu.cuda_graphs=true", "dist.sync_batchnorm_group=0"}).gpu.cuda_graphs);
}

TEST_F(JobConfigTest, RecipeKnobsParse) {
  const auto job = load_job(write(kMinimal), {"optimizer.schedule=steps", "optimizer.milestones=[30, 60.5, 80]",
                                              "optimizer.decay_factor=0.2", "optimizer.nesterov=true",
                                              "optimizer.clip_global_norm=1.5", "train.eval_every_epochs=5",
                                              "optimizer.poly_power=1"});
  EXPECT_EQ(job.optimizer.schedule, ringtrain::config::LrSchedule::steps);
  EXPECT_EQ(job.optimizer.milestones, (std::vector<double>{30, 60.5, 80}));
  EXPECT_DOUBLE_EQ(job.optimizer.decay_factor, 0.2);
  EXPECT_DOUBLE_EQ(job.optimizer.poly_power, 1);
  EXPECT_TRUE(job.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(job.optimizer.clip_global_norm, 1.5);
  EXPECT_EQ(job.train.eval_every_epochs, 5);
  const auto plain = load_job(write(kMinimal), {});
  EXPECT_TRUE(plain.optimizer.milestones.empty());
  EXPECT_DOUBLE_EQ(plain.optimizer.decay_factor, 0.1);
  EXPECT_DOUBLE_EQ(plain.optimizer.poly_power, 2);
  EXPECT_FALSE(plain.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(plain.optimizer.clip_global_norm, 0);
  EXPECT_EQ(plain.train.eval_every_epochs, 1);
  EXPECT_NE(plain.resolved_toml.find("milestones = []"), std::string::npos) << plain.resolved_toml;
  EXPECT_EQ(load_job(write(kMinimal), {"optimizer.schedule=poly"}).optimizer.schedule,
            ringtrain::config::LrSchedule::poly);
}

// data.mixup_alpha and data.cutmix_alpha: 0 (off) by default, any alpha in [0, 100] taken; a negative alpha, one
// past 100 or a string refused naming the key; so is mixing with an odd train.batch_per_rank, which would leave a
// sample of each micro-batch (or, at 1, every sample) unpaired and unmixed.
TEST_F(JobConfigTest, MixingAlphasAreOffByDefaultAndRefusedOutsideTheirRange) {
  const auto plain = load_job(write(kMinimal), {});
  EXPECT_FALSE(plain.data.mix.on());
  const auto mixed = load_job(write(kMinimal), {"data.mixup_alpha=0.2", "data.cutmix_alpha=1.0"});
  EXPECT_DOUBLE_EQ(mixed.data.mix.mixup_alpha, 0.2);
  EXPECT_DOUBLE_EQ(mixed.data.mix.cutmix_alpha, 1.0);
  EXPECT_TRUE(mixed.data.mix.on());
  EXPECT_TRUE(load_job(write(kMinimal), {"data.cutmix_alpha=1"}).data.mix.on());
  for (const char* key : {"mixup_alpha", "cutmix_alpha"}) {
    for (const char* bad : {"-0.2", "101"}) {
      const std::string e = error_of(kMinimal, {fmt::format("data.{}={}", key, bad)});
      EXPECT_NE(e.find(fmt::format("'data.{}' must be in [0, 100], got {}", key, bad)), std::string::npos) << e;
    }
    const std::string e = error_of(kMinimal, {fmt::format("data.{}=\"a\"", key)});
    EXPECT_NE(e.find(fmt::format("'data.{}' must be a number", key)), std::string::npos) << e;
  }
  for (const auto& [batch, unmixed] : {std::pair{"1", "every sample"}, {"7", "one sample of each micro-batch"}}) {
    const std::string e = error_of(kMinimal, {"data.cutmix_alpha=1", fmt::format("train.batch_per_rank={}", batch)});
    EXPECT_NE(e.find(fmt::format("data.cutmix_alpha mix each micro-batch's samples in pairs, and "
                                 "'train.batch_per_rank' = {} is odd: {} would train unmixed; use an even "
                                 "batch_per_rank, or set data.cutmix_alpha to 0",
                                 batch, unmixed)),
              std::string::npos)
        << e;
  }
  EXPECT_NO_THROW(load_job(write(kMinimal), {"data.mixup_alpha=0.2", "train.batch_per_rank=2"}));
  // evaluate, predict and export mix nothing: an odd batch is theirs to choose.
  const auto evaluated = load_job(write(kMinimal), ringtrain::infer::with_inference_keys(
                                                       {"data.cutmix_alpha=1", "train.batch_per_rank=7"}));
  EXPECT_FALSE(evaluated.data.mix.on());
}

// data.mean and data.std: empty (the split's own) by default; a job's own normalisation comes whole, each std > 0.
TEST_F(JobConfigTest, TheJobsOwnNormalisationComesAsMeanAndStdTogether) {
  const auto plain = load_job(write(kMinimal), {});
  EXPECT_TRUE(plain.data.mean.empty());
  EXPECT_TRUE(plain.data.stddev.empty());
  const auto own = load_job(write(kMinimal), {"data.mean=[123.675, 116.28, 103.53]", "data.std=[58.395, 57.12, 57.375]"});
  EXPECT_EQ(own.data.mean, (std::vector<double>{123.675, 116.28, 103.53}));
  EXPECT_EQ(own.data.stddev, (std::vector<double>{58.395, 57.12, 57.375}));
  const auto refused = [&](const std::vector<std::string>& sets, const std::string& want) {
    const std::string e = error_of(kMinimal, sets);
    EXPECT_NE(e.find(want), std::string::npos) << "want \"" << want << "\" in: " << e;
  };
  refused({"data.mean=[120]"}, "'data.mean' is set without 'data.std'; give both");
  refused({"data.std=[60]"}, "'data.std' is set without 'data.mean'; give both");
  refused({"data.mean=[120, 110]", "data.std=[60]"}, "'data.mean' has 2 values but 'data.std' 1");
  refused({"data.mean=[120]", "data.std=[0]"}, "'data.std' must hold numbers in (0, 10000], got 0");
  refused({"data.mean=[300]", "data.std=[1]"}, "'data.mean' must hold numbers in [0, 255], got 300");
}

// Each bad value is refused naming its key (the binary's exit 3: tests/faults/bad_input.sh).
TEST_F(JobConfigTest, BadRecipeKnobsAreNamed) {
  const auto refused = [&](const std::vector<std::string>& sets, const std::string& want) {
    const std::string e = error_of(kMinimal, sets);
    EXPECT_NE(e.find(want), std::string::npos) << "want \"" << want << "\" in: " << e;
  };
  refused({"optimizer.schedule=steps", "optimizer.milestones=[30, 20]"},
          "'optimizer.milestones' must increase, but 20 follows 30");
  refused({"optimizer.milestones=[30, 30]"}, "'optimizer.milestones' must increase");
  refused({"optimizer.milestones=[-1]"}, "'optimizer.milestones' must hold numbers in [0, 100000], got -1");
  refused({"optimizer.milestones=[\"a\"]"}, "'optimizer.milestones' must be an array of numbers, got an array");
  refused({"optimizer.schedule=steps"}, "optimizer.schedule = \"steps\" needs 'optimizer.milestones'");
  refused({"optimizer.decay_factor=0"}, "'optimizer.decay_factor' must be in (0, 1], got 0");
  refused({"optimizer.decay_factor=1.5"}, "'optimizer.decay_factor' must be in (0, 1], got 1.5");
  refused({"optimizer.poly_power=0"}, "'optimizer.poly_power' must be in (0, 1000], got 0");
  refused({"optimizer.poly_power=-2"}, "'optimizer.poly_power' must be in (0, 1000], got -2");
  refused({"optimizer.clip_global_norm=-1"}, "'optimizer.clip_global_norm' must be in [0, 1000000000], got -1");
  refused({"train.eval_every_epochs=0"}, "'train.eval_every_epochs' must be in [1, 100000], got 0");
  refused({"optimizer.schedule=linear"}, "cosine | constant | steps | poly");
  // Keys that would be quietly ignored by what the rest of the section chose.
  refused({"optimizer.milestones=[30, 60]"}, "'optimizer.milestones' applies only to optimizer.schedule = \"steps\"");
  refused({"optimizer.name=adamw", "optimizer.nesterov=true"}, "'optimizer.nesterov' applies to optimizer.name = ");
  refused({"optimizer.momentum=0", "optimizer.nesterov=true"}, "'optimizer.nesterov' = true needs 'optimizer.momentum'");
}

// Values read beside the layer declarations (a layer's name and type, a residual block's activation) are checked for
// their type, not replaced by a default.
TEST_F(JobConfigTest, LayerNamesTypesAndJoinActivationsMustBeStrings) {
  const auto refused = [&](const std::string& layers, const std::string& want) {
    const std::string e = error_of(kMinimal, {"model.layers=" + layers});
    EXPECT_NE(e.find(want), std::string::npos) << "want \"" << want << "\" in: " << e;
  };
  refused("[{type=\"batchnorm\", name=2}, {type=\"flatten\"}, {type=\"dense\", units=10}]",
          "'model.layers[0].name' must be a string, got an integer");
  refused("[{type=5}, {type=\"flatten\"}, {type=\"dense\", units=10}]", "'model.layers[0].type' must be a string");
  refused("[{type=\"residual\", activation=false, body=[{type=\"batchnorm\"}]}, {type=\"flatten\"}, "
          "{type=\"dense\", units=10}]",
          "'model.layers[0].activation' must be \"relu\" or \"none\", got a boolean");
  refused("[{type=\"drop_path\", rate=0.5}, {type=\"flatten\"}, {type=\"dense\", units=10}]",
          "'model.layers[0]' (drop_path) belongs in a residual block's body");
}

TEST_F(JobConfigTest, BatchNormInitScaleParses) {
  const auto job = load_job(write(kMinimal), {"model.layers=[{type=\"batchnorm\", init_scale=0}, {type=\"batchnorm\"}, "
                                              "{type=\"flatten\"}, {type=\"dense\", units=10}]"});
  EXPECT_DOUBLE_EQ(job.model.layers[0].number("init_scale"), 0.0);
  EXPECT_DOUBLE_EQ(job.model.layers[1].number("init_scale"), 1.0);
  const std::string e = error_of(kMinimal, {"model.layers=[{type=\"batchnorm\", init_scale=-1}]"});
  EXPECT_NE(e.find("'model.layers[0].init_scale' must be a number in [0, 10]"), std::string::npos) << e;
  const std::string dense = error_of(kMinimal, {"model.layers=[{type=\"dense\", units=10, init_scale=0}]"});
  EXPECT_NE(dense.find("unknown key 'model.layers[0].init_scale' for a dense layer"), std::string::npos) << dense;
}

TEST_F(JobConfigTest, SetWithUnknownKeyFails) {
  const std::string e = error_of(kMinimal, {"train.epoch=3"});
  EXPECT_NE(e.find("unknown key 'train.epoch'"), std::string::npos) << e;
  EXPECT_NE(error_of(kMinimal, {"no_equals_sign"}).find("expected key=value"), std::string::npos);
}

// A --set value written as TOML writes one (an array, a table, a quoted string, a number) that does not parse is
// refused with the parser's words instead of being taken as a string; one that parses into more keys than its own
// (a line break in it) is refused instead of cut short; a bare word or path is a string.
TEST_F(JobConfigTest, SetValuesThatAreBrokenTomlAreRefusedNotTakenAsStrings) {
  for (const char* bad : {"model.layers=[{", "data.train=\"unterminated", "train.epochs=99999999999999999999"}) {
    const std::string e = error_of(kMinimal, {bad});
    EXPECT_NE(e.find("is not a TOML value"), std::string::npos) << bad << ": " << e;
  }
  const std::string two = error_of(kMinimal, {"train.epochs=1\ntrain.seed=3"});
  EXPECT_NE(two.find("--set train.epochs: its value holds more than one key"), std::string::npos) << two;
  EXPECT_EQ(load_job(write(kMinimal), {"data.train=runs/1e5/train"}).data.train, "runs/1e5/train");
  EXPECT_EQ(load_job(write(kMinimal), {"train.epochs=3"}).train.epochs, 3);
}

TEST_F(JobConfigTest, LayerTypoAndMissingLayerKeys) {
  std::string text = kMinimal;
  text += "\n[[model.layers]]\ntype = \"conv\"\n[[model.layers]]\ntype = \"conv2d\"\nfilter = 3\n";
  const std::string e = error_of(text);
  EXPECT_NE(e.find("model.layers[1].type' must be one of avgpool, batchnorm, "), std::string::npos) << e;
  EXPECT_NE(e.find(", conv2d, dense, "), std::string::npos) << e;  // every registered kind, in name order
  EXPECT_NE(e.find("unknown key 'model.layers[2].filter' for a conv2d layer"), std::string::npos) << e;
  EXPECT_NE(e.find("'model.layers[2]' (conv2d) needs 'filters'"), std::string::npos) << e;
}

TEST_F(JobConfigTest, ConvolutionGroupsAreAPositiveInteger) {
  std::string text = kMinimal;
  text += "\n[[model.layers]]\ntype = \"conv2d\"\nfilters = 4\nkernel = 3\ngroups = 0\n";
  const std::string e = error_of(text);
  EXPECT_NE(e.find("model.layers[1].groups' must be in [1, "), std::string::npos) << e;
}

TEST_F(JobConfigTest, ResidualBlockParses) {
  std::string text = kMinimal;
  text.replace(text.find("[[model.layers]]"), std::string::npos,
               "[[model.layers]]\ntype = \"residual\"\nbody = [{type = \"conv2d\", filters = 4, kernel = 3, padding = 1}, "
               "{type = \"batchnorm\"}]\nshortcut = [{type = \"conv2d\", filters = 4, kernel = 1}]\n"
               "[[model.layers]]\ntype = \"dense\"\nunits = 10\n[run]\ndir = \"r\"\n");
  const auto job = load_job(write(text), {});
  ASSERT_EQ(job.model.layers.size(), 2u);
  const auto& block = job.model.layers[0];
  EXPECT_EQ(block.type, "residual");
  ASSERT_EQ(block.body.size(), 2u);
  EXPECT_EQ(block.body[0].integer("filters"), 4);
  EXPECT_EQ(block.body[0].integer("padding"), 1);
  ASSERT_EQ(block.shortcut.size(), 1u);
  EXPECT_EQ(block.shortcut[0].integer("kernel"), 1);
  EXPECT_TRUE(block.activation_relu);
}

TEST_F(JobConfigTest, InvalidTomlNamesLine) {
  const std::string e = error_of("[data]\ntrain = \n");
  EXPECT_NE(e.find("not valid TOML at line 2"), std::string::npos) << e;
}

TEST_F(JobConfigTest, MissingFileIsNamed) {
  try {
    load_job("/nonexistent/job.toml", {});
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/job.toml"), std::string::npos);
  }
}

TEST_F(JobConfigTest, ShippedJobFilesLoad) {
  for (const auto& entry : fs::directory_iterator(fs::path(RINGTRAIN_SOURCE_DIR) / "jobs")) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_job(entry.path(), {}));
  }
  const auto job = load_job(fs::path(RINGTRAIN_SOURCE_DIR) / "jobs/fashion_mnist.toml", {});
  EXPECT_EQ(job.train.batch_per_rank, 64);
  EXPECT_DOUBLE_EQ(job.optimizer.momentum, 0.9);
  EXPECT_DOUBLE_EQ(job.optimizer.weight_decay, 5e-4);
  ASSERT_EQ(job.model.layers.size(), 12u);
  EXPECT_EQ(job.model.layers[0].integer("kernel"), 5);
  EXPECT_EQ(job.model.layers[0].integer("filters"), 32);
  EXPECT_EQ(job.model.layers[4].integer("filters"), 64);
  EXPECT_EQ(job.model.layers[9].integer("units"), 1024);
  EXPECT_EQ(job.model.layers[11].integer("units"), 10);
}

}  // namespace

TEST_F(JobConfigTest, FineTuningKeysNameALayerAndANewHead) {
  const std::string head = "[[model.layers]]\ntype = \"dense\"\nunits = 10\nname = \"head\"\n";
  const std::string base = std::string(kMinimal).substr(0, std::string(kMinimal).find("[[model.layers]]"));
  const std::string runs = "[run]\ndir = \"runs/x\"\n";
  const std::string ends_in_head = base + head + runs;
  const std::string ends_in_relu = base + head + "[[model.layers]]\ntype = \"relu\"\n" + runs;
  EXPECT_NE(error_of(ends_in_head, {"train.freeze=\"trunk\""}).find("'train.freeze' = \"trunk\" names no top-level"),
            std::string::npos);
  EXPECT_NE(error_of(ends_in_head, {"train.freeze=\"head\""}).find("names the last layer"), std::string::npos);
  EXPECT_EQ(error_of(ends_in_relu, {"train.freeze=\"head\""}), "");  // a layer before the last
  EXPECT_EQ(load_job(write(ends_in_head), {"model.replace_head=4"}).model.layers.back().integer("units"), 4);
  EXPECT_NE(error_of(ends_in_relu, {"model.replace_head=4"}).find("is a relu layer"), std::string::npos);
}

// A key whose rule the job does not use is named, whether set in the file or by --set; a key in use, a default
// left alone and a resolved job file (which names every key) say nothing.
TEST_F(JobConfigTest, KeysThatChangeNothingAreNamed) {
  EXPECT_TRUE(load_job(write(kMinimal), {}).keys_without_effect.empty());
  EXPECT_TRUE(load_job(write(kMinimal), {"optimizer.momentum=0.95"}).keys_without_effect.empty());
  const auto adam = load_job(write(kMinimal), {"optimizer.name=adamw", "optimizer.momentum=0.95",
                                               "optimizer.poly_power=3", "optimizer.beta2=0.99"});
  ASSERT_EQ(adam.keys_without_effect.size(), 2u);
  EXPECT_NE(adam.keys_without_effect[0].find("'optimizer.momentum' is set but changes nothing in this job: it "
                                             "applies only with optimizer.name = \"sgd\" or \"lars\""),
            std::string::npos)
      << adam.keys_without_effect[0];
  EXPECT_NE(adam.keys_without_effect[1].find("'optimizer.poly_power'"), std::string::npos);
  const auto in_file = load_job(write(std::string(kMinimal) + "trace_steps = 9\n"), {});
  ASSERT_EQ(in_file.keys_without_effect.size(), 1u);
  EXPECT_NE(in_file.keys_without_effect[0].find("run.trace = true"), std::string::npos);
  EXPECT_TRUE(load_job(write(adam.resolved_toml), {}).keys_without_effect.empty());
  // A warm-up's start without a warm-up; synchronised batch norm in a model of no batch norm (kMinimal: one dense).
  const auto none = load_job(write(kMinimal), {"optimizer.warmup_start=\"zero\"", "dist.sync_batchnorm_group=2"});
  ASSERT_EQ(none.keys_without_effect.size(), 2u);
  EXPECT_NE(none.keys_without_effect[0].find("optimizer.warmup_epochs above 0"), std::string::npos);
  EXPECT_NE(none.keys_without_effect[1].find("a batchnorm layer in model.layers"), std::string::npos);
  EXPECT_TRUE(load_job(write(kMinimal), {"optimizer.warmup_start=\"zero\"", "optimizer.warmup_epochs=1"})
                  .keys_without_effect.empty());
  // Regions for the device's decoder where the loader threads decode (auto picks cpu).
  const auto regions = load_job(write(kMinimal), {"data.decode_regions=true"});
  ASSERT_EQ(regions.keys_without_effect.size(), 1u);
  EXPECT_NE(regions.keys_without_effect[0].find("data.decode = \"gpu\""), std::string::npos);
  EXPECT_TRUE(load_job(write(kMinimal), {"data.decode_regions=true", "data.decode=\"gpu\""})
                  .keys_without_effect.empty());
}
