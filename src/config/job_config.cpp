// Owns the job-file schema and its enforcement. Every key the product accepts is in `kKeys`, once: the
// reader, the defaults, the error messages and `describe_keys()` all come from that one table.
#include "config/job_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <variant>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include "common/error.h"
#include "common/path_probe.h"

namespace ringtrain::config {
namespace {

enum class Kind { integer, number, boolean, string, numbers };  // numbers: an array of numbers
using Numbers = std::vector<double>;
using Default = std::variant<std::monostate, int64_t, double, bool, std::string, Numbers>;  // monostate: required

struct KeyRule {
  const char* table;
  const char* key;
  Kind kind;
  Default fallback;
  const char* help;
};

// The schema. `model.layers` is checked separately (per layer type) in read_layers().
const std::vector<KeyRule> kKeys = {
    {"data", "train", Kind::string, {}, "folder of the training split's shards (from `ringtrain prepare`)"},
    {"data", "test", Kind::string, {}, "folder of the test split's shards, evaluated after each epoch"},
    {"data", "prefetch_batches", Kind::integer, int64_t{4}, "depth of the loader thread's queue, in batches"},
    {"data", "augment", Kind::string, std::string("none"),
     "training augmentation: none | pad_crop_flip (CIFAR style) | resized_crop_flip (ImageNet style)"},
    {"data", "augment_pad", Kind::integer, int64_t{4}, "pad_crop_flip: zero border, in pixels, the crop may shift by"},
    {"data", "augment_min_area", Kind::number, 0.08,
     "resized_crop_flip: the smallest crop, as a fraction of the image's area (torchvision's scale[0])"},
    {"data", "loader_threads", Kind::integer, int64_t{0},
     "threads decoding, augmenting and normalising each rank's batches (0 = the node's cores / its ranks)"},
    {"data", "eval_resize", Kind::integer, int64_t{0},
     "JPEG splits: evaluation resizes the shorter side to this, then takes the centre crop of the sample's size "
     "(0 = the size / 0.875: 256 for 224)"},
    {"data", "decode", Kind::string, std::string("auto"),
     "where a JPEG split's images are decoded: auto (cpu until the GPU decoder is measured on a GPU) | cpu (the "
     "loader threads, libjpeg-turbo, only the crop) | gpu (the backend: nvJPEG on a GPU, the whole photo, then the "
     "crop; the loader threads only read; on the CPU twin, libjpeg-turbo on the step's thread)"},
    {"data", "normalize", Kind::string, std::string("auto"),
     "where uint8 pixels become normalised floats: auto (the device on a GPU: a 4x smaller copy; the loader "
     "threads on the CPU) | loader | device"},
    {"train", "epochs", Kind::integer, {}, "passes over the training split"},
    {"train", "batch_per_rank", Kind::integer, {}, "samples per rank per micro-batch"},
    {"train", "max_steps_per_epoch", Kind::integer, int64_t{0}, "cap on optimizer steps per epoch (0 = all)"},
    {"train", "seed", Kind::integer, int64_t{42}, "seeds initialisation, shuffles and dropout"},
    {"train", "accumulate_steps", Kind::integer, int64_t{1},
     "micro-batches per optimizer step (global batch = batch_per_rank x ranks x this)"},
    {"train", "shuffle", Kind::boolean, true, "shuffle each rank's partition every epoch"},
    {"train", "precision", Kind::string, std::string("fp32"),
     "fp32 | tf32 (GPU only: fp32 storage, tensor-core math) | bf16 (CPU: activations and their gradients stored in "
     "bf16, products on bf16 operands, oneDNN's bf16 kernels where the CPU has AVX512_BF16, rounded operands "
     "elsewhere; fp32 weights, gradients, optimizer state and accumulation) | fp16 (CPU: the same in fp16, with "
     "dynamic loss scaling)"},
    {"train", "loss_scale_init", Kind::number, 65536.0,
     "fp16: the first loss scale; halved (and the step skipped) when a gradient overflows; a power of two keeps "
     "the unscaling exact"},
    {"train", "loss_scale_growth_interval", Kind::integer, int64_t{2000},
     "fp16: the loss scale doubles after this many steps in a row with finite gradients (0 = never grows)"},
    {"train", "label_smoothing", Kind::number, 0.0,
     "e in [0, 0.999]: train against (1 - e) on the label + e / classes everywhere; test loss stays plain cross-entropy"},
    {"train", "eval_every_epochs", Kind::integer, int64_t{1},
     "evaluate the test split after every this many epochs (the last epoch always); an epoch without evaluation "
     "records test_loss, test_acc and test_top5 as null"},
    {"optimizer", "name", Kind::string, std::string("sgd"),
     "sgd (momentum, L2 weight decay) | adamw (Adam, decoupled weight decay) | lars (layer-wise trust ratio, "
     "momentum; large batches) | lamb (layer-wise trust ratio over Adam's direction)"},
    {"optimizer", "base_lr", Kind::number, {}, "learning rate at base_batch; scaled to the global batch by lr_scaling"},
    {"optimizer", "base_batch", Kind::integer, {}, "the batch size base_lr was tuned for"},
    {"optimizer", "lr_scaling", Kind::string, std::string("linear"),
     "linear (lr = base_lr x global/base_batch, Goyal et al. 2017) | sqrt (x sqrt(global/base_batch)) | none"},
    {"optimizer", "momentum", Kind::number, 0.9, "sgd and lars: momentum"},
    {"optimizer", "nesterov", Kind::boolean, false,
     "sgd and lars: Nesterov momentum as PyTorch's SGD defines it (the step takes g + momentum x v instead of v)"},
    {"optimizer", "beta1", Kind::number, 0.9, "adamw and lamb: decay of the gradient's running mean"},
    {"optimizer", "beta2", Kind::number, 0.999, "adamw and lamb: decay of the squared gradient's running mean"},
    {"optimizer", "epsilon", Kind::number, 1e-8,
     "adamw and lamb: added to the root of the second moment; lars: to the trust ratio's denominator"},
    {"optimizer", "trust_coefficient", Kind::number, 0.001,
     "lars: eta in trust = eta x |w| / (|g| + weight_decay x |w|)"},
    {"optimizer", "weight_decay", Kind::number, 0.0,
     "on weights (not biases or batch norm): sgd and lars an L2 term in the gradient, adamw decoupled (p -= lr x "
     "wd x p), lamb in the direction"},
    {"optimizer", "warmup_epochs", Kind::number, 0.0, "linear warm-up from base_lr to the scaled rate"},
    {"optimizer", "schedule", Kind::string, std::string("cosine"),
     "after warm-up: cosine (to min_lr) | constant | steps (x decay_factor at each of the milestones, PyTorch's "
     "MultiStepLR) | poly (min_lr + (peak - min_lr) x (1 - progress)^poly_power, MLPerf's LARS reference)"},
    {"optimizer", "min_lr", Kind::number, 0.0, "cosine and poly: the learning rate the decay ends at"},
    {"optimizer", "milestones", Kind::numbers, Numbers{},
     "steps: the epochs (from the job's start, warm-up included; fractions allowed) at which the rate is multiplied "
     "by decay_factor, increasing, e.g. [30, 60, 80]"},
    {"optimizer", "decay_factor", Kind::number, 0.1, "steps: in (0, 1], the factor at each milestone"},
    {"optimizer", "poly_power", Kind::number, 2.0, "poly: the power of the decay, > 0 (MLPerf's LARS: 2)"},
    {"optimizer", "clip_global_norm", Kind::number, 0.0,
     "0 = off; else every step scales the reduced gradient by min(1, clip / (norm + 1e-6)), norm the global L2 norm "
     "of every parameter's gradient (of the unscaled loss under fp16), as torch.nn.utils.clip_grad_norm_; the epoch "
     "record gives the norm's mean and max (a device readback per step)"},
    {"model", "name", Kind::string, std::string("model"), "label for logs"},
    {"run", "dir", Kind::string, {}, "output folder: metrics.jsonl, job.resolved.toml, versions.json"},
    {"run", "device", Kind::string, std::string("auto"), "auto | cpu | cuda (auto: cuda when a GPU is visible)"},
    {"run", "threads", Kind::integer, int64_t{0}, "compute threads per rank (0 = cores / ranks on the node)"},
    {"run", "progress_every_s", Kind::number, 5.0, "seconds between progress lines on rank 0"},
    {"run", "timing_warmup_steps", Kind::integer, int64_t{5},
     "steps at the start of each epoch left out of steady_samples_per_s (algorithm choice, first allocations)"},
    {"run", "overwrite", Kind::boolean, false, "allow a fresh run in a run.dir that already holds one"},
    {"run", "collective_timeout_s", Kind::number, 300.0,
     "a collective (all-reduce, agreement) that takes longer than this ends the job, naming missing ranks (0: off)"},
    {"run", "checkpoint_every", Kind::integer, int64_t{1},
     "epochs between checkpoints in <run.dir>/checkpoints (0: none between epochs; the run still writes one when it "
     "ends, to evaluate, export or extend it, and one when stopped by SIGTERM/SIGUSR1)"},
    {"run", "checkpoint_every_steps", Kind::integer, int64_t{0}, "also checkpoint every this many steps (0: off)"},
    {"run", "keep_checkpoints", Kind::integer, int64_t{2}, "checkpoints kept; older ones are deleted"},
    {"run", "consistency_every", Kind::integer, int64_t{0},
     "steps between cross-rank parameter checksum comparisons (0: after each epoch only)"},
    {"run", "profile_layers", Kind::boolean, false,
     "time every layer in the first epoch (device synchronised around each: slower) and print the table, with how "
     "the backend runs each convolution (cuDNN's algorithms, oneDNN's implementation)"},
    {"run", "fuse_layers", Kind::boolean, true,
     "fuse batch norm with the ReLU after it, and a 2x2 stride-2 max pool after that, and a residual block's last "
     "batch norm with the join after it (add shortcut + ReLU), into one operation where the backend can (CPU: yes, "
     "and a oneDNN convolution before it hands it its blocked output, which it hands the next oneDNN convolution "
     "blocked too; CUDA: batch norm + ReLU and the join on bf16/fp16 activations, the pool apart); the numbers are "
     "the same either way"},
    {"run", "trace", Kind::boolean, false,
     "write <run.dir>/trace-rank<R>.json (Chrome trace events, opens in Perfetto): step phases, one track per bucket"},
    {"run", "trace_steps", Kind::integer, int64_t{50}, "the trace keeps the last this many steps (bounded size)"},
    {"run", "tensorboard", Kind::boolean, true,
     "rank 0 writes TensorBoard scalars (loss, accuracy, lr, samples/s) to <run.dir>/events.out.tfevents.*"},
    {"run", "monitor_every_s", Kind::number, 5.0,
     "seconds between GPU samples (NVML: utilisation, memory, temperature, power, clocks) into <run.dir>/gpu.jsonl; "
     "0: off; off by itself without libnvidia-ml"},
    {"dist", "bucket_mb", Kind::number, 1.0, "gradient bucket size for overlapped all-reduce, MiB"},
    {"dist", "reducer", Kind::string, std::string("auto"),
     "CPU path: auto (shared where every rank runs on one node, the optimizer is sgd or adamw, the precision not fp16 "
     "and the all-reduce fp32; nonblocking otherwise) | nonblocking (MPI_Iallreduce, progressed between layers of "
     "backward) | thread (blocking MPI_Allreduce on a communication thread) | shared (one copy of the parameters and "
     "optimizer state per node in shared memory: each rank sums its slice of the gradients from the node's ranks' "
     "memory, all-reduces it with the other nodes and updates it; sgd and adamw, fp32 and bf16); the GPU path always "
     "uses NCCL on its own stream"},
    {"dist", "node_ranks", Kind::integer, int64_t{0},
     "dist.reducer = \"shared\": ranks of a node per shared copy (0: all of them); fewer emulate several nodes on "
     "one, for tests"},
    {"dist", "allreduce_dtype", Kind::string, std::string("fp32"),
     "fp32 | bf16: what the gradient all-reduce sends; bf16 halves the bytes, each partial sum rounded to bf16 "
     "(8-bit mantissa); the update stays fp32"},
    {"gpu", "conv_algorithms", Kind::string, std::string("heuristic"),
     "heuristic | measure: cuDNN's ranking, or time the candidates once per shape (faster, less reproducible)"},
    {"gpu", "deterministic", Kind::boolean, true,
     "only deterministic convolution algorithms where one fits (bit-reproducible runs; may be slower)"},
    {"gpu", "workspace_mb", Kind::number, 1024.0,
     "scratch memory one convolution algorithm may use, MiB (large NCHW layers need GiBs for tensor-core paths); "
     "the memory plan holds it only while its convolution runs"},
    {"gpu", "nhwc", Kind::boolean, true,
     "store bf16/fp16 activations NHWC, the layout cuDNN's tensor-core convolutions read fastest (ResNet-50 bf16 on "
     "an H200: 5449 against 4600 samples/s NCHW); false: NCHW; fp32 stays NCHW either way"},
    {"gpu", "cudnn_graphs", Kind::boolean, true,
     "16-bit NHWC convolutions (gpu.nhwc) through cuDNN's graph API where it builds a plan for the shape: on an H200 "
     "the kernels the legacy API measures best, at less host time a call; false: the legacy API for every one"},
    {"gpu", "few_channel_gemm", Kind::boolean, true,
     "16-bit NHWC convolutions whose input channels are not a multiple of 8 (a stem on 3 colour channels) as im2col "
     "+ cuBLAS GEMM over C x R x S columns; false: cuDNN on the input padded to 8 channels (8/3 of a stem's work)"},
    {"gpu", "share_device", Kind::boolean, false,
     "testing only: let a node's ranks share its GPUs, each rank its own host to NCCL (NCCL_HOSTID), to run the "
     "multi-rank NCCL path on a one-GPU machine; slower than one rank per GPU"},
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::integer: return "an integer";
    case Kind::number: return "a number";
    case Kind::boolean: return "true or false";
    case Kind::string: return "a string";
    case Kind::numbers: return "an array of numbers";
  }
  return "?";
}

std::string node_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date/time";
  }
}

