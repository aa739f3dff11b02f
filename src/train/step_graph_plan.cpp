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

StepAction run_step(StepGraphPlan& plan, model::StepCapturer& capturer, int slot, const StepShape& shape,
                    const std::function<void(StepAction)>& queue) {
  const StepAction action = plan.decide(slot, shape, capturer.memory_generation());
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
      if (!plan.captured(slot, capturer.memory_generation())) {
        capturer.drop(slot);
        throw Error(ExitCode::internal,
                    fmt::format("gpu.cuda_graphs: device memory was allocated while the step on slot {} was being "
                                "captured, after the warm-up steps; the captured step cannot run. Set "
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
