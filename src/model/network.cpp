// Owns running the graph forward and backward over the plan's buffers, laying parameters out in the flat
// buffers, and seed-deterministic initialisation.
#include "model/network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/error.h"
#include "common/host_memory.h"
#include "model/layer_profile.h"
#include "util/clock.h"

namespace ringtrain::model {
namespace {

// splitmix64: a tiny, portable generator so the initial weights are the same on every compiler and libc.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform01(uint64_t& state) { return (static_cast<double>(splitmix64(state) >> 11) + 0.5) * 0x1.0p-53; }

// count draws of a normal distribution of mean 0 (Box-Muller over uniform01), continuing `state`.
void fill_normal(double stddev, int64_t count, float* out, uint64_t& state) {
  for (int64_t i = 0; i < count; ++i) {
    const double u1 = uniform01(state), u2 = uniform01(state);
    out[i] = static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2));
  }
}

// Runs `work` and, when a layer profile is active, books its time to the layer and the shape of a sample it takes
// ("batchnorm on 32x28x28"), so layers alike in everything else (two batch norms) get rows of their own; the device
// is synchronised on both sides so an asynchronous GPU's time lands on the layer that spent it.
template <class Work>
void profiled(const Layer& layer, const Shape& input, bool backward, Work&& work) {
  LayerProfile* profile = active_layer_profile();
  if (!profile) {
    work();
    return;
  }
  profile->synchronize();
  const double start = util::now_s();
  work();
  profile->synchronize();
  const std::string on = input.h == 1 && input.w == 1 ? fmt::format("{}", input.c)
                                                      : fmt::format("{}x{}x{}", input.c, input.h, input.w);
  profile->add(layer.describe() + " on " + on, backward, util::now_s() - start);
}

}  // namespace

std::string Shape::str() const { return fmt::format("{}x{}x{}x{}", n, c, h, w); }

Network::Network(const std::vector<config::LayerSpec>& layers, Backend& backend, Shape input, int classes,
                 const NetworkOptions& options)
    : backend_(backend),
      input_(input),
      classes_(classes),
      parameter_memory_(options.parameter_memory),
      graph_(layers, backend, input, options.fuse, options.activations),
      plan_(graph_, options.share_memory) {
  if (!backend.stores_activations_in(options.activations))
    throw Error(ExitCode::internal, fmt::format("the {} backend stores no {} activations",
                                                backend.name(), kernels::element_type_name(options.activations)));
  const MemoryBudget& budget = options.budget;
  output_ = graph_.values()[static_cast<size_t>(graph_.output())].shape;
  if (output_.per_sample() != classes)
    throw JobFileError(fmt::format("the model ends in {} values per sample (shape {}), but the dataset has {} "
                                   "classes: to train on it, make the last layer `dense` with units = {} (or set "
                                   "model.replace_head = {} to fine-tune); to evaluate, predict or export a trained "
                                   "model, give it data of the model's {} classes",
                                   output_.per_sample(), output_.with_batch(1).str(), classes, classes, classes,
                                   output_.per_sample()));
  need_ = count_memory(budget.caller_bytes_per_parameter);
  if (budget.bytes > 0 && need_.total() > budget.bytes)
    throw JobFileError(fmt::format(
        "the model needs {} per rank at batch {} (activations and gradients {}, parameters with their gradients, "
        "optimizer state and copies {}, tensors kept for backward {}) but {} is {}; lower train.batch_per_rank "
        "(activations grow with it) or make the model smaller{}",
        byte_size_text(need_.total()), input.n, byte_size_text(need_.activations), byte_size_text(need_.parameters),
        byte_size_text(need_.kept), budget.source, byte_size_text(budget.bytes), budget.or_remedy));
  arena_ = backend.allocate(static_cast<size_t>(std::max<int64_t>(plan_.arena_bytes(), 1)));
  if (options.activations != ElementType::f32) {
    boundary_.input = backend.allocate(elements(input).bytes());
    boundary_.logits = backend.allocate(sizeof(float) * static_cast<size_t>(output_.elements()));
    boundary_.dlogits = backend.allocate(elements(output_).bytes());
  }
  if (stored_nhwc(backend, options.activations, input))
    boundary_.reordered_input = backend.allocate(elements(input).bytes());
  lay_out_parameters();
  freeze_through(layers, options.freeze_through);
}