std::string valid_keys_of(const std::string& table) {
  std::vector<std::string> keys;
  for (const auto& r : kKeys)
    if (table == r.table) keys.push_back(r.key);
  if (table == "model") keys.push_back("layers");
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::string valid_tables() {
  std::set<std::string> tables;
  for (const auto& r : kKeys) tables.insert(r.table);
  std::string out;
  for (const auto& t : tables) out += (out.empty() ? "[" : ", [") + t + "]";
  return out;
}

// Parses the right-hand side of --set: TOML syntax first ("3", "0.1", "true", "\"x\""), else a bare string.
toml::table parse_override_value(const std::string& key, const std::string& text) {
  try {
    return toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    toml::table t;
    t.insert_or_assign("v", text);
    (void)key;
    return t;
  }
}

void apply_override(toml::table& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw JobFileError(fmt::format("--set '{}': expected key=value, e.g. --set train.epochs=3", assignment));
  const std::string path = assignment.substr(0, eq);
  toml::table parsed = parse_override_value(path, assignment.substr(eq + 1));
  toml::table* table = &root;
  std::string_view rest = path;
  for (auto dot = rest.find('.'); dot != std::string_view::npos; dot = rest.find('.')) {
    const std::string part(rest.substr(0, dot));
    auto [it, inserted] = table->insert(part, toml::table{});
    (void)inserted;
    table = it->second.as_table();
    if (!table) throw JobFileError(fmt::format("--set {}: '{}' is not a table in the job file", path, part));
    rest.remove_prefix(dot + 1);
  }
  table->insert_or_assign(std::string(rest), std::move(*parsed.get("v")));
}

class Reader {
 public:
  explicit Reader(toml::table& root) : root_(root) {}
  toml::table& root() { return root_; }

  void check_unknown() {
    for (auto& [table_key, node] : root_) {
      const std::string t(table_key.str());
      const bool known = std::any_of(kKeys.begin(), kKeys.end(), [&](const KeyRule& r) { return t == r.table; });
      if (!known) {
        problem(fmt::format("unknown table [{}]; valid tables: {}", t, valid_tables()));
        continue;
      }
      auto* table = node.as_table();
      if (!table) {
        problem(fmt::format("'{}' must be a table ([{}]), got {}", t, t, node_type_name(node)));
        continue;
      }
      for (auto& [key, value] : *table) {
        const std::string k(key.str());
        const bool ok = (t == "model" && k == "layers") ||
                        std::any_of(kKeys.begin(), kKeys.end(),
                                    [&](const KeyRule& r) { return t == r.table && k == r.key; });
        if (!ok) problem(fmt::format("unknown key '{}.{}'; valid keys in [{}]: {}", t, k, t, valid_keys_of(t)));
        (void)value;
      }
    }
  }

  // Reads a key, inserting its default when absent so the resolved file is complete.
  const toml::node* get(const char* table, const char* key) {
    const KeyRule* rule = nullptr;
    for (const auto& r : kKeys)
      if (std::string_view(r.table) == table && std::string_view(r.key) == key) rule = &r;
    auto [tit, ignored] = root_.insert(table, toml::table{});
    (void)ignored;
    auto* t = tit->second.as_table();
    if (!t) return nullptr;  // reported by check_unknown
    if (!t->contains(key)) {
      if (std::holds_alternative<std::monostate>(rule->fallback)) {
        problem(fmt::format("missing required key '{}.{}' ({}): add it under [{}]", table, key, rule->help, table));
        return nullptr;
      }
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, Numbers>) {
              toml::array values;
              for (const double x : v) values.push_back(x);
              t->insert(key, std::move(values));
            } else if constexpr (!std::is_same_v<T, std::monostate>) {
              t->insert(key, v);
            }
          },
          rule->fallback);
    }
    const toml::node* n = t->get(key);
    const bool type_ok = (rule->kind == Kind::integer && n->is_integer()) ||
                         (rule->kind == Kind::number && (n->is_floating_point() || n->is_integer())) ||
                         (rule->kind == Kind::boolean && n->is_boolean()) ||
                         (rule->kind == Kind::string && n->is_string()) ||
                         (rule->kind == Kind::numbers && n->is_array() &&
                          std::all_of(n->as_array()->begin(), n->as_array()->end(),
                                      [](const toml::node& e) { return e.is_number(); }));
    if (!type_ok) {
      problem(fmt::format("'{}.{}' must be {}, got {}", table, key, kind_name(rule->kind), node_type_name(*n)));
      return nullptr;
    }
    return n;
  }

  int64_t integer(const char* table, const char* key, int64_t min, int64_t max = INT32_MAX) {
    const auto* n = get(table, key);
    if (!n) return min;
    const int64_t v = *n->value<int64_t>();
    if (v < min || v > max) {
      problem(max == INT32_MAX && v < min ? fmt::format("'{}.{}' must be >= {}, got {}", table, key, min, v)
                               : fmt::format("'{}.{}' must be in [{}, {}], got {}", table, key, min, max, v));
      return min;
    }
    return v;
  }

  double number(const char* table, const char* key, double min, double max) {
    const auto* n = get(table, key);
    if (!n) return min;
    const double v = *n->value<double>();
    if (!(v >= min && v <= max)) {
      problem(fmt::format("'{}.{}' must be in [{}, {}], got {}", table, key, min, max, v));
      return min;
    }
    return v;
  }

  // A number in (above, max]: a factor or a power that must not be zero.
  double number_above(const char* table, const char* key, double above, double max) {
    const auto* n = get(table, key);
    if (!n) return max;
    const double v = *n->value<double>();
    if (!(v > above && v <= max)) {
      problem(fmt::format("'{}.{}' must be in ({}, {}], got {}", table, key, above, max, v));
      return max;
    }
    return v;
  }

  // An array of numbers (integers or floats), each in [min, max].
  Numbers numbers(const char* table, const char* key, double min, double max) {
    const auto* n = get(table, key);
    if (!n) return {};
    Numbers values;
    for (const toml::node& element : *n->as_array()) values.push_back(*element.value<double>());
    for (const double v : values)
      if (!(v >= min && v <= max)) {
        problem(fmt::format("'{}.{}' must hold numbers in [{}, {}], got {}", table, key, min, max, v));
        return {};
      }
    return values;
  }

  bool boolean(const char* table, const char* key) {
    const auto* n = get(table, key);
    return n ? *n->value<bool>() : false;
  }

  std::string string(const char* table, const char* key) {
    const auto* n = get(table, key);
    return n ? *n->value<std::string>() : std::string();
  }

  template <class Enum>
  Enum choice(const char* table, const char* key, const std::vector<std::pair<std::string, Enum>>& options) {
    const std::string v = string(table, key);
    for (const auto& [name, value] : options)
      if (v == name) return value;
    std::string names;
    for (const auto& o : options) names += (names.empty() ? "" : " | ") + o.first;
    if (!v.empty() || get(table, key)) problem(fmt::format("'{}.{}' must be one of {}, got \"{}\"", table, key, names, v));
    return options.front().second;
  }

  std::vector<LayerSpec> layers(const toml::node* node, const std::string& where, int depth);
  std::optional<LayerSpec> layer(const toml::table& t, const std::string& at, int depth);
  void layer_values(const toml::table& t, const std::string& at, LayerSpec& spec);

  void problem(std::string text) { problems_.push_back(std::move(text)); }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  toml::table& root_;
  std::vector<std::string> problems_;
};

