// Owns reading train.init_from's checkpoint into a fresh run; see pretrained_start.h.
#include "train/pretrained_start.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "io/checkpoint_file.h"

namespace ringtrain::train {
namespace {

namespace fs = std::filesystem;

// The tensors the checkpoint gives: all of them, or all but the head's when the head is replaced.
size_t tensors_taken(const RunContext& run, const model::Network& net) {
  const auto& tensors = net.param_tensors();
  if (run.job.model.replace_head == 0) return tensors.size();
  return static_cast<size_t>(std::count_if(tensors.begin(), tensors.end(),
                                           [&](const model::ParamTensor& t) { return t.layer != net.head(); }));
}

// The first difference between the checkpoint's layout and the model's in the tensors taken, or "".
std::string layout_difference(const io::CheckpointData& c, const model::Network& net, size_t taken) {
  const auto& tensors = net.param_tensors();
  for (size_t i = 0; i < taken; ++i) {
    if (i >= c.tensor_names.size())
      return fmt::format("the checkpoint ends after {} parameter tensors; this model's tensor {} is '{}'",
                         c.tensor_names.size(), i, tensors[i].name);
    if (tensors[i].name != c.tensor_names[i] || tensors[i].count != c.tensor_sizes[i])
      return fmt::format("parameter tensor {} is '{}' with {} values in the checkpoint but '{}' with {} values in "
                         "this model{}",
                         i, c.tensor_names[i], c.tensor_sizes[i], tensors[i].name, tensors[i].count,
                         tensors[i].layer == net.head() ? " (for a new head with other classes: model.replace_head)"
                                                        : "");
  }
  if (taken == tensors.size() && c.tensor_names.size() != tensors.size())
    return fmt::format("the checkpoint has {} parameter tensors, this model {}", c.tensor_names.size(),
                       tensors.size());
  if (c.state_count != net.state_count())
    return fmt::format("the checkpoint holds {} batch-norm statistics, this model {}", c.state_count, net.state_count());
  return "";
}

// Rank 0: the checkpoint, checked against the model.
io::CheckpointData read_pretrained(const RunContext& run, const model::Network& net, size_t taken) {
  const fs::path& path = run.job.train.init_from;
  io::CheckpointData c = io::read_checkpoint(path);
  if (const std::string why = layout_difference(c, net, taken); !why.empty())
    throw CheckpointError(fmt::format("train.init_from: checkpoint '{}' belongs to another model: {}; use the job "
                                      "file it was written with (or `ringtrain import` wrote), changing only "
                                      "model.replace_head and the training keys",
                                      path.string(), why));
  return c;
}

// The running statistics of every rank that wrote the checkpoint, averaged: this run's world may differ.
std::vector<float> mean_statistics(const io::CheckpointData& c) {
  std::vector<float> mean(static_cast<size_t>(c.state_count), 0.0f);
  const int64_t rows = c.state_count > 0 ? static_cast<int64_t>(c.states.size()) / c.state_count : 0;
  for (int64_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < mean.size(); ++i)
      mean[i] += c.states[static_cast<size_t>(r * c.state_count) + i] / static_cast<float>(rows);
  return mean;
}

}  // namespace

std::string start_from_pretrained(const RunContext& run, model::Network& net) {
  const size_t taken = tensors_taken(run, net);
  io::CheckpointData c;
  run.world.all_succeed([&] {
    if (run.root()) c = read_pretrained(run, net, taken);
  });
  model::NetworkState state = net.read_state();  // the seeded start, which the replaced head keeps
  const auto& tensors = net.param_tensors();
  const int64_t given = taken == 0 ? 0 : tensors[taken - 1].offset + tensors[taken - 1].count;
  if (run.root()) std::copy_n(c.params.begin(), given, state.params.begin());
  run.world.broadcast_floats(state.params.data(), given);
  state.states = run.root() ? mean_statistics(c) : std::vector<float>(static_cast<size_t>(net.state_count()));
  run.world.broadcast_floats(state.states.data(), net.state_count());
  net.load_state(state);
  return fmt::format("parameters and batch-norm statistics from {} ({} of {} parameter tensors{})",
                     run.job.train.init_from.string(), taken, tensors.size(),
                     taken < tensors.size() ? "; the head replaced, from the seed" : "");
}

}  // namespace ringtrain::train
