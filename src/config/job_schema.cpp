// Owns the job file's keys, each declared once below: name, type, default, bounds or choices, meaning and the
// JobConfig member it fills. From these rows come the reader's checks and messages (job_config.cpp), the sections'
// defaults (their constructors, here), the resolved file's inserted defaults and `ringtrain keys`, which
// docs/job-file.md copies. `model.layers` is not a row: job_config.cpp reads it per layer type.
#include "config/job_schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <type_traits>
#include <utility>

namespace ringtrain::config::schema {
namespace {

using Data = JobConfig::Data;
using Train = JobConfig::Train;
using Optimizer = JobConfig::Optimizer;
using Model = JobConfig::Model;
using Run = JobConfig::Run;
using Dist = JobConfig::Dist;
using Gpu = JobConfig::Gpu;

constexpr std::nullopt_t required = std::nullopt;

template <class T>
Value or_required(const std::optional<T>& fallback) {
  return fallback ? Value(*fallback) : Value();
}

// The member a row's `field` names: a pointer to member, or a lambda returning a nested member (data.augment_*).
template <class S, class Field>
using Target = std::remove_reference_t<std::invoke_result_t<const Field&, S&>>;

NumRange above(double min, double max) { return {min, max, true}; }

// The row makers, one per kind; each binds the value's conversion to its member's type. The table's name is
// left to section(), so a row never repeats it.
template <class S, class Field>
Key<S> integer(const char* name, Field field, std::optional<int64_t> fallback, IntRange range, const char* help) {
  return {{nullptr, name, Kind::integer, or_required(fallback), range, help}, [field](S& s, const Value& v) {
            std::invoke(field, s) = static_cast<Target<S, Field>>(std::get<int64_t>(v));
          }};
}

template <class S, class Field>
Key<S> number(const char* name, Field field, std::optional<double> fallback, NumRange range, const char* help) {
  return {{nullptr, name, Kind::number, or_required(fallback), range, help}, [field](S& s, const Value& v) {
            std::invoke(field, s) = static_cast<Target<S, Field>>(std::get<double>(v));
          }};
}

template <class S, class Field>
Key<S> numbers(const char* name, Field field, NumRange each, const char* help) {
  return {{nullptr, name, Kind::numbers, Numbers{}, each, help},
          [field](S& s, const Value& v) { std::invoke(field, s) = std::get<Numbers>(v); }};
}

template <class S, class Field>
Key<S> boolean(const char* name, Field field, bool fallback, const char* help) {
  return {{nullptr, name, Kind::boolean, fallback, {}, help},
          [field](S& s, const Value& v) { std::invoke(field, s) = std::get<bool>(v); }};
}

template <class S, class Field>
Key<S> text(const char* name, Field field, std::optional<std::string> fallback, const char* help) {
  return {{nullptr, name, Kind::string, or_required(fallback), {}, help},
          [field](S& s, const Value& v) { std::invoke(field, s) = std::get<std::string>(v); }};
}

// A string from a fixed set, each naming a value of the member's type; the first is the default.
template <class S, class Field, class E = Target<S, Field>>
Key<S> choice(const char* name, Field field, std::vector<std::pair<const char*, E>> options, const char* help) {
  Choices names;
  for (const auto& option : options) names.emplace_back(option.first);
  return {{nullptr, name, Kind::string, names.front(), names, help}, [field, options](S& s, const Value& v) {
            for (const auto& [option, value] : options)
              if (std::get<std::string>(v) == option) std::invoke(field, s) = value;
          }};
}

template <class S>
Section<S> section(const char* table, S JobConfig::*part, std::vector<Key<S>> keys) {
  for (auto& key : keys) key.info.table = table;
  return {part, std::move(keys)};
}

Section<Data> data_keys() {
  return section<Data>(
      "data", &JobConfig::data,
      {
          text<Data>("train", &Data::train, required,
                     "folder of the training split's shards (from `ringtrain prepare`)"),
          text<Data>("test", &Data::test, required, "folder of the test split's shards, evaluated after each epoch"),
          integer<Data>("prefetch_batches", &Data::prefetch_batches, 4, {1, 1024},
                        "depth of the loader thread's queue, in batches"),
          choice<Data>("augment", [](Data& d) -> auto& { return d.augment.kind; },
                       {{"none", AugmentKind::none},
                        {"pad_crop_flip", AugmentKind::pad_crop_flip},
                        {"resized_crop_flip", AugmentKind::resized_crop_flip}},
                       "training augmentation: none | pad_crop_flip (CIFAR style) | resized_crop_flip (ImageNet "
                       "style)"),
          integer<Data>("augment_pad", [](Data& d) -> auto& { return d.augment.pad; }, 4, {0, 1024},
                        "pad_crop_flip: zero border, in pixels, the crop may shift by"),
          number<Data>("augment_min_area", [](Data& d) -> auto& { return d.augment.min_area; }, 0.08, {0.01, 1.0},
                       "resized_crop_flip: the smallest crop, as a fraction of the image's area (torchvision's "
                       "scale[0])"),
          number<Data>("mixup_alpha", [](Data& d) -> auto& { return d.mix.mixup_alpha; }, 0.0, {0.0, 100.0},
                       "mixup: each training sample and its batch partner blended as lam x own + (1 - lam) x "
                       "partner, targets likewise, lam ~ Beta(alpha, alpha) (timm's Mixup, pair mode: train.batch_per_rank "
                       "must be even; 0 = off)"),
          number<Data>("cutmix_alpha", [](Data& d) -> auto& { return d.mix.cutmix_alpha; }, 0.0, {0.0, 100.0},
                       "CutMix: a box of area (1 - lam) of the partner pasted in, lam ~ Beta(alpha, alpha) corrected "
                       "to the box's area (0 = off; with mixup_alpha too, each pair takes one of them at random)"),
          integer<Data>("loader_threads", &Data::loader_threads, 0, {0, 256},
                        "threads decoding, augmenting and normalising each rank's batches (0 = as run.threads: the "
                        "cores the rank is bound to, split among the node's ranks bound alike)"),
          integer<Data>("eval_resize", &Data::eval_resize, 0, {0, 65536},
                        "JPEG splits: evaluation resizes the shorter side to this, then takes the centre crop of the "
                        "sample's size, so at least the sample's side (0 = the size / 0.875: 256 for 224); set above "
                        "0, predict on image files takes that crop whatever the model was trained on (`ringtrain "
                        "import` sets it: torchvision's evaluation transform)"),
          choice<Data>("decode", &Data::decode,
                       {{"auto", DecodeOn::auto_detect}, {"cpu", DecodeOn::cpu}, {"gpu", DecodeOn::gpu}},
                       "where a JPEG split's images are decoded: auto (cpu: on an H200 with 8 cores, ResNet-50 bf16 from "
                       "side-256 shards kept 100 % of its synthetic rate decoding on the CPU, 80 % on the GPU) "
                       "| cpu (the loader threads, libjpeg-turbo, only the crop) | gpu (the backend: nvJPEG on a GPU, "
                       "the whole photo, then the crop; the loader threads only read; on the CPU twin, libjpeg-turbo: "
                       "in training on a decode thread one batch ahead, in evaluation on the step's thread)"),
          boolean<Data>("decode_regions", &Data::decode_regions, false,
                        "with decode = gpu, on shards in the region layout (`prepare images --store jpeg`): the decoder "
                        "is given a JPEG of the restart segments each crop covers instead of the whole photo, so it "
                        "decodes and copies about the crop's share of the pixels; the samples are the whole photo's "
                        "but where a tap's position, taken from the region's corner, rounds apart (rare: a level or two "
                        "in a value); off until measured on a GPU"),
          numbers<Data>("mean", &Data::mean, {0.0, 255.0},
                        "per channel, in 0..255 units: subtracted from each pixel before the division by data.std "
                        "(with data.std; [] = the mean the training split carries, as prepare measured it); the model's "
                        "own when its weights came from elsewhere: `ringtrain import` writes the imported model's, e.g. "
                        "torchvision's ImageNet [123.675, 116.28, 103.53]"),
          numbers<Data>("std", &Data::stddev, above(0.0, 1e4),
                        "per channel, in 0..255 units, each > 0: what a pixel minus data.mean is divided by (with "
                        "data.mean; [] = the training split's), e.g. ImageNet's [58.395, 57.12, 57.375]"),
          choice<Data>("normalize", &Data::normalize,
                       {{"auto", NormalizeOn::auto_detect}, {"loader", NormalizeOn::loader},
                        {"device", NormalizeOn::device}},
                       "where uint8 pixels become normalised floats: auto (the device on a GPU: a 4x smaller copy; "
                       "the loader threads on the CPU) | loader | device"),
      });
}

Section<Train> train_keys() {
  return section<Train>(
      "train", &JobConfig::train,
      {
          integer<Train>("epochs", &Train::epochs, required, {1, 100000}, "passes over the training split"),
          integer<Train>("batch_per_rank", &Train::batch_per_rank, required, {1, 1 << 20},
                         "samples per rank per micro-batch"),
          integer<Train>("max_steps_per_epoch", &Train::max_steps_per_epoch, 0, {0, INT64_MAX},
                         "cap on optimizer steps per epoch (0 = all)"),
          integer<Train>("seed", &Train::seed, 42, {0, INT64_MAX}, "seeds initialisation, shuffles and dropout"),
          integer<Train>("accumulate_steps", &Train::accumulate_steps, 1, {1, 4096},
                         "micro-batches per optimizer step (global batch = batch_per_rank x ranks x this)"),
          boolean<Train>("shuffle", &Train::shuffle, true, "shuffle each rank's partition every epoch"),
          choice<Train>("precision", &Train::precision,
                        {{"fp32", Precision::fp32}, {"tf32", Precision::tf32}, {"bf16", Precision::bf16},
                         {"fp16", Precision::fp16}},
                        "fp32 | tf32 (GPU only: fp32 storage, tensor-core math) | bf16 (CPU: activations and their "
                        "gradients stored in bf16, products on bf16 operands, oneDNN's bf16 kernels where the CPU has "
                        "AVX512_BF16, rounded operands elsewhere; fp32 weights, gradients, optimizer state and "
                        "accumulation) | fp16 (CPU: the same in fp16, with dynamic loss scaling)"),
          number<Train>("loss_scale_init", &Train::loss_scale_init, 65536.0, {1e-6, 1e19},
                        "fp16: the first loss scale; halved (and the step skipped) when a gradient overflows; a power "
                        "of two keeps the unscaling exact"),
          integer<Train>("loss_scale_growth_interval", &Train::loss_scale_growth_interval, 2000, {0, INT64_MAX},
                         "fp16: the loss scale doubles after this many steps in a row with finite gradients (0 = never "
                         "grows)"),
          number<Train>("label_smoothing", &Train::label_smoothing, 0.0, {0.0, 0.999},
                        "e in [0, 0.999]: train against (1 - e) on the label + e / classes everywhere; test loss stays "
                        "plain cross-entropy"),
          integer<Train>("eval_every_epochs", &Train::eval_every_epochs, 1, {1, 100000},
                         "evaluate the test split after every this many epochs (the last epoch always); an epoch "
                         "without evaluation records test_loss, test_acc and test_top5 as null"),
          number<Train>("ema_decay", &Train::ema_decay, 0.0, {0.0, 1.0, false, true},
                        "0 = off, else d in (0, 1), e.g. 0.9999: after every optimizer step ema += (1 - d) x (param - "
                        "ema) over all parameters (timm's ModelEmaV3 rule; the batch-norm running statistics are the "
                        "model's own, not averaged); saved in checkpoints, used by evaluate, predict and export with "
                        "--weights ema"),
          text<Train>("init_from", &Train::init_from, "",
                      "fine-tuning: a checkpoint (from train, or from ringtrain import) whose parameters and batch-norm "
                      "statistics a fresh run starts from instead of the seeded initialisation; the optimizer's state "
                      "and the position start anew (\"\": off; --resume continues a run instead)"),
          text<Train>("freeze", &Train::freeze, "",
                      "fine-tuning: the name of a top-level layer (its `name` key) whose parameters, and those of every "
                      "layer before it, stay fixed; those layers run as in evaluation (batch norm on its running "
                      "statistics, no dropout) and backward stops after them (\"\": train every layer)"),
      });
}

Section<Optimizer> optimizer_keys() {
  using O = Optimizer;
  return section<O>(
      "optimizer", &JobConfig::optimizer,
      {
          choice<O>("name", &O::kind,
                    {{"sgd", OptimizerKind::sgd}, {"adamw", OptimizerKind::adamw}, {"lars", OptimizerKind::lars},
                     {"lamb", OptimizerKind::lamb}},
                    "sgd (momentum, L2 weight decay) | adamw (Adam, decoupled weight decay) | lars (layer-wise trust "
                    "ratio, momentum; large batches) | lamb (layer-wise trust ratio over Adam's direction)"),
          number<O>("base_lr", &O::base_lr, required, {0.0, 1e3},
                    "learning rate at base_batch; scaled to the global batch by lr_scaling"),
          integer<O>("base_batch", &O::base_batch, required, {1, 1 << 24}, "the batch size base_lr was tuned for"),
          choice<O>("lr_scaling", &O::lr_scaling,
                    {{"linear", LrScaling::linear}, {"sqrt", LrScaling::sqrt}, {"none", LrScaling::none}},
                    "linear (lr = base_lr x global/base_batch, Goyal et al. 2017) | sqrt (x sqrt(global/base_batch)) "
                    "| none"),
          number<O>("momentum", &O::momentum, 0.9, {0.0, 0.9999}, "sgd and lars: momentum"),
          boolean<O>("nesterov", &O::nesterov, false,
                     "sgd and lars, with momentum above 0: Nesterov momentum as PyTorch's SGD defines it (the step "
                     "takes g + momentum x v instead of v)"),
          number<O>("beta1", &O::beta1, 0.9, {0.0, 0.9999}, "adamw and lamb: decay of the gradient's running mean"),
          number<O>("beta2", &O::beta2, 0.999, {0.0, 0.999999},
                    "adamw and lamb: decay of the squared gradient's running mean"),
          number<O>("epsilon", &O::epsilon, 1e-8, {0.0, 1.0},
                    "adamw and lamb: added to the root of the second moment; lars: to the trust ratio's denominator"),
          number<O>("trust_coefficient", &O::trust_coefficient, 0.001, {0.0, 1e3},
                    "lars: eta in trust = eta x |w| / (|g| + weight_decay x |w|)"),
          number<O>("weight_decay", &O::weight_decay, 0.0, {0.0, 1.0},
                    "on weights (not biases or batch norm): sgd and lars an L2 term in the gradient, adamw decoupled "
                    "(p -= lr x wd x p), lamb in the direction"),
          number<O>("warmup_epochs", &O::warmup_epochs, 0.0, {0.0, 1e5},
                    "linear warm-up from warmup_start to the scaled rate; one longer than the run keeps its slope and "
                    "ends short of the peak (PyTorch's LinearLR), the run header says where"),
          choice<O>("warmup_start", &O::warmup_start,
                    {{"base_lr", WarmupStart::base_lr}, {"zero", WarmupStart::zero}},
                    "where the warm-up climbs from: base_lr (Goyal et al. 2017: the rate base_batch was tuned for; "
                    "nothing to climb where the global batch is at most base_batch) | zero (rate 0 at the first step, "
                    "as MLPerf's LARS reference and timm's warm-ups)"),
          choice<O>("schedule", &O::schedule,
                    {{"cosine", LrSchedule::cosine}, {"constant", LrSchedule::constant}, {"steps", LrSchedule::steps},
                     {"poly", LrSchedule::poly}},
                    "after warm-up: cosine (to min_lr) | constant | steps (x decay_factor at each of the milestones, "
                    "PyTorch's MultiStepLR) | poly (min_lr + (peak - min_lr) x (1 - progress)^poly_power, MLPerf's "
                    "LARS reference)"),
          number<O>("min_lr", &O::min_lr, 0.0, {0.0, 1e3}, "cosine and poly: the learning rate the decay ends at, at most the peak rate"),
          numbers<O>("milestones", &O::milestones, {0.0, 1e5},
                     "schedule = steps only: the epochs (from the job's start, warm-up included; fractions allowed) at "
                     "which the rate is multiplied by decay_factor, increasing, e.g. [30, 60, 80]; one inside the warm-up "
                     "multiplies the warm-up's rate from there on (PyTorch's ChainedScheduler of LinearLR and "
                     "MultiStepLR)"),
          number<O>("decay_factor", &O::decay_factor, 0.1, above(0.0, 1.0),
                    "steps: in (0, 1], the factor at each milestone"),
          number<O>("poly_power", &O::poly_power, 2.0, above(0.0, 1e3),
                    "poly: the power of the decay, > 0 (MLPerf's LARS: 2)"),
          number<O>("clip_global_norm", &O::clip_global_norm, 0.0, {0.0, 1e9},
                    "0 = off; else every step scales the reduced gradient by min(1, clip / (norm + 1e-6)), norm the "
                    "global L2 norm of every parameter's gradient (of the unscaled loss under fp16), as "
                    "torch.nn.utils.clip_grad_norm_; the epoch record gives the norm's mean and max (a device "
                    "readback per step)"),
          number<O>("head_lr_multiplier", &O::head_lr_multiplier, 1.0, {0.0, 1e3},
                    "fine-tuning: the last layer with parameters (the classifier) trains at this x the scheduled rate; "
                    "weight decay scales with it (0: the head stays as loaded while its optimizer state moves, as "
                    "PyTorch's does for a group at lr 0)"),
      });
}

Section<Model> model_keys() {
  return section<Model>("model", &JobConfig::model,
                        {text<Model>("name", &Model::name, "model", "label for logs"),
                         integer<Model>("replace_head", &Model::replace_head, 0, {0, 1 << 24},
                                        "fine-tuning: > 0 gives the last layer, which must be dense, this many units "
                                        "(the classes of the new data), initialised from the seed and not taken from "
                                        "train.init_from (0: off)")});
}

Section<Run> run_keys() {
  return section<Run>(
      "run", &JobConfig::run,
      {
          text<Run>("dir", &Run::dir, required, "output folder: metrics.jsonl, job.resolved.toml, versions.json"),
          choice<Run>("device", &Run::device,
                      {{"auto", DeviceChoice::auto_detect}, {"cpu", DeviceChoice::cpu}, {"cuda", DeviceChoice::cuda}},
                      "auto | cpu | cuda (auto: cuda when a GPU is visible)"),
          integer<Run>("threads", &Run::threads, 0, {0, 4096},
                       "compute threads per rank (0 = the cores the rank is bound to, split among the node's ranks "
                       "bound alike: the node's cores / its ranks where the launcher binds none)"),
          choice<Run>("cpu_layout", &Run::cpu_layout,
                      {{"auto", CpuLayout::auto_detect}, {"nchw", CpuLayout::nchw}, {"nhwc", CpuLayout::nhwc}},
                      "how the CPU twin stores 4-D activations: auto (nhwc for a model without batch norm or grouped "
                      "(depthwise) convolutions whose products run in bf16 on oneDNN, or in fp32 and tf32 for one "
                      "whose convolutions are all pointwise or patch embeddings and that does not pool, as "
                      "ViT-S/16: its 1x1 convolutions become matrix products over the tokens with no reorders; nchw "
                      "otherwise) | nchw | nhwc (convolutions on oneDNN read it as stored; batch norm, pooling and "
                      "the convolutions oneDNN does not run go between reorders)"),
          number<Run>("progress_every_s", &Run::progress_every_s, 5.0, {0.0, 1e6},
                      "seconds between progress lines on rank 0"),
          integer<Run>("timing_warmup_steps", &Run::timing_warmup_steps, 5, {0, 1000000},
                       "steps at the start of each epoch left out of steady_samples_per_s (algorithm choice, first "
                       "allocations)"),
          boolean<Run>("overwrite", &Run::overwrite, false, "allow a fresh run in a run.dir that already holds one"),
          number<Run>("collective_timeout_s", &Run::collective_timeout_s, 300.0, {0.0, 1e6},
                      "a collective (all-reduce, agreement) that takes longer than this ends the job, naming missing "
                      "ranks (0: no limit; SIGTERM's 5 s grace for a wait on a dead rank stays)"),
          integer<Run>("checkpoint_every", &Run::checkpoint_every, 1, {0, 1000000},
                       "epochs between checkpoints in <run.dir>/checkpoints (0: none between epochs; the run still "
                       "writes one when it ends, to evaluate, export or extend it, and one when stopped by "
                       "SIGTERM/SIGUSR1)"),
          integer<Run>("checkpoint_every_steps", &Run::checkpoint_every_steps, 0, {0, INT64_MAX},
                       "also checkpoint every this many steps (0: off)"),
          integer<Run>("keep_checkpoints", &Run::keep_checkpoints, 2, {1, 1000000},
                       "checkpoints kept; older ones are deleted"),
          integer<Run>("consistency_every", &Run::consistency_every, 0, {0, INT64_MAX},
                       "steps between cross-rank parameter checksum comparisons (0: after each epoch only)"),
          boolean<Run>("profile_layers", &Run::profile_layers, false,
                       "time every layer over the first epoch's steps after run.timing_warmup_steps (device "
                       "synchronised around each: slower) and print the table, with how the backend runs each "
                       "convolution (cuDNN's algorithms, oneDNN's implementation)"),
          boolean<Run>("fuse_layers", &Run::fuse_layers, true,
                       "fuse batch norm with the ReLU after it, and a 2x2 stride-2 max pool after that, and a residual "
                       "block's last batch norm with the join after it (add shortcut + ReLU), into one operation "
                       "where the backend can (CPU: yes, and a oneDNN convolution before it hands it its blocked "
                       "output, which it hands the next oneDNN convolution blocked too; CUDA: batch norm + ReLU and "
                       "the join on bf16/fp16 activations, the pool apart); the numbers are the same either way"),
          boolean<Run>("trace", &Run::trace, false,
                       "write <run.dir>/trace-rank<R>.json (Chrome trace events, opens in Perfetto): step phases, one "
                       "track per bucket"),
          integer<Run>("trace_steps", &Run::trace_steps, 50, {1, 1000000},
                       "the trace keeps the last this many steps (bounded size)"),
          boolean<Run>("tensorboard", &Run::tensorboard, true,
                       "rank 0 writes TensorBoard scalars (loss, accuracy, lr, samples/s) to "
                       "<run.dir>/events.out.tfevents.*"),
          number<Run>("monitor_every_s", &Run::monitor_every_s, 5.0, {0.0, 86400.0},
                      "seconds between GPU samples (NVML: utilisation, memory, temperature, power, clocks) into "
                      "<run.dir>/gpu.jsonl; 0: off; off by itself without libnvidia-ml"),
      });
}

Section<Dist> dist_keys() {
  return section<Dist>(
      "dist", &JobConfig::dist,
      {
          number<Dist>("bucket_mb", &Dist::bucket_mb, 1.0, {0.001, 4096},
                       "gradient bucket size for overlapped all-reduce, MiB"),
          choice<Dist>("reducer", &Dist::reducer,
                       {{"auto", CpuReducer::automatic}, {"nonblocking", CpuReducer::nonblocking},
                        {"thread", CpuReducer::thread}, {"shared", CpuReducer::shared}},
                       "CPU path: auto (shared where every rank runs on one node, the optimizer is sgd or adamw, the "
                       "precision not fp16 and the all-reduce fp32; nonblocking otherwise) | nonblocking "
                       "(MPI_Iallreduce, progressed between layers of backward) | thread (blocking MPI_Allreduce on a "
                       "communication thread) | shared (one copy of the parameters and optimizer state per node in "
                       "shared memory: each rank sums its slice of the gradients from the node's ranks' memory, "
                       "all-reduces it with the other nodes and updates it; sgd and adamw, fp32 and bf16); the GPU "
                       "path always uses NCCL on its own stream"),
          integer<Dist>("node_ranks", &Dist::node_ranks, 0, {0, 1 << 20},
                        "dist.reducer = \"shared\": ranks of a node per shared copy (0: all of them), dividing the "
                        "ranks of every host; fewer emulate several nodes on one, for tests"),
          choice<Dist>("allreduce_dtype", &Dist::allreduce_dtype,
                       {{"fp32", WireFormat::fp32}, {"bf16", WireFormat::bf16}},
                       "fp32 | bf16: what the gradient all-reduce sends; bf16 halves the bytes, each partial sum "
                       "rounded to bf16 (8-bit mantissa); the update stays fp32"),
          integer<Dist>("sync_batchnorm_group", &Dist::sync_batchnorm_group, 0, {0, 1 << 20},
                        "synchronised batch norm: groups of this many consecutive ranks normalise with the group's "
                        "batch statistics in training (forward and backward sums all-reduced each step; the "
                        "running statistics follow them); must divide the world size (an elastic relaunch on a world "
                        "it does not divide, --resume or --failed-node, takes the largest divisor up to it and says "
                        "so); 0: off, each rank its own (1, groups of one, is the same and runs as 0); on the CUDA backend the sums pass through the host, or with gpu.candidate_kernels stay on the "
                        "device (NCCL; not yet run on a GPU)"),
          choice<Dist>("on_shrink", &Dist::on_shrink,
                       {{"keep_per_rank_batch", OnShrink::keep_per_rank_batch},
                        {"keep_global_batch", OnShrink::keep_global_batch}},
                       "--resume on another world size than the checkpoint's (an elastic restart on fewer nodes): "
                       "keep_per_rank_batch (the global batch follows the ranks, the learning rate re-scaled by "
                       "optimizer.lr_scaling) | keep_global_batch (the checkpoint's global batch, train.accumulate_steps "
                       "re-chosen to reach it; refused with exit 3 where batch_per_rank x ranks does not divide it)"),
      });
}

Section<Gpu> gpu_keys() {
  return section<Gpu>(
      "gpu", &JobConfig::gpu,
      {
          choice<Gpu>("conv_algorithms", &Gpu::measure_algorithms, {{"heuristic", false}, {"measure", true}},
                      "heuristic | measure: cuDNN's ranking, or time the candidates once per shape (faster, less "
                      "reproducible)"),
          boolean<Gpu>("deterministic", &Gpu::deterministic, true,
                       "only deterministic convolution algorithms where one fits (bit-reproducible runs; may be "
                       "slower)"),
          number<Gpu>("workspace_mb", &Gpu::workspace_mb, 1024.0, {0.0, 1e6},
                      "scratch memory one convolution algorithm may use, MiB (large NCHW layers need GiBs for "
                      "tensor-core paths); the memory plan holds it only while its convolution runs"),
          boolean<Gpu>("nhwc", &Gpu::nhwc, true,
                       "store bf16/fp16 activations NHWC, the layout cuDNN's tensor-core convolutions read fastest "
                       "(ResNet-50 bf16 on an H200: 5449 against 4600 samples/s NCHW); false: NCHW; fp32 stays NCHW "
                       "either way"),
          boolean<Gpu>("cudnn_graphs", &Gpu::cudnn_graphs, true,
                       "16-bit NHWC convolutions (gpu.nhwc) through cuDNN's graph API where it builds a plan for the "
                       "shape: on an H200 the kernels the legacy API measures best, at less host time a call; false: "
                       "the legacy API for every one"),
          boolean<Gpu>("few_channel_gemm", &Gpu::few_channel_gemm, true,
                       "16-bit NHWC convolutions whose input channels are not a multiple of 8 (a stem on 3 colour "
                       "channels) as im2col + cuBLAS GEMM over C x R x S columns; false: cuDNN on the input padded to "
                       "8 channels (8/3 of a stem's work)"),
          boolean<Gpu>("candidate_kernels", &Gpu::candidate_kernels, false,
                       "our CUDA kernels that are written and CPU-compiled but not yet proven on a GPU "
                       "(perf/gpu/PENDING.md lists them: layer norm and layer scale rows per warp, depthwise "
                       "convolution, 16-bit NHWC attention on cuDNN's fused SDPA; synchronised batch norm's sums on "
                       "NCCL); false: the proven path for those layers"),
          boolean<Gpu>("full_eval_batches", &Gpu::full_eval_batches, false,
                       "evaluation and predict run their last, partial batch at the full batch size (the rest "
                       "zeros, their outputs ignored), so the network sees one batch shape: with conv_algorithms = "
                       "measure each new shape costs cuDNN's timed search (the likely cause of a 36 s evaluation of "
                       "1,000 samples at batch 256 on an H200); false until a GPU run shows the gain"),
          boolean<Gpu>("cuda_graphs", &Gpu::cuda_graphs, false,
                       "replay the steady-state training step as CUDA graphs (one launch a step instead of hundreds; "
                       "for launch-bound models), captured after the warm-up steps and again when the step's shape "
                       "changes; fp32, tf32 and bf16 (fp16 is refused: its loss scaling decides on the host whether a "
                       "step updates; so are dist.sync_batchnorm_group and run.profile_layers). "
                       "Steps with several micro-batches or gradient clipping run eagerly (the run says so). Not yet "
                       "run on a GPU (docs/gpu.md). The CPU backend has no graphs: there the key changes nothing, so "
                       "one job file runs on a GPU node and on a CPU node"),
          boolean<Gpu>("share_device", &Gpu::share_device, false,
                       "testing only: let a node's ranks share its GPUs, each rank its own host to NCCL "
                       "(NCCL_HOSTID), to run the multi-rank NCCL path on a one-GPU machine; slower than one rank per "
                       "GPU"),
      });
}

// A member's value before any job file: its key's default, or the type's zero where the key is required.
Value initial(const KeyInfo& key) {
  if (!std::holds_alternative<std::monostate>(key.fallback)) return key.fallback;
  switch (key.kind) {
    case Kind::integer: return int64_t{0};
    case Kind::number: return 0.0;
    case Kind::boolean: return false;
    case Kind::string: return std::string();
    case Kind::numbers: return Numbers{};
  }
  return {};
}

template <class S>
void store_defaults(S& into) {
  for (const auto& key : std::get<Section<S>>(sections()).keys) key.store(into, initial(key.info));
}

std::string default_cell(const Value& fallback) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "required";
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return "\"" + v + "\"";
        else if constexpr (std::is_same_v<T, Numbers>) return fmt::format("[{}]", fmt::join(v, ", "));
        else return fmt::format("{}", v);
      },
      fallback);
}