struct LayerKeys {
  LayerKind kind;
  const char* type;
  std::vector<std::string> allowed;  // besides "type" and "name"
  std::vector<std::string> required;
};

const std::vector<LayerKeys> kLayerKeys = {
    {LayerKind::conv2d, "conv2d", {"filters", "kernel", "stride", "padding", "bias"}, {"filters", "kernel"}},
    {LayerKind::batchnorm, "batchnorm", {"momentum", "epsilon", "init_scale"}, {}},
    {LayerKind::relu, "relu", {}, {}},
    {LayerKind::maxpool, "maxpool", {"size", "stride", "padding"}, {"size"}},
    {LayerKind::avgpool, "avgpool", {"size", "stride", "padding"}, {"size"}},
    {LayerKind::global_avgpool, "global_avgpool", {}, {}},
    {LayerKind::flatten, "flatten", {}, {}},
    {LayerKind::dense, "dense", {"units", "bias"}, {"units"}},
    {LayerKind::dropout, "dropout", {"rate"}, {"rate"}},
    {LayerKind::residual, "residual", {"body", "shortcut", "activation"}, {"body"}},
};

std::vector<LayerSpec> Reader::layers(const toml::node* node, const std::string& where, int depth) {
  std::vector<LayerSpec> out;
  const auto* array = node ? node->as_array() : nullptr;
  if (!array) {
    problem(fmt::format("'{}' must be an array of layer tables, e.g. [[model.layers]] type = \"dense\" ...", where));
    return out;
  }
  for (size_t i = 0; i < array->size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    const auto* t = (*array)[i].as_table();
    if (!t) {
      problem(fmt::format("'{}' must be a table with a 'type' key", at));
      continue;
    }
    if (auto spec = layer(*t, at, depth)) out.push_back(std::move(*spec));
  }
  if (out.empty() && problems_.empty()) problem(fmt::format("'{}' is empty: a model needs at least one layer", where));
  return out;
}

