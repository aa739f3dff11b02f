// Owns building the step list from the job file's layer specs: chains in order, a residual block as its body's
// steps, then its shortcut's, then the join; then, with fusion on, the fusion pass over it.
#include "model/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/error.h"
#include "model/fusion_pass.h"
#include "model/layers/layers.h"

namespace ringtrain::model {
namespace {

constexpr uint64_t kShortcutXor = 0x9e3779b97f4a7c15ull;  // the golden ratio: shortcut seeds draw apart from the body's

// A tensor past this many values (4 TiB of floats) fits no node's memory; refusing it here also keeps every
// size computed from shapes later within 64 bits.
constexpr double kMaxTensorValues = 1099511627776.0;

void check_size(const config::LayerSpec& spec, const Layer& layer, const Shape& in, const Shape& out) {
  const double values = static_cast<double>(out.n) * out.c * static_cast<double>(out.h) * out.w;
  if (values > kMaxTensorValues)
    throw JobFileError(fmt::format("{} ({}) turns input {} per sample into {}x{}x{} per sample, {:.3g} values per "
                                   "batch: more than any memory holds; check its size, padding, filters or units",
                                   spec.where, layer.describe(), in.with_batch(1).str(), out.c, out.h, out.w, values));
}

}  // namespace

MemoryUse Step::memory_use() const {
  if (layer) return layer->memory_use();
  // The sum may be written over the body's output; with a ReLU, backward reads the result for its mask.
  return {.backward_reads_output = relu, .output = OutputMemory::may_overwrite_input};
}

Graph::Graph(const std::vector<config::LayerSpec>& specs, Backend& backend, Shape input, bool fuse,
             ElementType activations)
    : activation_type_(activations) {
  add_value(input, -1);
  std::vector<int> unfused_ends;
  output_ = emit_chain(specs, kInput, kernels::LayerSeed{}, 0, backend, &unfused_ends);
  const std::map<const Layer*, int> top_level = top_level_of_layers(unfused_ends);
  if (fuse) {
    const std::vector<const Layer*> taken =
        run_fusion_pass({steps_, values_, step_specs_, output_}, backend, activations);
    std::erase_if(layer_order_, [&](const Layer* l) { return std::ranges::find(taken, l) != taken.end(); });
  }
  step_specs_.clear();  // the specs are the caller's
  count_top_level_ends(top_level, specs.size());
}

std::map<const Layer*, int> Graph::top_level_of_layers(const std::vector<int>& unfused_ends) const {
  std::map<const Layer*, int> top_level;
  int spec = 0;
  for (int k = 0; k < static_cast<int>(steps_.size()); ++k) {
    while (k >= unfused_ends[static_cast<size_t>(spec)]) ++spec;
    if (const Layer* layer = steps_[static_cast<size_t>(k)].layer) top_level[layer] = spec;
  }
  return top_level;
}

// A step runs the layer it was made from (a fused producer keeps its own spec's place); an unfused join has none
// and belongs to the block of the step before it, the last of its body or shortcut.
void Graph::count_top_level_ends(const std::map<const Layer*, int>& top_level, size_t specs) {
  top_level_ends_.assign(specs, 0);
  int spec = 0;
  for (size_t k = 0; k < steps_.size(); ++k) {
    if (const Layer* layer = steps_[k].layer) spec = top_level.at(layer);
    top_level_ends_[static_cast<size_t>(spec)] = static_cast<int>(k) + 1;
  }
  for (size_t i = 1; i < specs; ++i) top_level_ends_[i] = std::max(top_level_ends_[i], top_level_ends_[i - 1]);
}

int Graph::add_value(Shape shape, int producer) {
  values_.push_back({shape, producer, {}});
  return static_cast<int>(values_.size()) - 1;
}

int Graph::emit_chain(const std::vector<config::LayerSpec>& specs, int input, const kernels::LayerSeed& chain_seed,
                      uint64_t chain_xor, Backend& backend, std::vector<int>* ends) {
  int current = input;
  for (size_t i = 0; i < specs.size(); ++i) {
    kernels::LayerSeed seed = chain_seed;
    if (seed.depth >= kernels::kMaxSeedLevels)
      throw JobFileError(fmt::format("{}: residual blocks are nested more than {} deep here; nest them less deeply",
                                     specs[i].where, kernels::kMaxSeedLevels - 1));
    seed.levels[seed.depth++] = {chain_xor, i};
    if (specs[i].is(config::kResidual)) {
      current = emit_residual(specs[i], current, seed, backend);
      if (ends) ends->push_back(static_cast<int>(steps_.size()));
      continue;
    }
    owned_.push_back(make_layer(specs[i], backend, activation_type_));
    Layer* layer = owned_.back().get();
    const Shape in = values_[static_cast<size_t>(current)].shape;
    const Shape out = layer->setup(in);
    check_size(specs[i], *layer, in, out);
    const int step = static_cast<int>(steps_.size());
    values_[static_cast<size_t>(current)].consumers.push_back(step);
    const int output = add_value(out, step);
    steps_.push_back({Step::Kind::layer, layer, {current}, output, false, seed});
    step_specs_.push_back(&specs[i]);
    layer_order_.push_back(layer);
    current = output;
    if (ends) ends->push_back(static_cast<int>(steps_.size()));
  }
  return current;
}

int Graph::emit_residual(const config::LayerSpec& spec, int input, const kernels::LayerSeed& seed, Backend& backend) {
  const int body = emit_chain(spec.body, input, seed, 0, backend);
  const Shape body_shape = values_[static_cast<size_t>(body)].shape;
  const int shortcut = spec.shortcut.empty() ? input : emit_chain(spec.shortcut, input, seed, kShortcutXor, backend);
  const Shape shortcut_shape = values_[static_cast<size_t>(shortcut)].shape;
  if (!(body_shape == shortcut_shape))
    throw JobFileError(fmt::format("{} (residual): body gives {} per batch but the shortcut gives {}; add a "
                                   "shortcut (e.g. conv2d kernel=1 with the body's filters and stride) so they match",
                                   spec.where, body_shape.str(), shortcut_shape.str()));
  const int step = static_cast<int>(steps_.size());
  values_[static_cast<size_t>(body)].consumers.push_back(step);
  values_[static_cast<size_t>(shortcut)].consumers.push_back(step);
  const int output = add_value(body_shape, step);
  steps_.push_back({Step::Kind::join, nullptr, {body, shortcut}, output, spec.activation_relu, seed});
  step_specs_.push_back(&spec);
  return output;
}

}  // namespace ringtrain::model