void Network::freeze_through(const std::vector<config::LayerSpec>& layers, const std::string& name) {
  if (name.empty()) return;
  const auto spec = std::find_if(layers.begin(), layers.end(), [&](const auto& l) { return l.name == name; });
  if (spec == layers.end())
    throw JobFileError(fmt::format("train.freeze = \"{}\" names no top-level layer of model.layers", name));
  frozen_steps_ = graph_.top_level_step_ends()[static_cast<size_t>(spec - layers.begin())];
  const auto params_of = [&](int k) {
    const Layer* layer = graph_.steps()[static_cast<size_t>(k)].layer;
    return layer ? layer_param_range(*layer) : std::pair<int64_t, int64_t>{0, 0};
  };
  for (int k = 0; k < frozen_steps_; ++k) {
    const auto [offset, count] = params_of(k);
    frozen_params_ = std::max(frozen_params_, offset + count);
  }
  if (frozen_params_ >= param_count_)
    throw JobFileError(fmt::format("train.freeze = \"{}\" keeps every parameter fixed (only layers without parameters "
                                   "follow it), so the run would train nothing; name a layer before the last one "
                                   "with parameters",
                                   name));
  // Parameters lie in step order, so the frozen ones are a prefix; the optimizer's rate groups rely on it.
  for (int k = frozen_steps_; k < static_cast<int>(graph_.steps().size()); ++k)
    if (const auto [offset, count] = params_of(k); count > 0 && offset < frozen_params_)
      throw Error(ExitCode::internal, "a trained layer's parameters lie among the frozen ones");
}

const Layer* Network::head() const {
  const Layer* last = nullptr;
  for (const ParamTensor& t : tensors_) last = t.layer;
  return last;
}

MemoryNeed Network::count_memory(double caller_bytes_per_parameter) const {
  MemoryNeed need;
  need.activations = static_cast<double>(plan_.arena_bytes());
  if (activation_type() != ElementType::f32)
    need.activations += static_cast<double>(elements(input_).bytes() + elements(output_).bytes()) +
                        sizeof(float) * static_cast<double>(output_.elements());
  if (stored_nhwc(backend_, activation_type(), input_))
    need.activations += static_cast<double>(elements(input_).bytes());
  double params = 0, states = 0;
  for (const Layer* layer : graph_.layers()) {
    for (const auto& d : layer->param_decls()) params += static_cast<double>(d.count);
    for (const auto& d : layer->state_decls()) states += static_cast<double>(d.count);
    need.kept += static_cast<double>(layer->kept_bytes());
  }
  need.parameters = sizeof(float) * (2 * params + states) + params / 8 + caller_bytes_per_parameter * params;
  return need;
}

