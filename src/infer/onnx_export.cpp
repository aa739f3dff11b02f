// Owns the layer-by-layer translation to ONNX; see onnx_export.h.
#include "infer/onnx_export.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "infer/onnx_graph.h"
#include "util/versions.h"

namespace ringtrain::infer {
namespace {

using config::LayerKind;
using config::LayerSpec;

// Walks the checkpoint's parameter tensors and running statistics in the order the network declared them.
class WeightCursor {
 public:
  WeightCursor(const io::CheckpointData& c, const std::string& path) : c_(c), path_(path) {}
  // The next parameter tensor, which must end in `suffix`; its values.
  const float* take(const char* suffix, int64_t& count) {
    if (tensor_ >= c_.tensor_names.size() || !c_.tensor_names[tensor_].ends_with(suffix))
      throw CheckpointError(fmt::format("checkpoint '{}' does not follow its job's layers: expected a '{}' tensor at "
                                        "position {}, found '{}'",
                                        path_, suffix, tensor_,
                                        tensor_ < c_.tensor_names.size() ? c_.tensor_names[tensor_] : "nothing"));
    count = c_.tensor_sizes[tensor_++];
    const float* values = c_.params.data() + offset_;
    offset_ += count;
    return values;
  }
  // The next `count` running statistics, averaged over the ranks' rows.
  std::vector<float> statistics(int64_t count) {
    std::vector<float> mean(static_cast<size_t>(count), 0.0f);
    for (int64_t r = 0; r < c_.ranks; ++r)
      for (int64_t i = 0; i < count; ++i)
        mean[static_cast<size_t>(i)] += c_.states[static_cast<size_t>(r * c_.state_count + state_ + i)] /
                                        static_cast<float>(c_.ranks);
    state_ += count;
    return mean;
  }

 private:
  const io::CheckpointData& c_;
  std::string path_;
  size_t tensor_ = 0;
  int64_t offset_ = 0, state_ = 0;
};

struct Emitter {
  OnnxGraph& g;
  WeightCursor& w;

  std::string weights(const char* suffix, const std::vector<int64_t>& dims_after_first, int64_t& first) {
    int64_t count = 0;
    const float* v = w.take(suffix, count);
    int64_t rest = 1;
    for (int64_t d : dims_after_first) rest *= d;
    first = count / rest;
    std::vector<int64_t> dims{first};
    dims.insert(dims.end(), dims_after_first.begin(), dims_after_first.end());
    return g.initializer(fmt::format("w{}", next_++), dims, v);
  }

  std::string conv(const LayerSpec& s, const std::string& x) {
    int64_t count = 0;
    // The weight is K x C x k x k: C follows from its size.
    const float* v = w.take(".weight", count);
    const int64_t filters = s.filters;
    const int64_t channels = count / (filters * s.kernel * s.kernel);
    std::vector<std::string> in{x, g.initializer(fmt::format("w{}", next_++), {filters, channels, s.kernel, s.kernel}, v)};
    if (s.bias) in.push_back(weights(".bias", {}, count));
    return g.node("Conv", in, {OnnxAttribute::list("kernel_shape", {s.kernel, s.kernel}),
                               OnnxAttribute::list("strides", {s.stride, s.stride}),
                               OnnxAttribute::list("pads", {s.padding, s.padding, s.padding, s.padding})});
  }

  std::string batchnorm(const LayerSpec& s, const std::string& x) {
    int64_t channels = 0;
    const std::string gamma = weights(".gamma", {}, channels), beta = weights(".beta", {}, channels);
    const std::vector<float> mean = w.statistics(channels), var = w.statistics(channels);
    const std::string m = g.initializer(fmt::format("w{}", next_++), {channels}, mean.data());
    const std::string v = g.initializer(fmt::format("w{}", next_++), {channels}, var.data());
    return g.node("BatchNormalization", {x, gamma, beta, m, v},
                  {OnnxAttribute::floating("epsilon", static_cast<float>(s.epsilon))});
  }

  std::string pool(const LayerSpec& s, const std::string& x) {
    std::vector<OnnxAttribute> a{OnnxAttribute::list("kernel_shape", {s.size, s.size}),
                                 OnnxAttribute::list("strides", {s.stride, s.stride}),
                                 OnnxAttribute::list("pads", {s.padding, s.padding, s.padding, s.padding})};
    if (s.kind == LayerKind::maxpool) return g.node("MaxPool", {x}, a);
    a.push_back(OnnxAttribute::integer("count_include_pad", 1));  // ringtrain's average counts padding as zeros
    return g.node("AveragePool", {x}, a);
  }

