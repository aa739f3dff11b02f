// Owns the job file: the TOML schema (every key, its type, default and meaning), reading with --set
// overrides, validation with messages that name the key and list the valid ones, and the resolved copy.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "config/layer_spec.h"
#include "config/augment_spec.h"

namespace ringtrain::config {

enum class DeviceChoice { auto_detect, cpu, cuda };
enum class Precision { fp32, tf32, bf16, fp16 };
enum class LrSchedule { cosine, constant, steps, poly };
enum class LrScaling { linear, sqrt, none };       // how the peak rate follows the global batch
enum class OptimizerKind { sgd, adamw, lars, lamb };
// shared where the job runs on one node and can, else nonblocking | MPI_Iallreduce polled from backward | a
// communication thread | one parameter copy per node in shared memory
enum class CpuReducer { automatic, nonblocking, thread, shared };
enum class WireFormat { fp32, bf16 };           // what a gradient all-reduce sends (dist.allreduce_dtype)
enum class NormalizeOn { auto_detect, loader, device };  // where uint8 pixels become floats (data.normalize)
enum class DecodeOn { auto_detect, cpu, gpu };  // where an encoded split's JPEGs are decoded (data.decode)

struct JobConfig {
  std::filesystem::path source;  // the job file as given

  struct Data {
    std::filesystem::path train, test;
    int prefetch_batches = 4;
    AugmentSpec augment;  // training batches only; evaluation sees the samples as prepared
    int loader_threads = 0;      // 0: the node's cores divided among its ranks
    NormalizeOn normalize = NormalizeOn::auto_detect;
    int eval_resize = 0;         // encoded splits: shorter side before the evaluation centre crop (0: size / 0.875)
    DecodeOn decode = DecodeOn::auto_detect;
  } data;

  struct Train {
    int epochs = 0;
    int batch_per_rank = 0;
    int64_t max_steps_per_epoch = 0;
    uint64_t seed = 0;
    int accumulate_steps = 1;
    bool shuffle = true;
    Precision precision = Precision::fp32;
    double label_smoothing = 0;  // training loss only; evaluation reports plain cross-entropy
    int eval_every_epochs = 1;   // the last epoch is evaluated whatever this says
    double loss_scale_init = 65536;           // fp16's dynamic loss scaling (train/loss_scaler.h)
    int64_t loss_scale_growth_interval = 2000;
  } train;

  struct Optimizer {
    OptimizerKind kind = OptimizerKind::sgd;
    double base_lr = 0;
    int base_batch = 0;
    LrScaling lr_scaling = LrScaling::linear;
    double momentum = 0.9;           // sgd, lars
    bool nesterov = false;           // sgd, lars
    double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;  // adamw, lamb (epsilon also lars's trust-ratio guard)
    double trust_coefficient = 0.001;  // lars
    double weight_decay = 0;
    double warmup_epochs = 0;
    LrSchedule schedule = LrSchedule::cosine;
    double min_lr = 0;                // cosine, poly
    std::vector<double> milestones;   // steps: epochs, increasing
    double decay_factor = 0.1;        // steps
    double poly_power = 2;            // poly
    double clip_global_norm = 0;      // 0: off
  } optimizer;

  struct Model {
    std::string name;
    std::vector<LayerSpec> layers;
  } model;

  struct Run {
    std::filesystem::path dir;
    DeviceChoice device = DeviceChoice::auto_detect;
    int threads = 0;  // 0: cores / local ranks
    double progress_every_s = 5;
    int timing_warmup_steps = 5;
    bool overwrite = false;
    double collective_timeout_s = 300;
    int checkpoint_every = 1;          // epochs; 0 = only on a stop signal
    int64_t checkpoint_every_steps = 0;  // 0 = off
    int keep_checkpoints = 2;
    int64_t consistency_every = 0;     // steps between parameter checksum comparisons (0: once per epoch)
    bool profile_layers = false;
    bool fuse_layers = true;  // the graph's fusion pass (batch norm + ReLU [+ 2x2 pool] where the backend can)
    bool trace = false;
    int trace_steps = 50;
    bool tensorboard = true;
    double monitor_every_s = 5;  // 0: off
  } run;

  struct Dist {
    double bucket_mb = 1;
    CpuReducer reducer = CpuReducer::automatic;
    int node_ranks = 0;  // shared: ranks per shared copy (0: every rank of a node)
    WireFormat allreduce_dtype = WireFormat::fp32;
  } dist;

  struct Gpu {
    bool measure_algorithms = false;  // cudnnFind (timed) instead of cuDNN's heuristics
    bool deterministic = true;        // only deterministic convolution algorithms where one fits
    double workspace_mb = 1024;       // per convolution algorithm
    bool share_device = false;        // several ranks on one GPU as emulated hosts (testing only)
    bool nhwc = true;                 // bf16/fp16 activations stored NHWC (cuDNN's tensor-core layout)
    bool cudnn_graphs = true;         // 16-bit NHWC convolutions through cuDNN's graph API where a plan builds
    bool few_channel_gemm = true;     // 16-bit NHWC convolutions on few input channels as im2col + cuBLAS GEMM
  } gpu;

  std::string resolved_toml;  // every key with its final value, written to run.dir
};

// Reads `file`, applies `overrides` ("a.b=value", value in TOML syntax, bare words taken as strings), fills
// defaults, validates. Throws JobFileError listing every problem found (unknown key with the valid ones,
// wrong type, missing required key, out-of-range value).
// Job files are regular files of at most this many bytes (the largest in jobs/ is a few KiB).
inline constexpr std::size_t kMaxJobFileBytes = std::size_t{1} << 20;

JobConfig load_job(const std::filesystem::path& file, const std::vector<std::string>& overrides);

// The same for a job file's text; `source` only names it in messages. Throws nothing but JobFileError for
// any text (tests/faults/fuzz_job_config.cpp holds it to that).
JobConfig parse_job(std::string_view toml_text, const std::filesystem::path& source,
                    const std::vector<std::string>& overrides);

// Markdown table of every key (for docs/job-file.md and `ringtrain keys`).
std::string describe_keys();

}  // namespace ringtrain::config
