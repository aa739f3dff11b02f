// Owns the optimizer state's buffers and copies, and the choice of rule; see model/optimizer.h.
#include "model/optimizer.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"

namespace ringtrain::model {

Optimizer::Optimizer(Network& net, std::string name, const std::vector<std::string>& arrays,
                     std::vector<RateGroup> groups)
    : net_(net), name_(std::move(name)), array_names_(arrays), groups_(std::move(groups)) {
  const auto bytes = sizeof(float) * static_cast<std::size_t>(std::max<int64_t>(net.param_count(), 1));
  if (ParameterMemory* memory = net.parameter_memory()) {
    for (float* place : memory->optimizer_state(static_cast<int>(arrays.size()), net.param_count()))
      arrays_.emplace_back(place, bytes, nullptr);  // the memory's own, freed with it
    return;
  }
  for (std::size_t i = 0; i < arrays.size(); ++i) arrays_.push_back(net.backend().allocate(bytes));
}

OptimizerState Optimizer::read_state() {
  OptimizerState state{name_, {}};
  for (std::size_t i = 0; i < arrays_.size(); ++i) {
    OptimizerArray a{array_names_[i], std::vector<float>(static_cast<std::size_t>(net_.param_count()))};
    net_.backend().to_host(a.values.data(), arrays_[i].as<float>(), a.values.size() * sizeof(float));
    state.arrays.push_back(std::move(a));
  }
  return state;
}

void Optimizer::load_state(const OptimizerState& state) {
  if (state.optimizer != name_)
    throw CheckpointError(fmt::format("the checkpoint holds the state of optimizer '{}' but the job asks for '{}'; "
                                      "resume with optimizer.name = \"{}\", or start again without --resume",
                                      state.optimizer, name_, state.optimizer));
  for (std::size_t i = 0; i < arrays_.size(); ++i) {
    const auto it = std::find_if(state.arrays.begin(), state.arrays.end(),
                                 [&](const OptimizerArray& a) { return a.name == array_names_[i]; });
    if (it == state.arrays.end())
      throw CheckpointError(fmt::format("the checkpoint's optimizer '{}' state lacks its array '{}'", name_,
                                        array_names_[i]));
    if (static_cast<int64_t>(it->values.size()) != net_.param_count())
      throw CheckpointError(fmt::format("the checkpoint's optimizer array '{}' holds {} values, the model {} "
                                        "parameters",
                                        it->name, it->values.size(), net_.param_count()));
    net_.backend().to_device(arrays_[i].as<float>(), it->values.data(), it->values.size() * sizeof(float));
  }
}

void Optimizer::require_whole(ParamSlice slice) const {
  if (slice.begin != 0 || slice.count != net_.param_count())
    throw Error(ExitCode::internal, fmt::format("optimizer '{}' updates whole tensors, but was given parameters "
                                                "[{}, {}) of {}",
                                                name_, slice.begin, slice.begin + slice.count, net_.param_count()));
}

const std::vector<RatePiece>& Optimizer::pieces(ParamSlice slice) {
  if (slice.begin == pieces_slice_.begin && slice.count == pieces_slice_.count) return pieces_;
  pieces_.clear();
  // A group at rate 0 (optimizer.head_lr_multiplier = 0) still takes its update, at lr 0: its parameters stay, its
  // state moves as PyTorch's does for a group at lr 0, and the update clears its gradients, as every step must.
  for (const RateGroup& g : groups_) {
    const int64_t begin = std::max(g.begin, slice.begin);
    const int64_t end = std::min(g.begin + g.count, slice.begin + slice.count);
    if (end > begin) pieces_.push_back({begin, end - begin, g.lr_scale, decay_mask_from(begin, end - begin)});
  }
  pieces_slice_ = slice;
  return pieces_;
}

const uint32_t* Optimizer::decay_mask_from(int64_t begin, int64_t count) {
  if (begin % 32 == 0) return net_.decay_mask() + begin / 32;
  std::vector<kernels::DecayRun> runs;
  for (const ParamTensor& t : net_.param_tensors()) {
    const int64_t from = std::max(t.offset, begin), to = std::min(t.offset + t.count, begin + count);
    if (t.decl.decay && to > from) runs.push_back({from - begin, to - from});
  }
  const std::vector<uint32_t> mask = kernels::make_decay_mask(count, runs);
  own_masks_.push_back(net_.backend().allocate(sizeof(uint32_t) * mask.size()));
  net_.backend().to_device(own_masks_.back().as<void>(), mask.data(), sizeof(uint32_t) * mask.size());
  return own_masks_.back().as<uint32_t>();
}

std::vector<RateGroup> rate_groups(const config::JobConfig::Optimizer& spec, const Network& net) {
  const int64_t frozen = net.frozen_param_count(), end = net.param_count();
  int64_t head = end;
  if (const Layer* layer = net.head(); layer && spec.head_lr_multiplier != 1.0)
    head = std::max(frozen, net.layer_param_range(*layer).first);
  std::vector<RateGroup> groups;
  if (head > frozen) groups.push_back({frozen, head - frozen, 1.0f});
  if (end > head) groups.push_back({head, end - head, static_cast<float>(spec.head_lr_multiplier)});
  return groups;
}

std::vector<kernels::TensorRange> tensor_ranges(const Network& net) {
  std::vector<kernels::TensorRange> ranges;
  for (const ParamTensor& t : net.param_tensors()) ranges.push_back({t.offset, t.count, t.decl.decay ? 1 : 0, 0});
  return ranges;
}

std::vector<DeviceTensorRanges> upload_tensor_ranges(Network& net, const std::vector<RateGroup>& groups) {
  const std::vector<kernels::TensorRange> all = tensor_ranges(net);
  std::vector<DeviceTensorRanges> uploaded;
  for (const RateGroup& g : groups) {
    std::vector<kernels::TensorRange> ranges;
    for (const kernels::TensorRange& r : all)
      if (r.begin >= g.begin && r.begin < g.begin + g.count) ranges.push_back(r);
    DeviceTensorRanges on_device;
    on_device.count = static_cast<int>(ranges.size());
    on_device.lr_scale = g.lr_scale;
    on_device.buffer = net.backend().allocate(sizeof(kernels::TensorRange) * std::max<std::size_t>(ranges.size(), 1));
    net.backend().to_device(on_device.buffer.as<void>(), ranges.data(), ranges.size() * sizeof(kernels::TensorRange));
    uploaded.push_back(std::move(on_device));
  }
  return uploaded;
}

const char* optimizer_name(config::OptimizerKind kind) {
  switch (kind) {
    case config::OptimizerKind::sgd: return "sgd";
    case config::OptimizerKind::adamw: return "adamw";
    case config::OptimizerKind::lars: return "lars";
    case config::OptimizerKind::lamb: return "lamb";
  }
  return "?";
}

int optimizer_state_arrays(config::OptimizerKind kind) {
  return kind == config::OptimizerKind::adamw || kind == config::OptimizerKind::lamb ? 2 : 1;
}

std::unique_ptr<Optimizer> make_optimizer(const config::JobConfig::Optimizer& spec, Network& net) {
  switch (spec.kind) {
    case config::OptimizerKind::sgd: return make_sgd(spec, net);
    case config::OptimizerKind::adamw: return make_adamw(spec, net);
    case config::OptimizerKind::lars: return make_lars(spec, net);
    case config::OptimizerKind::lamb: return make_lamb(spec, net);
  }
  throw Error(ExitCode::internal, "unknown optimizer kind");
}

}  // namespace ringtrain::model
