// Owns building the layer tree from LayerSpecs, laying parameters out in the flat buffers, and
// seed-deterministic initialisation.
#include "model/network.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "common/error.h"
#include "model/gradient_buffer_plan.h"
#include "model/residual.h"

namespace ringtrain::model {
namespace {

void build(const std::vector<config::LayerSpec>& specs, Backend& backend, Sequential& into) {
  for (const auto& spec : specs) {
    if (spec.kind == config::LayerKind::residual) {
      auto block = std::make_unique<Residual>(backend, spec.where, spec.activation_relu);
      build(spec.body, backend, block->body());
      build(spec.shortcut, backend, block->shortcut());
      into.append(std::move(block));
    } else {
      into.append(backend.make_leaf(spec));
    }
  }
}

// splitmix64: a tiny, portable generator so the initial weights are the same on every compiler and libc.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform01(uint64_t& state) { return (static_cast<double>(splitmix64(state) >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace

std::string Shape::str() const { return fmt::format("{}x{}x{}x{}", n, c, h, w); }

Network::Network(const std::vector<config::LayerSpec>& layers, Backend& backend, Shape input, int classes,
                 bool share_gradient_buffers)
    : backend_(backend), input_(input), classes_(classes) {
  build(layers, backend, root_);
  output_ = root_.setup(input);
  if (share_gradient_buffers) {
    gradient_buffers_ = model::share_gradient_buffers(root_, backend);
    run_activations_in_place(root_);
  }
  if (output_.per_sample() != classes)
    throw JobFileError(fmt::format("the model ends in {} values per sample (shape {}), but the dataset has {} "
                                   "classes: make the last layer `dense` with units = {}",
                                   output_.per_sample(), output_.with_batch(1).str(), classes, classes));

  std::vector<const Layer*> leaves;
  root_.collect_leaves(leaves);
  for (const Layer* leaf : leaves) {
    const int64_t begin = param_count_;
    int index = 0;
    for (const auto& d : leaf->param_decls()) {
      tensors_.push_back({fmt::format("{}.{}", leaf->describe(), d.name), leaf, param_count_, d.count, d});
      param_count_ += d.count;
      ++index;
    }
    if (param_count_ > begin) leaf_ranges_[leaf] = {begin, param_count_ - begin};
    for (const auto& s : leaf->state_decls()) {
      state_decls_.push_back(s);
      state_count_ += s.count;
    }
  }
  const auto bytes = [](int64_t floats) { return sizeof(float) * static_cast<size_t>(std::max<int64_t>(floats, 1)); };
  params_ = backend.allocate(bytes(param_count_));
  grads_ = backend.allocate(bytes(param_count_));
  velocity_ = backend.allocate(bytes(param_count_));
  states_ = backend.allocate(bytes(state_count_));

  std::vector<float*> p, g, s;
  for (const auto& t : tensors_) {
    p.push_back(params() + t.offset);
    g.push_back(grads() + t.offset);
  }
  int64_t state_offset = 0;
  for (const auto& d : state_decls_) {
    s.push_back(states() + state_offset);
    state_offset += d.count;
  }
  root_.bind(p, g, s);
}

Tensor Network::forward(const Tensor& x, Mode mode, const StepContext& ctx) { return root_.forward(x, mode, ctx); }

void Network::backward(const Tensor& dlogits, GradientObserver* observer) { root_.backward(dlogits, false, observer); }

std::pair<int64_t, int64_t> Network::leaf_param_range(const Layer& leaf) const {
  const auto it = leaf_ranges_.find(&leaf);
  return it == leaf_ranges_.end() ? std::pair<int64_t, int64_t>{0, 0} : it->second;
}

std::vector<float> Network::initial_params(uint64_t seed) const {
  std::vector<float> host(static_cast<size_t>(param_count_));
  uint64_t state = seed ^ 0x5eed5eed5eed5eedull;
  for (const auto& t : tensors_) {
    float* out = host.data() + t.offset;
    switch (t.decl.init) {
      case ParamInit::zeros: std::fill(out, out + t.count, 0.0f); break;
      case ParamInit::ones: std::fill(out, out + t.count, 1.0f); break;
      case ParamInit::he_normal: {
        // He et al. 2015: keeps activation variance constant through ReLU layers.
        const double stddev = std::sqrt(2.0 / static_cast<double>(t.decl.fan_in));
        for (int64_t i = 0; i < t.count; ++i) {
          const double u1 = uniform01(state), u2 = uniform01(state);
          out[i] = static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2));
        }
        break;
      }
    }
  }
  return host;
}

std::vector<float> Network::initial_states() const {
  std::vector<float> host(static_cast<size_t>(state_count_));
  int64_t offset = 0;
  for (const auto& d : state_decls_) {
    std::fill(host.begin() + offset, host.begin() + offset + d.count, d.init == ParamInit::ones ? 1.0f : 0.0f);
    offset += d.count;
  }
  return host;
}

std::string Network::summary() const {
  std::string out = fmt::format("input {} -> output {}\n", input_.with_batch(1).str(), output_.with_batch(1).str());
  std::vector<const Layer*> leaves;
  root_.collect_leaves(leaves);
  for (const Layer* leaf : leaves) {
    const auto [offset, count] = leaf_param_range(*leaf);
    (void)offset;
    out += fmt::format("  {:<40} {:>10} params {:>10.2f} MFLOP/sample fwd\n", leaf->describe(), count,
                       leaf->forward_flops_per_sample() / 1e6);
  }
  return out;
}

}  // namespace ringtrain::model