  std::string dense(const LayerSpec& s, const std::string& x) {
    const std::string flat = g.node("Flatten", {x}, {OnnxAttribute::integer("axis", 1)});
    int64_t count = 0;
    const float* v = w.take(".weight", count);
    const int64_t units = s.units;
    std::vector<std::string> in{flat, g.initializer(fmt::format("w{}", next_++), {units, count / units}, v)};
    if (s.bias) in.push_back(weights(".bias", {}, count));
    return g.node("Gemm", in, {OnnxAttribute::integer("transB", 1)});
  }

  std::string layer(const LayerSpec& s, const std::string& x) {
    switch (s.kind) {
      case LayerKind::conv2d: return conv(s, x);
      case LayerKind::batchnorm: return batchnorm(s, x);
      case LayerKind::relu: return g.node("Relu", {x});
      case LayerKind::maxpool:
      case LayerKind::avgpool: return pool(s, x);
      case LayerKind::global_avgpool: return g.node("GlobalAveragePool", {x});
      case LayerKind::flatten: return g.node("Flatten", {x}, {OnnxAttribute::integer("axis", 1)});
      case LayerKind::dense: return dense(s, x);
      case LayerKind::dropout: return x;  // inference form
      case LayerKind::residual: return residual(s, x);
    }
    return x;
  }

  std::string layers(const std::vector<LayerSpec>& specs, std::string x) {
    for (const LayerSpec& s : specs) x = layer(s, x);
    return x;
  }

  std::string residual(const LayerSpec& s, const std::string& x) {
    const std::string body = layers(s.body, x);
    const std::string shortcut = s.shortcut.empty() ? x : layers(s.shortcut, x);
    const std::string sum = g.node("Add", {body, shortcut});
    return s.activation_relu ? g.node("Relu", {sum}) : sum;
  }

  int next_ = 0;
};

// (x - mean) / std per channel, as the data loader normalises (0..255 units; no statistics: x / 255).
std::string normalised_input(OnnxGraph& g, const io::DatasetMeta& data) {
  const int c = data.shape.channels;
  std::vector<float> mean(static_cast<size_t>(c), 0.0f), sd(static_cast<size_t>(c), 255.0f);
  if (data.mean.size() == mean.size()) mean = data.mean;
  if (data.stddev.size() == sd.size())
    for (size_t i = 0; i < sd.size(); ++i) sd[i] = data.stddev[i] > 0 ? data.stddev[i] : 255.0f;
  g.input("pixels", {c, data.shape.height, data.shape.width});
  const std::string centred = g.node("Sub", {"pixels", g.initializer("input_mean", {1, c, 1, 1}, mean.data())});
  return g.node("Div", {centred, g.initializer("input_std", {1, c, 1, 1}, sd.data())});
}

std::vector<std::pair<std::string, std::string>> metadata(const ExportSource& s) {
  const auto& d = s.data;
  return {{"class_names", nlohmann::json(s.class_names).dump()},
          {"input", fmt::format("pixels: float32 N x {} x {} x {}, raw pixel values 0..255 (uint8 as float); the "
                                "graph normalises them per channel as (x - mean) / std",
                                d.shape.channels, d.shape.height, d.shape.width)},
          {"normalisation_mean", nlohmann::json(d.mean).dump()},
          {"normalisation_std", nlohmann::json(d.stddev).dump()},
          {"outputs", "logits: N x classes; probabilities: softmax of the logits"},
          {"checkpoint", s.checkpoint_path},
          {"run_id", s.checkpoint.run_id},
          {"model", s.job.model.name}};
}

}  // namespace

void export_onnx(const ExportSource& source, const std::filesystem::path& file) {
  OnnxGraph g;
  WeightCursor cursor(source.checkpoint, source.checkpoint_path);
  Emitter emit{g, cursor};
  const std::string features = emit.layers(source.job.model.layers, normalised_input(g, source.data));
  const int64_t classes = source.data.num_classes;
  g.node("Flatten", {features}, {OnnxAttribute::integer("axis", 1)}, "logits");
  g.node("Softmax", {"logits"}, {OnnxAttribute::integer("axis", 1)}, "probabilities");
  g.output("logits", {classes});
  g.output("probabilities", {classes});
  g.write(file, metadata(source), util::ringtrain_version());
}

}  // namespace ringtrain::infer
