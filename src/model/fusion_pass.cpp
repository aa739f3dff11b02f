// Owns the fusion pass: matching each layer's chain against its backend's fusion table, folding the steps a layer
// takes on into its own, and asking the backend how each chain link's activations lie.
#include "model/fusion_pass.h"

#include <optional>

namespace ringtrain::model {
namespace {

// A rule's tail found after a producer step: what the producer takes on, and the steps it takes on in order (the
// last one's output, or a join's place, becomes the producer's).
struct Match {
  FusedTail tail;
  std::vector<int> taken;
};

// The operation as it runs with its activations laid out as `layout` says.
void lay_out(LayerOperation& op, const ChainLayout& layout) {
  if (auto* conv = std::get_if<kernels::Conv2dShape>(&op))
    conv->in_block = layout.in_block, conv->out_block = layout.out_block;
  if (auto* norm = std::get_if<BatchNormOperation>(&op))
    norm->shape.in_block = layout.in_block, norm->shape.out_block = layout.out_block;
}

class FusionPass {
 public:
  FusionPass(UnfusedGraph graph, Backend& backend, ElementType data) : g_(graph), backend_(backend), data_(data) {}
  std::vector<const Layer*> run();

 private:
  std::optional<Match> best_match(int producer, const std::vector<FusionRule>& rules) const;
  std::optional<Match> match(int producer, const FusionRule& rule) const;
  bool takes_on(const std::string& type, int step, int value, FusedTail& tail) const;
  void fold(int producer, const Match& m);
  void compact();
  void choose_layouts();
  // The one step that reads `value`, where nothing else does; -1 otherwise.
  int sole_consumer(int value) const {
    const std::vector<int>& readers = g_.values[static_cast<size_t>(value)].consumers;
    return readers.size() == 1 ? readers[0] : -1;
  }