std::string help_cell(const char* help) {
  std::string out;  // a bare '|' would end the Markdown table cell
  for (const char* c = help; *c != '\0'; ++c) {
    if (*c == '|') out += '\\';
    out += *c;
  }
  return out;
}

}  // namespace

const Sections& sections() {
  // Built on first use, not at load time: a JobConfig constructed during static initialisation still finds it.
  static const Sections all{data_keys(), train_keys(), optimizer_keys(), model_keys(), run_keys(), dist_keys(),
                            gpu_keys()};
  return all;
}

const std::vector<const KeyInfo*>& all_keys() {
  static const std::vector<const KeyInfo*> all = [] {
    std::vector<const KeyInfo*> keys;
    for_each_section([&](const auto& section) {
      for (const auto& key : section.keys) keys.push_back(&key.info);
    });
    return keys;
  }();
  return all;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::integer: return "an integer";
    case Kind::number: return "a number";
    case Kind::boolean: return "true or false";
    case Kind::string: return "a string";
    case Kind::numbers: return "an array of numbers";
  }
  return "?";
}

}  // namespace ringtrain::config::schema

namespace ringtrain::config {

JobConfig::Data::Data() { schema::store_defaults(*this); }
JobConfig::Train::Train() { schema::store_defaults(*this); }
JobConfig::Optimizer::Optimizer() { schema::store_defaults(*this); }
JobConfig::Model::Model() { schema::store_defaults(*this); }
JobConfig::Run::Run() { schema::store_defaults(*this); }
JobConfig::Dist::Dist() { schema::store_defaults(*this); }
JobConfig::Gpu::Gpu() { schema::store_defaults(*this); }

std::string describe_keys() {
  std::string out = "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto* key : schema::all_keys())
    out += fmt::format("| `{}.{}` | {} | {} | {} |\n", key->table, key->name, schema::kind_name(key->kind),
                       schema::default_cell(key->fallback), schema::help_cell(key->help));
  out += "| `model.layers` | array of tables | required | the model, see below |\n";
  return out;
}

}  // namespace ringtrain::config