// One layer table: its type, no key its type does not take, its values; nothing when its type is unknown.
std::optional<LayerSpec> Reader::layer(const toml::table& t, const std::string& at, int depth) {
  const auto type = t["type"].value<std::string>();
  const auto lk = std::find_if(kLayerKeys.begin(), kLayerKeys.end(),
                               [&](const LayerKeys& k) { return type && *type == k.type; });
  if (lk == kLayerKeys.end()) {
    std::string types;
    for (const auto& k : kLayerKeys) types += (types.empty() ? "" : ", ") + std::string(k.type);
    problem(fmt::format("'{}.type' must be one of {}, got {}", at, types, type ? "\"" + *type + "\"" : "nothing"));
    return std::nullopt;
  }
  LayerSpec spec;
  spec.kind = lk->kind;
  spec.where = at;
  spec.name = t["name"].value_or(std::string());
  for (const auto& [key, value] : t) {
    const std::string k(key.str());
    if (k != "type" && k != "name" && std::find(lk->allowed.begin(), lk->allowed.end(), k) == lk->allowed.end()) {
      std::string valid = "type, name";
      for (const auto& a : lk->allowed) valid += ", " + a;
      problem(fmt::format("unknown key '{}.{}' for a {} layer; valid keys: {}", at, k, lk->type, valid));
    }
    (void)value;
  }
  for (const auto& r : lk->required)
    if (!t.contains(r)) problem(fmt::format("'{}' ({}) needs '{}'", at, lk->type, r));
  layer_values(t, at, spec);
  if (spec.kind != LayerKind::residual) return spec;
  if (depth > 4) {
    problem(fmt::format("'{}': residual blocks nest at most 4 deep", at));
    return std::nullopt;
  }
  spec.body = layers(t.get("body"), at + ".body", depth + 1);
  if (t.contains("shortcut")) spec.shortcut = layers(t.get("shortcut"), at + ".shortcut", depth + 1);
  const std::string act = t["activation"].value_or(std::string("relu"));
  if (act != "relu" && act != "none") problem(fmt::format("'{}.activation' must be relu or none", at));
  spec.activation_relu = act == "relu";
  return spec;
}

