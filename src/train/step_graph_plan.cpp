// Owns the graphed step's decisions (eager, capture, recapture, replay) and the order of the capturer's calls.
#include "train/step_graph_plan.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::train {

const char* step_action_name(StepAction action) {
  switch (action) {
    case StepAction::eager: return "eager";
    case StepAction::capture: return "capture";
    case StepAction::recapture: return "recapture";
    case StepAction::replay: return "replay";
  }
  return "?";
}

void StepActionCounts::add(StepAction action) {
  switch (action) {
    case StepAction::eager: ++eager; return;
    case StepAction::capture:
    case StepAction::recapture: ++captured; return;
    case StepAction::replay: ++replayed; return;
  }
}

StepActionCounts StepActionCounts::since(const StepActionCounts& earlier) const {
  return {eager - earlier.eager, captured - earlier.captured, replayed - earlier.replayed};
}

StepGraphPlan::StepGraphPlan(int slots, int warmup_steps)
    : graphs_(static_cast<std::size_t>(slots)), warmup_steps_(warmup_steps) {
  if (slots < 1 || warmup_steps < 0)
    throw Error(ExitCode::internal, fmt::format("a step graph plan needs slots >= 1 and warm-up steps >= 0, got {} "
                                                "and {}",
                                                slots, warmup_steps));
}

StepAction StepGraphPlan::decide(int slot, const StepShape& shape, uint64_t memory_generation) {
  if (shape == last_shape_ && memory_generation == last_memory_) {
    ++settled_steps_;
  } else {
    last_shape_ = shape;
    last_memory_ = memory_generation;
    settled_steps_ = 1;
  }
  const Graph& graph = graphs_.at(static_cast<std::size_t>(slot));
  if (graph.held && graph.shape == shape && graph.memory == memory_generation) return StepAction::replay;
  // This step counts towards the warm-up only once it has run: capture once the steps before it settled.
  if (settled_steps_ <= warmup_steps_) return StepAction::eager;
  return graph.held ? StepAction::recapture : StepAction::capture;
}

bool StepGraphPlan::captured(int slot, uint64_t memory_generation_after) {
  Graph& graph = graphs_.at(static_cast<std::size_t>(slot));
  if (memory_generation_after != last_memory_) {
    drop(slot);
    return false;
  }
  graph.held = true;
  graph.shape = last_shape_;
  graph.memory = last_memory_;
  return true;
}

void StepGraphPlan::drop(int slot) {
  graphs_.at(static_cast<std::size_t>(slot)) = Graph{};
  settled_steps_ = 0;
}

void StepGraphPlan::forget() {
  for (Graph& graph : graphs_) graph = Graph{};
  settled_steps_ = 0;
}

namespace {

// splitmix64's finaliser: spreads one word over all 64 bits.
uint64_t mixed(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t step_fingerprint(const StepShape& shape, uint64_t memory_generation) {
  uint64_t h = mixed(memory_generation);
  const auto add = [&h](uint64_t v) { h = mixed(h ^ mixed(v + 0x9e3779b97f4a7c15ULL)); };
  for (const int samples : shape.micro_batch_samples) add(static_cast<uint64_t>(samples));
  add(shape.soft_targets ? 1 : 0);
  for (const void* memory : shape.batch_memory) add(reinterpret_cast<uintptr_t>(memory));
  return h;
}

StepAction run_step(StepGraphPlan& plan, model::StepCapturer& capturer, int slot, const StepShape& shape,
                    const SumOverRanks& sum_over_ranks, const std::function<void(StepAction)>& queue) {
  const auto agreed_memory = [&] { return sum_over_ranks(step_fingerprint(shape, capturer.memory_generation())); };
  const StepAction action = plan.decide(slot, shape, agreed_memory());
  switch (action) {
    case StepAction::eager:
      queue(action);
      break;
    case StepAction::capture:
    case StepAction::recapture:
      capturer.begin_capture(slot);
      try {
        queue(action);
      } catch (...) {
        capturer.abandon_capture(slot);  // or the stream would stay capturing under whatever runs next
        throw;
      }
      try {
        capturer.end_capture(slot, action == StepAction::recapture);
      } catch (...) {
        // A recapture that could not be instantiated has already replaced the slot's graph: none is left to replay.
        plan.drop(slot);
        capturer.drop(slot);
        throw;
      }
      if (!plan.captured(slot, agreed_memory())) {
        capturer.drop(slot);
        throw Error(ExitCode::internal,
                    fmt::format("gpu.cuda_graphs: device memory was allocated while the step on slot {} was being "
                                "captured (on this rank or another), after the warm-up steps; the captured step cannot run. Set "
                                "gpu.cuda_graphs = false and report the model",
                                slot));
      }
      capturer.launch(slot);
      break;
    case StepAction::replay:
      capturer.launch(slot);
      break;
  }
  return action;
}

}  // namespace ringtrain::train