  UnfusedGraph g_;
  Backend& backend_;
  ElementType data_;
  std::vector<bool> dropped_steps_, dropped_values_;
  std::vector<const Layer*> taken_layers_;
};

std::vector<const Layer*> FusionPass::run() {
  const std::vector<FusionRule> rules = backend_.fusion_rules();
  dropped_steps_.assign(g_.steps.size(), false);
  dropped_values_.assign(g_.values.size(), false);
  for (size_t k = 0; k < g_.steps.size(); ++k) {
    if (dropped_steps_[k] || g_.steps[k].kind != Step::Kind::layer) continue;
    if (const std::optional<Match> m = best_match(static_cast<int>(k), rules)) fold(static_cast<int>(k), *m);
  }
  compact();
  choose_layouts();
  return taken_layers_;
}

// The longest tail any rule for the producer's type allows.
std::optional<Match> FusionPass::best_match(int producer, const std::vector<FusionRule>& rules) const {
  std::optional<Match> best;
  for (const FusionRule& rule : rules) {
    if (!g_.specs[static_cast<size_t>(producer)]->is(rule.producer)) continue;
    std::optional<Match> m = match(producer, rule);
    if (m && (!best || m->taken.size() > best->taken.size())) best = std::move(m);
  }
  return best;
}

std::optional<Match> FusionPass::match(int producer, const FusionRule& rule) const {
  Match m;
  int value = g_.steps[static_cast<size_t>(producer)].output;
  for (const std::string& type : rule.absorbs) {
    const int next = sole_consumer(value);
    if (next < 0 || !takes_on(type, next, value, m.tail)) return std::nullopt;
    m.taken.push_back(next);
    value = g_.steps[static_cast<size_t>(next)].output;
  }
  const Step& p = g_.steps[static_cast<size_t>(producer)];
  const FusionSite site{g_.values[static_cast<size_t>(p.inputs[0])].shape, data_};
  if (m.taken.empty() || (rule.applies && !rule.applies(site))) return std::nullopt;
  return m;
}

// Whether step `step`, reading `value`, is a layer of `type` (or the join, for kJoin) that a FusedTail can hold
// after what it holds: a ReLU or a ReLU6 first, then after a ReLU the models' 2x2/2 max pool (which fits every input
// of at least 2 x 2), or a join with a ReLU alone, reading `value` as its body. Adds it to `tail` where it is.
bool FusionPass::takes_on(const std::string& type, int step, int value, FusedTail& tail) const {
  const Step& s = g_.steps[static_cast<size_t>(step)];
  const Shape in = g_.values[static_cast<size_t>(value)].shape;
  if (type == kJoin) {
    tail.join = tail.empty() && s.kind == Step::Kind::join && !s.layer && s.relu && s.inputs[0] == value;
    return tail.join;
  }
  const config::LayerSpec& spec = *g_.specs[static_cast<size_t>(step)];
  if (s.kind != Step::Kind::layer || !spec.is(type)) return false;
  if ((type == "relu" || type == "relu6") && tail.empty()) {
    tail.relu6 = type == "relu6";
    return tail.relu = true;
  }
  const bool two_by_two = type == "maxpool" && spec.integer("size") == 2 && spec.integer("stride") == 2 &&
                          spec.integer("padding") == 0 && in.h >= 2 && in.w >= 2;
  if (!two_by_two || !tail.relu || tail.relu6 || tail.pool) return false;
  tail.pool = FusedMaxPool{in.h, in.w};
  return true;
}

// A tail: the producer writes the last taken step's output, and the values between are gone. A join: the join's
// step runs the producer, reading the producer's input as its body, and the producer's output is gone.
void FusionPass::fold(int producer, const Match& m) {
  Step& p = g_.steps[static_cast<size_t>(producer)];
  p.layer->fuse(m.tail);
  Step& last = g_.steps[static_cast<size_t>(m.taken.back())];
  if (last.kind == Step::Kind::join) {
    dropped_values_[static_cast<size_t>(p.output)] = true;
    dropped_steps_[static_cast<size_t>(producer)] = true;
    last.layer = p.layer;
    last.inputs[0] = p.inputs[0];
    last.seed = p.seed;
    return;
  }
  for (const int k : m.taken) {
    const Step& taken = g_.steps[static_cast<size_t>(k)];
    dropped_values_[static_cast<size_t>(taken.inputs[0])] = true;
    dropped_steps_[static_cast<size_t>(k)] = true;
    taken_layers_.push_back(taken.layer);
  }
  p.output = last.output;
}

// Renumbers what is left in order, and finds each value's producer and readers again.
void FusionPass::compact() {
  std::vector<int> value_at(g_.values.size(), -1), step_at(g_.steps.size(), -1);
  std::vector<Value> values;
  for (size_t v = 0; v < g_.values.size(); ++v)
    if (!dropped_values_[v]) {
      value_at[v] = static_cast<int>(values.size());
      values.push_back({g_.values[v].shape, -1, {}});
    }
  std::vector<Step> steps;
  for (size_t k = 0; k < g_.steps.size(); ++k)
    if (!dropped_steps_[k]) {
      step_at[k] = static_cast<int>(steps.size());
      steps.push_back(g_.steps[k]);
    }
  for (size_t k = 0; k < steps.size(); ++k) {
    Step& s = steps[k];
    for (int& in : s.inputs) {
      in = value_at[static_cast<size_t>(in)];
      values[static_cast<size_t>(in)].consumers.push_back(static_cast<int>(k));
    }
    s.output = value_at[static_cast<size_t>(s.output)];
    values[static_cast<size_t>(s.output)].producer = static_cast<int>(k);
  }
  g_.output = value_at[static_cast<size_t>(g_.output)];
  g_.values = std::move(values);
  g_.steps = std::move(steps);
}

// Within a chain a layer's output has no reader but the next layer, so the two may agree on a layout for it; the
// links are weighed in step order, each with the layouts chosen before it (a convolution's output block may depend
// on the block it reads).
void FusionPass::choose_layouts() {
  const auto layer_step = [&](int k) { return k >= 0 && g_.steps[static_cast<size_t>(k)].kind == Step::Kind::layer; };
  std::vector<LayerOperation> ops(g_.steps.size());
  std::vector<ChainLayout> layouts(g_.steps.size());
  for (size_t k = 0; k < g_.steps.size(); ++k)
    if (layer_step(static_cast<int>(k))) ops[k] = g_.steps[k].layer->operation();
  for (size_t k = 0; k < g_.steps.size(); ++k) {
    if (!layer_step(static_cast<int>(k))) continue;
    const int link = g_.steps[k].inputs[0];
    const int p = g_.values[static_cast<size_t>(link)].producer;
    if (!layer_step(p) || sole_consumer(link) != static_cast<int>(k)) continue;
    const auto pk = static_cast<size_t>(p);
    const int block = backend_.chain_block(ops[pk], ops[k]);
    if (block <= 1) continue;
    layouts[pk].out_block = layouts[k].in_block = block;
    lay_out(ops[pk], layouts[pk]);
    lay_out(ops[k], layouts[k]);
  }
  for (size_t k = 0; k < g_.steps.size(); ++k)
    if (!(layouts[k] == ChainLayout{})) g_.steps[k].layer->set_chain_layout(layouts[k]);
}

}  // namespace

std::vector<const Layer*> run_fusion_pass(UnfusedGraph graph, Backend& backend, ElementType data) {
  return FusionPass(graph, backend, data).run();
}

}  // namespace ringtrain::model