// A layer's numbers and switches, each checked for its type and range; a key the table lacks keeps its default.
void Reader::layer_values(const toml::table& t, const std::string& at, LayerSpec& spec) {
  auto int_key = [&](const char* k, int fallback, int min) {
    if (!t.contains(k)) return fallback;
    const auto v = t[k].value<int64_t>();
    if (!t[k].is_integer() || !v) {
      problem(fmt::format("'{}.{}' must be an integer, got {}", at, k, node_type_name(*t.get(k))));
      return fallback;
    }
    if (*v < min || *v > 1 << 20) {  // 2^20 keeps every size computed from a layer's numbers within range
      problem(fmt::format("'{}.{}' must be in [{}, {}], got {}", at, k, min, 1 << 20, *v));
      return fallback;
    }
    return static_cast<int>(*v);
  };
  auto num_key = [&](const char* k, double fallback, double lo, double hi) {
    if (!t.contains(k)) return fallback;
    const auto v = t[k].value<double>();
    if (!v || !(*v >= lo && *v <= hi)) {
      problem(fmt::format("'{}.{}' must be a number in [{}, {}]", at, k, lo, hi));
      return fallback;
    }
    return *v;
  };
  auto bool_key = [&](const char* k, bool fallback) {
    if (!t.contains(k)) return fallback;
    const auto v = t[k].value<bool>();
    if (!t[k].is_boolean() || !v) {
      problem(fmt::format("'{}.{}' must be true or false", at, k));
      return fallback;
    }
    return *v;
  };
  spec.filters = int_key("filters", 0, 1);
  spec.kernel = int_key("kernel", 0, 1);
  spec.size = int_key("size", 0, 1);
  spec.stride = int_key("stride", spec.kind == LayerKind::conv2d ? 1 : spec.size, 1);
  spec.padding = int_key("padding", 0, 0);
  spec.units = int_key("units", 0, 1);
  spec.bias = bool_key("bias", true);
  spec.rate = num_key("rate", 0.0, 0.0, 0.99);
  spec.momentum = num_key("momentum", 0.1, 0.0, 1.0);
  spec.epsilon = num_key("epsilon", 1e-5, 1e-12, 1.0);
  spec.init_scale = num_key("init_scale", 1.0, 0.0, 10.0);
}

}  // namespace

