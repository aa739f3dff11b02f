// Owns building the step list from the job file's layer specs: chains in order, a residual block as its body's
// steps, then its shortcut's, then the join (which, fused, runs the body's last layer itself).
#include "model/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
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

// Within a chain a layer's output has no reader but the next layer, so the two may agree on a channel-blocked
// layout for it (Layer::output_blocks): the largest block both take.
void hand_over_blocked(Layer& producer, Layer& consumer) {
  const std::vector<int> written = producer.output_blocks(), read = consumer.input_blocks();
  int shared = 1;
  for (const int block : written)
    if (block > shared && std::find(read.begin(), read.end(), block) != read.end()) shared = block;
  if (shared == 1) return;
  producer.write_output_block(shared);
  consumer.read_input_block(shared);
}

}  // namespace

uint64_t SeedPath::apply(uint64_t seed) const {
  for (const Level& level : levels) seed = (seed ^ level.xor_with) * 1000003u + level.index;
  return seed;
}

MemoryUse Step::memory_use() const {
  if (layer) return layer->memory_use();
  // The sum may be written over the body's output; with a ReLU, backward reads the result for its mask.
  return {.backward_reads_output = relu, .output = OutputMemory::may_overwrite_input};
}

Graph::Graph(const std::vector<config::LayerSpec>& specs, Backend& backend, Shape input, bool fuse,
             ElementType activations)
    : fuse_(fuse), activation_type_(activations) {
  add_value(input, -1);
  output_ = emit_chain(specs, kInput, SeedPath{}, 0, backend, &top_level_ends_);
}

int Graph::add_value(Shape shape, int producer) {
  values_.push_back({shape, producer, {}});
  return static_cast<int>(values_.size()) - 1;
}

int Graph::emit_chain(const std::vector<config::LayerSpec>& specs, int input, const SeedPath& chain_seed,
                      uint64_t chain_xor, Backend& backend, std::vector<int>* ends) {
  int current = input;
  Layer* previous = nullptr;  // the layer whose output is `current`, where it is this chain's
  const auto record_ends = [&](size_t through) {
    if (ends) ends->resize(through + 1, static_cast<int>(steps_.size()));
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    SeedPath seed = chain_seed;
    seed.levels.push_back({chain_xor, i});
    if (specs[i].is(config::kResidual)) {
      current = emit_residual(specs[i], current, seed, backend);
      previous = nullptr;
      record_ends(i);
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
    layer_order_.push_back(layer);
    current = output;
    if (fuse_) {
      i = fuse_following(specs, i, *layer, output);
      if (previous) hand_over_blocked(*previous, *layer);  // once the layer knows what it fused
    }
    previous = layer;
    record_ends(i);
  }
  return current;
}

// The ReLU's spec (and a pool's after it) is consumed with the layer that took it on; the chain's next layer
// keeps its own index.
size_t Graph::fuse_following(const std::vector<config::LayerSpec>& specs, size_t i, Layer& layer, int output) {
  const bool relu_next = i + 1 < specs.size() && specs[i + 1].is("relu");
  if (!relu_next || !layer.fuse_relu()) return i;
  ++i;
  if (i + 1 >= specs.size()) return i;
  if (const std::optional<Shape> pooled = layer.fuse_pool(specs[i + 1])) {
    values_[static_cast<size_t>(output)].shape = *pooled;
    ++i;
  }
  return i;
}

std::optional<Step> Graph::take_for_join(const config::LayerSpec& spec, int body) {
  const int producer = values_[static_cast<size_t>(body)].producer;
  const bool last_emitted = producer >= 0 && producer + 1 == static_cast<int>(steps_.size()) &&
                            body + 1 == static_cast<int>(values_.size());  // not an empty body's input
  if (!fuse_ || !spec.activation_relu || !last_emitted) return std::nullopt;
  const Step& last = steps_[static_cast<size_t>(producer)];
  if (last.kind != Step::Kind::layer || !last.layer->fuse_join()) return std::nullopt;
  // The join takes the place of the body's last step and its output.
  Step taken = last;
  steps_.pop_back();
  values_.pop_back();
  values_[static_cast<size_t>(taken.inputs[0])].consumers.pop_back();
  return taken;
}

int Graph::emit_residual(const config::LayerSpec& spec, int input, const SeedPath& seed, Backend& backend) {
  int body = emit_chain(spec.body, input, seed, 0, backend);
  const Shape body_shape = values_[static_cast<size_t>(body)].shape;
  const std::optional<Step> fused = take_for_join(spec, body);
  if (fused) body = fused->inputs[0];
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
  steps_.push_back({Step::Kind::join, fused ? fused->layer : nullptr, {body, shortcut}, output, spec.activation_relu,
                    fused ? fused->seed : seed});
  return output;
}

}  // namespace ringtrain::model
