// Owns the job file's contract with the rest of the product: JobConfig (what a job file resolves to), reading it
// with --set overrides, and the key table. The keys themselves are declared once, in config/job_schema.cpp.
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
enum class WarmupStart { base_lr, zero };          // where the linear warm-up climbs from
enum class OptimizerKind { sgd, adamw, lars, lamb };
// shared where the job runs on one node and can, else nonblocking | MPI_Iallreduce polled from backward | a
// communication thread | one parameter copy per node in shared memory
enum class CpuReducer { automatic, nonblocking, thread, shared };
enum class WireFormat { fp32, bf16 };           // what a gradient all-reduce sends (dist.allreduce_dtype)
// What a resume on another world size than its checkpoint's keeps (dist.on_shrink): each rank's batch (the
// learning rate follows the new global batch) or the global batch (more or fewer accumulation steps).
enum class OnShrink { keep_per_rank_batch, keep_global_batch };
enum class NormalizeOn { auto_detect, loader, device };  // where uint8 pixels become floats (data.normalize)
enum class DecodeOn { auto_detect, cpu, gpu };  // where an encoded split's JPEGs are decoded (data.decode)
enum class CpuLayout { auto_detect, nchw, nhwc };  // how the CPU twin stores 4-D activations (run.cpu_layout)

// Each section's members are bound to their keys in the schema (config/job_schema.cpp), which holds every key's
// default, bounds or choices and meaning once; a section's constructor stores those defaults, so a JobConfig built
// in code starts where a job file without the key would.
struct JobConfig {
  std::filesystem::path source;  // the job file as given

  struct Data {
    Data();
    std::filesystem::path train, test;
    int prefetch_batches;
    AugmentSpec augment;  // training batches only; evaluation sees the samples as prepared
    MixSpec mix;          // training batches only; evaluation is never mixed
    int loader_threads;          // 0: the rank's cores (dist/rank_cores.h)
    NormalizeOn normalize;
    int eval_resize;             // encoded splits: shorter side before the evaluation centre crop (0: size / 0.875)
    DecodeOn decode;
    bool decode_regions;  // data.decode = gpu: the decoder given each crop's restart segments, not the whole photo
    std::vector<double> mean, stddev;  // data.mean, data.std: per channel, 0..255 units; empty: the split's own
  } data;

  struct Train {
    Train();
    int epochs;
    int batch_per_rank;
    int64_t max_steps_per_epoch;
    uint64_t seed;
    int accumulate_steps;
    bool shuffle;
    Precision precision;
    double label_smoothing;  // training loss only; evaluation reports plain cross-entropy
    int eval_every_epochs;   // the last epoch is evaluated whatever this says
    double loss_scale_init;  // fp16's dynamic loss scaling (train/loss_scaler.h)
    int64_t loss_scale_growth_interval;
    double ema_decay;  // 0: no average of the weights (model/weight_average.h)
    std::filesystem::path init_from;  // fine-tuning: a checkpoint whose weights a fresh run starts from ("": none)
    std::string freeze;               // fine-tuning: the top-level layer whose parameters and those before stay fixed
  } train;

  struct Optimizer {
    Optimizer();
    OptimizerKind kind;
    double base_lr;
    int base_batch;
    LrScaling lr_scaling;
    double momentum;                // sgd, lars
    bool nesterov;                  // sgd, lars
    double beta1, beta2, epsilon;   // adamw, lamb (epsilon also lars's trust-ratio guard)
    double trust_coefficient;       // lars
    double weight_decay;
    double warmup_epochs;
    WarmupStart warmup_start;
    LrSchedule schedule;
    double min_lr;                  // cosine, poly
    std::vector<double> milestones; // steps: epochs, increasing
    double decay_factor;            // steps
    double poly_power;              // poly
    double clip_global_norm;        // 0: off
    double head_lr_multiplier;      // the last layer with parameters trains at this x the rate
  } optimizer;

  struct Model {
    Model();
    std::string name;
    int replace_head;               // > 0: the last layer (dense) gets this many units, initialised from the seed
    std::vector<LayerSpec> layers;  // not a schema key: read per layer type
  } model;

  struct Run {
    Run();
    std::filesystem::path dir;
    DeviceChoice device;
    int threads;  // 0: the rank's cores (dist/rank_cores.h)
    CpuLayout cpu_layout;
    double progress_every_s;
    int timing_warmup_steps;
    bool overwrite;
    double collective_timeout_s;
    int checkpoint_every;            // epochs; 0 = only on a stop signal
    int64_t checkpoint_every_steps;  // 0 = off
    int keep_checkpoints;
    int64_t consistency_every;       // steps between parameter checksum comparisons (0: once per epoch)
    bool profile_layers;
    bool fuse_layers;  // the graph's fusion pass (batch norm + ReLU [+ 2x2 pool] where the backend can)
    bool trace;
    int trace_steps;
    bool tensorboard;
    double monitor_every_s;  // 0: off
  } run;

  struct Dist {
    Dist();
    double bucket_mb;
    CpuReducer reducer;
    int node_ranks;  // shared: ranks per shared copy (0: every rank of a node)
    WireFormat allreduce_dtype;
    int sync_batchnorm_group;  // ranks per synchronised batch norm group (0: off); checked against the world size
    OnShrink on_shrink;        // a resume on another world size (train/on_shrink.h)
  } dist;

  struct Gpu {
    Gpu();
    bool measure_algorithms;  // cudnnFind (timed) instead of cuDNN's heuristics
    bool deterministic;       // only deterministic convolution algorithms where one fits
    double workspace_mb;      // per convolution algorithm
    bool share_device;        // several ranks on one GPU as emulated hosts (testing only)
    bool nhwc;                // bf16/fp16 activations stored NHWC (cuDNN's tensor-core layout)
    bool cudnn_graphs;        // 16-bit NHWC convolutions through cuDNN's graph API where a plan builds
    bool few_channel_gemm;    // 16-bit NHWC convolutions on few input channels as im2col + cuBLAS GEMM
    bool candidate_kernels;   // our CUDA kernels written since the last GPU run, not yet proven on a GPU
    bool full_eval_batches;   // evaluation and predict pad their last batch to the full batch: one shape
    bool cuda_graphs;         // the steady-state step replayed as CUDA graphs (train/step_graph_plan.h)
  } gpu;

  std::string resolved_toml;  // every key with its final value, written to run.dir
  std::vector<std::string> keys_without_effect;  // keys the job sets that its other keys leave unused, in words
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