const char* layer_kind_name(LayerKind kind) {
  for (const auto& lk : kLayerKeys)
    if (lk.kind == kind) return lk.type;
  return "?";
}

JobConfig load_job(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  const PathProbe probe = probe_path(file);
  if (probe.kind == PathProbe::Kind::missing)
    throw JobFileError(fmt::format("job file '{}' does not exist (see jobs/ for examples)", file.string()));
  // Only regular files of bounded size: a FIFO would block and /dev/zero would never end.
  if (probe.kind != PathProbe::Kind::regular)
    throw JobFileError(fmt::format("job file '{}' {}; a job file is a regular TOML file (see jobs/ for examples)",
                                   file.string(), probe.describe()));
  if (probe.size > kMaxJobFileBytes)
    throw JobFileError(fmt::format("job file '{}' holds {} bytes; a job file is at most {} bytes (is it the right "
                                   "file?)",
                                   file.string(), probe.size, kMaxJobFileBytes));
  std::ifstream in(file, std::ios::binary);
  std::string text(kMaxJobFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad() || (!in && !in.eof()))
    throw JobFileError(fmt::format("job file '{}' cannot be read: {}", file.string(), std::strerror(errno)));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxJobFileBytes)
    throw JobFileError(fmt::format("job file '{}' grew past {} bytes while being read", file.string(), kMaxJobFileBytes));
  return parse_job(text, file, overrides);
}