void Network::lay_out_parameters() {
  for (const Layer* layer : graph_.layers()) {
    const int64_t begin = param_count_;
    for (const auto& d : layer->param_decls()) {
      tensors_.push_back({fmt::format("{}.{}", layer->describe(), d.name), layer, param_count_, d.count, d});
      param_count_ += d.count;
    }
    if (param_count_ > begin) layer_ranges_[layer] = {begin, param_count_ - begin};
    for (const auto& s : layer->state_decls()) {
      state_decls_.push_back(s);
      state_count_ += s.count;
    }
  }
  const auto bytes = [](int64_t floats) { return sizeof(float) * static_cast<size_t>(std::max<int64_t>(floats, 1)); };
  if (parameter_memory_) {  // not ours to free
    params_ = DeviceBuffer(parameter_memory_->parameters(param_count_), bytes(param_count_), nullptr);
    grads_ = DeviceBuffer(parameter_memory_->gradients(param_count_), bytes(param_count_), nullptr);
  } else {
    params_ = backend_.allocate(bytes(param_count_));
    grads_ = backend_.allocate(bytes(param_count_));
  }
  states_ = backend_.allocate(bytes(state_count_));

  std::vector<kernels::DecayRun> decaying;
  for (const auto& t : tensors_)
    if (t.decl.decay) decaying.push_back({t.offset, t.count});
  const auto mask = kernels::make_decay_mask(param_count_, decaying);
  decay_mask_ = backend_.allocate(sizeof(uint32_t) * std::max<size_t>(mask.size(), 1));
  backend_.to_device(decay_mask_.as<void>(), mask.data(), mask.size() * sizeof(uint32_t));

  std::vector<float*> p, g, s;
  for (const auto& t : tensors_) p.push_back(params() + t.offset), g.push_back(grads() + t.offset);
  int64_t state_offset = 0;
  for (const auto& d : state_decls_) {
    s.push_back(states() + state_offset);
    state_offset += d.count;
  }
  size_t next_param = 0, next_state = 0;
  for (const Layer* c : graph_.layers()) {
    auto* layer = const_cast<Layer*>(c);
    const size_t np = layer->param_decls().size(), ns = layer->state_decls().size();
    layer->bind(std::span(p).subspan(next_param, np), std::span(g).subspan(next_param, np),
                std::span(s).subspan(next_state, ns));
    next_param += np;
    next_state += ns;
  }
}

void* Network::in_arena(int buffer) const {
  return arena_.as<std::byte>() + plan_.buffers()[static_cast<size_t>(buffer)].offset;
}

void* Network::activation(int value, const Tensor& input) const {
  const int buffer = plan_.activation(value);
  if (buffer == MemoryPlan::kNetworkInput) return input.data;
  return in_arena(buffer);
}

Scratch Network::scratch(int buffer) const {
  if (buffer == MemoryPlan::kNoScratch) return {};
  return {in_arena(buffer), static_cast<std::size_t>(plan_.buffers()[static_cast<size_t>(buffer)].bytes)};
}

void* Network::gradient_buffer(int buffer, const Tensor& dlogits) const {
  if (buffer == MemoryPlan::kNoGradient) return nullptr;
  if (buffer == MemoryPlan::kOutputGradient) return dlogits.data;
  return in_arena(buffer);
}

Tensor Network::inside(const Tensor& x, const DeviceBuffer& converted) {
  if (activation_type() == ElementType::f32) return x;
  backend_.cast(x.elements(), x.data, activation_type(), converted.as<void>());
  return {converted.as<void>(), x.shape, activation_type()};
}

// The loader's NCHW batch as the first layer reads it: in the activation type and the backend's layout.
Tensor Network::stored_input(const Tensor& x_f32) {
  const Tensor x = inside(x_f32, boundary_.input);
  if (!stored_nhwc(backend_, x.type, x.shape)) return x;
  backend_.reorder_activation(planes_of(x.shape, x.type), ActivationLayout::nhwc, x.data,
                              boundary_.reordered_input.as<void>());
  return {boundary_.reordered_input.as<void>(), x.shape, x.type};
}

Tensor Network::forward(const Tensor& x_f32, Mode mode, uint64_t seed) {
  const Tensor x = stored_input(x_f32);
  last_input_ = x;
  const int batch = x.shape.n;
  const auto& values = graph_.values();
  const auto& steps = graph_.steps();
  for (int k = 0; k < static_cast<int>(steps.size()); ++k) {
    const Step& step = steps[static_cast<size_t>(k)];
    const Shape in_shape = values[static_cast<size_t>(step.inputs[0])].shape.with_batch(batch);
    void* in = activation(step.inputs[0], x);
    void* out = activation(step.output, x);
    if (step.layer) {
      const void* shortcut = step.kind == Step::Kind::join ? activation(step.inputs[1], x) : nullptr;
      const Mode step_mode = k < frozen_steps_ ? Mode::eval : mode;
      const ForwardPass pass{{in, in_shape, x.type}, out, step_mode, kernels::for_pass(step.seed, seed),
                             scratch(plan_.scratch(k).forward), shortcut};
      profiled(*step.layer, in_shape, false, [&] { step.layer->forward(pass); });
      continue;
    }
    const Elements n = elements(in_shape);
    if (step.relu)
      backend_.add_relu(n, in, activation(step.inputs[1], x), out);
    else
      backend_.add(n, in, activation(step.inputs[1], x), out);
  }
  const Tensor logits{activation(graph_.output(), x), output_.with_batch(batch), x.type};
  if (logits.type == ElementType::f32) return logits;
  backend_.cast(logits.elements(), logits.data, ElementType::f32, boundary_.logits.as<void>());
  return {boundary_.logits.as<void>(), logits.shape};
}

