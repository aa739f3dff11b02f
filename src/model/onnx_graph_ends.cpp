// Owns the recognition of the graph's ends; see onnx_graph_ends.h.
#include "model/onnx_graph_ends.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ringtrain::model {
namespace {

using io::OnnxModel;
using io::OnnxNode;

std::vector<const OnnxNode*> users_of(const OnnxModel& model, const std::string& value) {
  std::vector<const OnnxNode*> users;
  for (const OnnxNode& node : model.nodes)
    if (std::find(node.inputs.begin(), node.inputs.end(), value) != node.inputs.end()) users.push_back(&node);
  return users;
}

// The per-channel float constant of 1 x C x 1 x 1 a node takes as its second input, else null.
const io::OnnxTensor* per_channel_constant(const OnnxModel& model, const OnnxNode& node) {
  if (node.inputs.size() != 2) return nullptr;
  const io::OnnxTensor* t = model.initializer(node.inputs[1]);
  if (!t || t->data_type != 1 || t->dims.size() != 4 || t->dims[0] != 1 || t->dims[2] != 1 || t->dims[3] != 1 ||
      static_cast<int64_t>(t->floats.size()) != t->dims[1])
    return nullptr;
  return t;
}

void remove_nodes(OnnxModel& model, const std::vector<const OnnxNode*>& gone) {
  std::vector<OnnxNode> kept;
  for (OnnxNode& n : model.nodes)
    if (std::find(gone.begin(), gone.end(), &n) == gone.end()) kept.push_back(std::move(n));
  model.nodes = std::move(kept);
}

const OnnxNode* producer_of(const OnnxModel& model, const std::string& value) {
  for (const OnnxNode& node : model.nodes)
    if (std::find(node.outputs.begin(), node.outputs.end(), value) != node.outputs.end()) return &node;
  return nullptr;
}

// A Flatten at axis 1 of a Gemm's output (2-D already) that gives the graph's output: ringtrain's export flattens
// its last layer's output whatever it is. The Gemm's output becomes the graph's.
void drop_flatten_of_gemm(OnnxModel& model) {
  const OnnxNode* flatten = producer_of(model, model.outputs[0]);
  if (!flatten || flatten->op != "Flatten" || flatten->inputs.size() != 1 ||
      (flatten->attribute("axis") && flatten->attribute("axis")->integer != 1))
    return;
  const OnnxNode* gemm = producer_of(model, flatten->inputs[0]);
  if (!gemm || gemm->op != "Gemm" || users_of(model, flatten->inputs[0]).size() != 1) return;
  const std::string logits = flatten->inputs[0];
  remove_nodes(model, {flatten});
  model.outputs[0] = logits;
}

}  // namespace

void drop_probability_outputs(OnnxModel& model) {
  std::vector<const OnnxNode*> softmaxes;
  std::vector<std::string> kept;
  for (const std::string& out : model.outputs) {
    const OnnxNode* producer = producer_of(model, out);
    const bool of_another_output =
        producer && producer->op == "Softmax" && producer->inputs.size() == 1 &&
        producer->inputs[0] != out &&
        std::find(model.outputs.begin(), model.outputs.end(), producer->inputs[0]) != model.outputs.end() &&
        users_of(model, out).empty();
    if (of_another_output)
      softmaxes.push_back(producer);
    else
      kept.push_back(out);
  }
  if (kept.empty()) return;  // Softmaxes of each other: nothing here to decide which are the logits
  remove_nodes(model, softmaxes);
  model.outputs = std::move(kept);
  if (model.outputs.size() == 1) drop_flatten_of_gemm(model);
}

std::optional<InputNormalisation> take_input_normalisation(OnnxModel& model) {
  if (!model.written_by_ringtrain() || model.inputs.size() != 1) return std::nullopt;
  const std::vector<const OnnxNode*> first = users_of(model, model.inputs[0]);
  if (first.size() != 1 || first[0]->op != "Sub" || first[0]->inputs[0] != model.inputs[0] ||
      first[0]->outputs.size() != 1)
    return std::nullopt;
  const std::vector<const OnnxNode*> second = users_of(model, first[0]->outputs[0]);
  if (second.size() != 1 || second[0]->op != "Div" || second[0]->inputs[0] != first[0]->outputs[0] ||
      second[0]->outputs.size() != 1)
    return std::nullopt;
  const io::OnnxTensor *mean = per_channel_constant(model, *first[0]), *stddev = per_channel_constant(model, *second[0]);
  if (!mean || !stddev || mean->floats.size() != stddev->floats.size() ||
      !std::all_of(mean->floats.begin(), mean->floats.end(), [](float v) { return std::isfinite(v); }) ||
      !std::all_of(stddev->floats.begin(), stddev->floats.end(), [](float v) { return std::isfinite(v) && v > 0; }))
    return std::nullopt;
  InputNormalisation taken{mean->floats, stddev->floats};
  const std::string normalised = second[0]->outputs[0];
  remove_nodes(model, {first[0], second[0]});
  model.inputs[0] = normalised;
  return taken;
}

}  // namespace ringtrain::model