namespace {

// Each section's keys, read and checked; problems are collected in the reader.
void read_data(Reader& r, JobConfig& c) {
  c.data.train = r.string("data", "train");
  c.data.test = r.string("data", "test");
  c.data.prefetch_batches = static_cast<int>(r.integer("data", "prefetch_batches", 1, 1024));
  c.data.augment.kind = r.choice<AugmentKind>("data", "augment",
                                              {{"none", AugmentKind::none},
                                               {"pad_crop_flip", AugmentKind::pad_crop_flip},
                                               {"resized_crop_flip", AugmentKind::resized_crop_flip}});
  c.data.augment.pad = static_cast<int>(r.integer("data", "augment_pad", 0, 1024));
  c.data.augment.min_area = static_cast<float>(r.number("data", "augment_min_area", 0.01, 1.0));
  c.data.loader_threads = static_cast<int>(r.integer("data", "loader_threads", 0, 256));
  c.data.eval_resize = static_cast<int>(r.integer("data", "eval_resize", 0, 65536));
  c.data.decode = r.choice<DecodeOn>("data", "decode", {{"auto", DecodeOn::auto_detect}, {"cpu", DecodeOn::cpu}, {"gpu", DecodeOn::gpu}});
  c.data.normalize = r.choice<NormalizeOn>(
      "data", "normalize", {{"auto", NormalizeOn::auto_detect}, {"loader", NormalizeOn::loader}, {"device", NormalizeOn::device}});
}

// The decay after warm-up and its knobs; milestones must climb, or the rate would jump back up.
void read_schedule(Reader& r, JobConfig::Optimizer& o) {
  o.schedule = r.choice<LrSchedule>("optimizer", "schedule",
                                    {{"cosine", LrSchedule::cosine},
                                     {"constant", LrSchedule::constant},
                                     {"steps", LrSchedule::steps},
                                     {"poly", LrSchedule::poly}});
  o.min_lr = r.number("optimizer", "min_lr", 0.0, 1e3);
  o.milestones = r.numbers("optimizer", "milestones", 0.0, 1e5);
  for (size_t i = 1; i < o.milestones.size(); ++i)
    if (!(o.milestones[i] > o.milestones[i - 1])) {
      r.problem(fmt::format("'optimizer.milestones' must increase, but {} follows {}", o.milestones[i],
                            o.milestones[i - 1]));
      break;
    }
  if (o.schedule == LrSchedule::steps && o.milestones.empty())
    r.problem("optimizer.schedule = \"steps\" needs 'optimizer.milestones', the epochs at which the rate drops, "
              "e.g. [30, 60, 80]");
  o.decay_factor = r.number_above("optimizer", "decay_factor", 0.0, 1.0);
  o.poly_power = r.number_above("optimizer", "poly_power", 0.0, 1e3);
}

void read_training(Reader& r, JobConfig& c) {
  c.train.epochs = static_cast<int>(r.integer("train", "epochs", 1, 100000));
  c.train.batch_per_rank = static_cast<int>(r.integer("train", "batch_per_rank", 1, 1 << 20));
  c.train.max_steps_per_epoch = r.integer("train", "max_steps_per_epoch", 0, INT64_MAX);
  c.train.seed = static_cast<uint64_t>(r.integer("train", "seed", 0, INT64_MAX));
  c.train.accumulate_steps = static_cast<int>(r.integer("train", "accumulate_steps", 1, 4096));
  c.train.shuffle = r.boolean("train", "shuffle");
  c.train.precision = r.choice<Precision>(
      "train", "precision",
      {{"fp32", Precision::fp32}, {"tf32", Precision::tf32}, {"bf16", Precision::bf16}, {"fp16", Precision::fp16}});
  c.train.loss_scale_init = r.number("train", "loss_scale_init", 1e-6, 1e19);
  c.train.loss_scale_growth_interval = r.integer("train", "loss_scale_growth_interval", 0, INT64_MAX);
  c.train.label_smoothing = r.number("train", "label_smoothing", 0.0, 0.999);
  c.optimizer.kind = r.choice<OptimizerKind>("optimizer", "name",
                                             {{"sgd", OptimizerKind::sgd},
                                              {"adamw", OptimizerKind::adamw},
                                              {"lars", OptimizerKind::lars},
                                              {"lamb", OptimizerKind::lamb}});
  c.optimizer.base_lr = r.number("optimizer", "base_lr", 0.0, 1e3);
  c.optimizer.base_batch = static_cast<int>(r.integer("optimizer", "base_batch", 1, 1 << 24));
  c.optimizer.lr_scaling = r.choice<LrScaling>(
      "optimizer", "lr_scaling", {{"linear", LrScaling::linear}, {"sqrt", LrScaling::sqrt}, {"none", LrScaling::none}});
  c.optimizer.momentum = r.number("optimizer", "momentum", 0.0, 0.9999);
  c.optimizer.beta1 = r.number("optimizer", "beta1", 0.0, 0.9999);
  c.optimizer.beta2 = r.number("optimizer", "beta2", 0.0, 0.999999);
  c.optimizer.epsilon = r.number("optimizer", "epsilon", 0.0, 1.0);
  c.optimizer.trust_coefficient = r.number("optimizer", "trust_coefficient", 0.0, 1e3);
  c.optimizer.weight_decay = r.number("optimizer", "weight_decay", 0.0, 1.0);
  c.optimizer.warmup_epochs = r.number("optimizer", "warmup_epochs", 0.0, 1e5);
  read_schedule(r, c.optimizer);
  c.optimizer.nesterov = r.boolean("optimizer", "nesterov");
  c.optimizer.clip_global_norm = r.number("optimizer", "clip_global_norm", 0.0, 1e9);
  c.train.eval_every_epochs = static_cast<int>(r.integer("train", "eval_every_epochs", 1, 100000));
}

void read_model(Reader& r, JobConfig& c) {
  c.model.name = r.string("model", "name");
  if (auto* model = r.root()["model"].as_table(); model && model->contains("layers")) {
    c.model.layers = r.layers(model->get("layers"), "model.layers", 0);
  } else {
    r.problem("missing required key 'model.layers': declare the model as [[model.layers]] tables ending in a "
              "dense layer with one unit per class");
  }
}

void read_run(Reader& r, JobConfig& c) {
  c.run.dir = r.string("run", "dir");
  c.run.device = r.choice<DeviceChoice>(
      "run", "device", {{"auto", DeviceChoice::auto_detect}, {"cpu", DeviceChoice::cpu}, {"cuda", DeviceChoice::cuda}});
  c.run.threads = static_cast<int>(r.integer("run", "threads", 0, 4096));
  c.run.progress_every_s = r.number("run", "progress_every_s", 0.0, 1e6);
  c.run.timing_warmup_steps = static_cast<int>(r.integer("run", "timing_warmup_steps", 0, 1000000));
  c.run.overwrite = r.boolean("run", "overwrite");
  c.run.collective_timeout_s = r.number("run", "collective_timeout_s", 0.0, 1e6);
  c.run.checkpoint_every = static_cast<int>(r.integer("run", "checkpoint_every", 0, 1000000));
  c.run.checkpoint_every_steps = r.integer("run", "checkpoint_every_steps", 0, INT64_MAX);
  c.run.keep_checkpoints = static_cast<int>(r.integer("run", "keep_checkpoints", 1, 1000000));
  c.run.consistency_every = r.integer("run", "consistency_every", 0, INT64_MAX);
  c.run.profile_layers = r.boolean("run", "profile_layers");
  c.run.fuse_layers = r.boolean("run", "fuse_layers");
  c.run.trace = r.boolean("run", "trace");
  c.run.trace_steps = static_cast<int>(r.integer("run", "trace_steps", 1, 1000000));
  c.run.tensorboard = r.boolean("run", "tensorboard");
  c.run.monitor_every_s = r.number("run", "monitor_every_s", 0.0, 86400.0);
}

void read_dist_and_gpu(Reader& r, JobConfig& c) {
  c.dist.bucket_mb = r.number("dist", "bucket_mb", 0.001, 4096);
  c.dist.reducer = r.choice<CpuReducer>("dist", "reducer",
                                        {{"auto", CpuReducer::automatic},
                                         {"nonblocking", CpuReducer::nonblocking},
                                         {"thread", CpuReducer::thread},
                                         {"shared", CpuReducer::shared}});
  c.dist.node_ranks = static_cast<int>(r.integer("dist", "node_ranks", 0, 1 << 20));
  c.dist.allreduce_dtype =
      r.choice<WireFormat>("dist", "allreduce_dtype", {{"fp32", WireFormat::fp32}, {"bf16", WireFormat::bf16}});
  c.gpu.measure_algorithms = r.choice<bool>("gpu", "conv_algorithms", {{"heuristic", false}, {"measure", true}});
  c.gpu.deterministic = r.boolean("gpu", "deterministic");
  c.gpu.workspace_mb = r.number("gpu", "workspace_mb", 0.0, 1e6);
  c.gpu.share_device = r.boolean("gpu", "share_device");
  c.gpu.nhwc = r.boolean("gpu", "nhwc");
  c.gpu.cudnn_graphs = r.boolean("gpu", "cudnn_graphs");
  c.gpu.few_channel_gemm = r.boolean("gpu", "few_channel_gemm");
}

}  // namespace