void Network::backward(const Tensor& dlogits_f32, GradientObserver* observer) {
  const Tensor dlogits = inside(dlogits_f32, boundary_.dlogits);
  for (int k = static_cast<int>(graph_.steps().size()) - 1; k >= frozen_steps_; --k)
    run_backward_step(k, dlogits, observer);
  // The frozen layers' gradients stay zero; the observer still hears of each, so gradient buckets complete.
  for (int k = frozen_steps_ - 1; k >= 0; --k)
    if (const Layer* layer = graph_.steps()[static_cast<size_t>(k)].layer; observer && layer_ranges_.count(layer))
      observer->gradients_ready(*layer);
}

void Network::run_backward_step(int k, const Tensor& dlogits, GradientObserver* observer) {
  const Step& step = graph_.steps()[static_cast<size_t>(k)];
  const auto& values = graph_.values();
  const int batch = last_input_.shape.n;
  const Shape out_shape = values[static_cast<size_t>(step.output)].shape.with_batch(batch);
  const ElementType type = activation_type();
  const Tensor dy{gradient_buffer(plan_.gradient(step.output), dlogits), out_shape, type};
  const void* y = activation(step.output, last_input_);
  if (step.layer) {
    const int input = step.inputs[0];
    void* dshortcut =
        step.kind == Step::Kind::join ? gradient_buffer(plan_.input_gradient(k, 1), dlogits) : nullptr;
    const BackwardPass pass{
        {activation(input, last_input_), values[static_cast<size_t>(input)].shape.with_batch(batch), type},
        y, dy, gradient_buffer(plan_.input_gradient(k, 0), dlogits), scratch(plan_.scratch(k).backward), dshortcut};
    profiled(*step.layer, pass.x.shape, true, [&] { step.layer->backward(pass); });
    if (observer && layer_ranges_.count(step.layer)) observer->gradients_ready(*step.layer);
  } else if (step.relu) {
    void* dsum = gradient_buffer(plan_.input_gradient(k, 0), dlogits);
    if (!dsum) dsum = gradient_buffer(plan_.input_gradient(k, 1), dlogits);
    if (dsum) backend_.relu_backward(dy.elements(), y, dy.data, dsum);
  }
  // Innermost contribution first, as nested residual blocks add them: ((c[n-1] + c[n-2]) + ...) + c[0].
  for (const MemoryPlan::GradientSum& sum : plan_.sums_after(k)) {
    const Elements n = elements(values[static_cast<size_t>(sum.value)].shape.with_batch(batch));
    const auto& a = sum.addends;
    void* total = gradient_buffer(sum.sum, dlogits);
    backend_.add(n, gradient_buffer(a[a.size() - 1], dlogits), gradient_buffer(a[a.size() - 2], dlogits), total);
    for (size_t i = a.size() - 2; i-- > 0;) backend_.accumulate(n, gradient_buffer(a[i], dlogits), total);
  }
}

NetworkState Network::read_state() {
  NetworkState state;
  state.params.resize(static_cast<size_t>(param_count_));
  state.states.resize(static_cast<size_t>(state_count_));
  backend_.to_host(state.params.data(), params(), state.params.size() * sizeof(float));
  backend_.to_host(state.states.data(), states(), state.states.size() * sizeof(float));
  return state;
}

