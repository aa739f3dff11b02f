// Owns the layer-by-layer translation to ONNX; see onnx_export.h.
#include "infer/onnx_export.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "data/normalisation.h"
#include "data/photo_sample.h"
#include "io/onnx_graph.h"
#include "model/layer_registry.h"
#include "util/versions.h"
#include "util/json_text.h"

namespace ringtrain::infer {
namespace {

using config::LayerSpec;
using io::OnnxAttribute;
using io::OnnxGraph;

// The layers in order, each in the form its kind registered (model/layer_registry.h); residual blocks as their
// body and shortcut joined by an Add (and its ReLU).
struct Emitter {
  model::OnnxLayerWriter& w;

  std::string layers(const std::vector<LayerSpec>& specs, std::string x) {
    for (const LayerSpec& s : specs) x = s.is(config::kResidual) ? residual(s, x) : model::layer_kind(s).onnx(w, s, x);
    return x;
  }

  std::string residual(const LayerSpec& s, const std::string& x) {
    const std::string body = layers(s.body, x);
    const std::string shortcut = s.shortcut.empty() ? x : layers(s.shortcut, x);
    const std::string sum = w.graph().node("Add", {body, shortcut});
    return s.activation_relu ? w.graph().node("Relu", {sum}) : sum;
  }
};

// (x - mean) / std per channel, as the data loader normalises (0..255 units).
std::string normalised_input(OnnxGraph& g, const io::DatasetMeta& data, const train::InputNorm& norm) {
  const int c = data.shape.channels;
  g.input("pixels", {c, data.shape.height, data.shape.width});
  const std::string centred = g.node("Sub", {"pixels", g.initializer("input_mean", {1, c, 1, 1}, norm.mean.data())});
  return g.node("Div", {centred, g.initializer("input_std", {1, c, 1, 1}, norm.stddev.data())});
}

// The shorter side predict resizes a photo to before its centre crop, where the model evaluates photos so (trained
// on JPEG shards, or its job sets data.eval_resize); 0 where it scales the shorter side to the sample's instead.
int photo_resize(const ExportSource& s) {
  const bool crops = s.data.storage == io::SampleStorage::jpeg || s.job.data.eval_resize > 0;
  return crops ? train::evaluation_resize(s.job.data.eval_resize, s.data.shape) : 0;
}

std::vector<std::pair<std::string, std::string>> metadata(const ExportSource& s, const train::InputNorm& norm) {
  const auto& d = s.data;
  return {{"class_names", util::json_text(nlohmann::json(s.class_names))},
          {"input", fmt::format("pixels: float32 N x {} x {} x {}, raw pixel values 0..255 (uint8 as float); the "
                                "graph normalises them per channel as (x - mean) / std",
                                d.shape.channels, d.shape.height, d.shape.width)},
          {"normalisation_mean", util::json_text(nlohmann::json(norm.mean))},
          {"normalisation_std", util::json_text(nlohmann::json(norm.stddev))},
          {"outputs", "logits: N x classes; probabilities: softmax of the logits"},
          {"eval_resize", std::to_string(photo_resize(s))},
          {"checkpoint", s.checkpoint_path},
          {"run_id", s.checkpoint.run_id},
          {"model", s.job.model.name}};
}

}  // namespace

void export_onnx(const ExportSource& source, const std::filesystem::path& file) {
  OnnxGraph g;
  model::OnnxLayerWriter writer(g, source.checkpoint, source.checkpoint_path);
  Emitter emit{writer};
  const train::InputNorm norm = train::input_norm(source.data, source.job.data);
  const std::string features = emit.layers(source.job.model.layers, normalised_input(g, source.data, norm));
  const int64_t classes = source.data.num_classes;
  g.node("Flatten", {features}, {OnnxAttribute::integer("axis", 1)}, "logits");
  g.node("Softmax", {"logits"}, {OnnxAttribute::integer("axis", 1)}, "probabilities");
  g.output("logits", {classes});
  g.output("probabilities", {classes});
  g.write(file, metadata(source, norm), util::ringtrain_version());
}

}  // namespace ringtrain::infer