JobConfig parse_job(std::string_view toml_text, const std::filesystem::path& file,
                    const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(toml_text, file.string());
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw JobFileError(fmt::format("job file '{}' is not valid TOML at line {}, column {}: {}", file.string(),
                                   where.line, where.column, e.description()));
  }
  for (const auto& o : overrides) apply_override(root, o);

  Reader r(root);
  r.check_unknown();
  JobConfig c;
  c.source = file;
  read_data(r, c);
  read_training(r, c);
  read_model(r, c);
  read_run(r, c);
  read_dist_and_gpu(r, c);

  if (!r.problems().empty()) {
    std::string message = fmt::format("job file '{}' has {} problem{}:", file.string(), r.problems().size(),
                                      r.problems().size() == 1 ? "" : "s");
    for (const auto& p : r.problems()) message += "\n  - " + p;
    throw JobFileError(message);
  }
  std::ostringstream resolved;
  resolved << "# resolved by ringtrain from " << file.string() << " (defaults filled, --set applied)\n" << root << "\n";
  c.resolved_toml = resolved.str();
  return c;
}

std::string describe_keys() {
  std::string out = "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto& r : kKeys) {
    std::string fallback = std::visit(
        [](const auto& v) -> std::string {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::monostate>) return "required";
          else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
          else if constexpr (std::is_same_v<T, std::string>) return "\"" + v + "\"";
          else if constexpr (std::is_same_v<T, Numbers>) return fmt::format("[{}]", fmt::join(v, ", "));
          else return fmt::format("{}", v);
        },
        r.fallback);
    std::string help;  // a bare '|' would end the Markdown table cell
    for (const char* c = r.help; *c != '\0'; ++c) {
      if (*c == '|') help += '\\';
      help += *c;
    }
    out += fmt::format("| `{}.{}` | {} | {} | {} |\n", r.table, r.key, kind_name(r.kind), fallback, help);
  }
  out += "| `model.layers` | array of tables | required | the model, see below |\n";
  return out;
}

}  // namespace ringtrain::config