void Network::load_state(const NetworkState& state) {
  const auto load = [&](float* device, const std::vector<float>& host, int64_t count, const char* what) {
    if (host.empty()) return;
    if (static_cast<int64_t>(host.size()) != count)
      throw Error(ExitCode::internal, fmt::format("{} holds {} values, the network {}", what, host.size(), count));
    backend_.to_device(device, host.data(), host.size() * sizeof(float));
  };
  load(params(), state.params, param_count_, "the parameters loaded");
  load(states(), state.states, state_count_, "the running statistics loaded");
}

std::pair<int64_t, int64_t> Network::layer_param_range(const Layer& layer) const {
  const auto it = layer_ranges_.find(&layer);
  return it == layer_ranges_.end() ? std::pair<int64_t, int64_t>{0, 0} : it->second;
}

double Network::forward_flops_per_sample() const {
  double flops = 0;
  for (const Step& step : graph_.steps()) {
    if (step.layer) flops += step.layer->forward_flops_per_sample();
    if (step.kind == Step::Kind::join)
      flops += static_cast<double>(graph_.values()[static_cast<size_t>(step.output)].shape.per_sample());
  }
  return flops;
}

double Network::train_flops_per_sample() const {
  double flops = forward_flops_per_sample();
  const auto& steps = graph_.steps();
  for (size_t k = 0; k < steps.size(); ++k) {
    if (steps[k].layer)
      flops += steps[k].layer->backward_flops_per_sample(plan_.input_gradient(static_cast<int>(k), 0) !=
                                                         MemoryPlan::kNoGradient);
    for (const auto& sum : plan_.sums_after(static_cast<int>(k)))
      flops += static_cast<double>(sum.addends.size() - 1) *
               static_cast<double>(graph_.values()[static_cast<size_t>(sum.value)].shape.per_sample());
  }
  return flops;
}

std::vector<float> Network::initial_params(uint64_t seed) const {
  std::vector<float> host(static_cast<size_t>(param_count_));
  uint64_t state = seed ^ 0x5eed5eed5eed5eedull;
  for (const auto& t : tensors_) {
    float* out = host.data() + t.offset;
    switch (t.decl.init) {
      case ParamInit::zeros: std::fill(out, out + t.count, 0.0f); break;
      case ParamInit::ones: std::fill(out, out + t.count, 1.0f); break;
      case ParamInit::constant: std::fill(out, out + t.count, t.decl.value); break;
      case ParamInit::uniform:
        for (int64_t i = 0; i < t.count; ++i)
          out[i] = static_cast<float>(t.decl.value * (2.0 * uniform01(state) - 1.0));
        break;
      case ParamInit::he_normal:  // He et al. 2015: keeps activation variance constant through ReLU layers.
        fill_normal(std::sqrt(2.0 / static_cast<double>(t.decl.fan_in)), t.count, out, state);
        break;
      case ParamInit::normal: fill_normal(t.decl.value, t.count, out, state); break;
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

std::string Network::methods() const {
  std::vector<std::pair<std::string, int>> lines;  // in first-seen order, with their counts
  for (const Layer* layer : graph_.layers()) {
    const std::string how = layer->method();
    if (how.empty()) continue;
    const std::string line = fmt::format("{:<24} {}", layer->describe(), how);
    auto seen = std::find_if(lines.begin(), lines.end(), [&](const auto& l) { return l.first == line; });
    if (seen == lines.end()) lines.emplace_back(line, 1);
    else ++seen->second;
  }
  std::string out;
  for (const auto& [line, count] : lines)
    out += fmt::format("  {}{}\n", line, count > 1 ? fmt::format(" (x{})", count) : "");
  return out;
}

std::string Network::summary() const {
  std::string out = fmt::format("input {} -> output {}\n", input_.with_batch(1).str(), output_.with_batch(1).str());
  for (const Layer* layer : graph_.layers())
    out += fmt::format("  {:<50} {:>10} params {:>10.2f} MFLOP/sample fwd\n",
                       layer->fused().empty() ? layer->describe() : layer->describe() + " " + layer->fused(),
                       layer_param_range(*layer).second, layer->forward_flops_per_sample() / 1e6);
  return out;
}

}  // namespace ringtrain::model
