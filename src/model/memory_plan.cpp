// Owns the memory plan's passes: activations (which steps run in place, how long each value lives), gradients
// (where each backward step writes, which values need their contributions summed), the steps' scratch, and
// placing the buffers in the arena by lifetime.
#include "model/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

namespace ringtrain::model {
namespace {

int64_t aligned(int64_t bytes) {
  return (bytes + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment;
}

}  // namespace

int MemoryPlan::new_buffer(int64_t bytes) {
  buffers_.push_back({bytes, std::numeric_limits<int>::max(), -1, 0});
  return static_cast<int>(buffers_.size()) - 1;
}

int MemoryPlan::value_buffer(const Value& value) {
  return new_buffer(value.shape.elements() * static_cast<int64_t>(element_bytes(element_type_)));
}

void MemoryPlan::use(int buffer, int time) {
  if (buffer < 0) return;
  Buffer& b = buffers_[static_cast<size_t>(buffer)];
  b.first = std::min(b.first, time);
  b.last = std::max(b.last, time);
}

int MemoryPlan::input_gradient(int step, int slot) const {
  return input_gradient_[static_cast<size_t>(step)][static_cast<size_t>(slot)];
}

MemoryPlan::MemoryPlan(const Graph& graph, bool share) : element_type_(graph.activation_type()) {
  plan_activations(graph, share);
  plan_gradients(graph);
  plan_scratch(graph);
  place(share);
}

void MemoryPlan::plan_scratch(const Graph& graph) {
  const auto& steps = graph.steps();
  const int step_count = static_cast<int>(steps.size());
  scratch_.assign(steps.size(), {});
  const auto scratch_at = [&](std::size_t bytes, int time) {
    if (bytes == 0) return kNoScratch;
    const int id = new_buffer(static_cast<int64_t>(bytes));
    buffers_[static_cast<size_t>(id)].scratch = true;
    use(id, time);
    return id;
  };
  for (int k = 0; k < step_count; ++k) {
    const ScratchBytes wants = steps[static_cast<size_t>(k)].memory_use().scratch;
    scratch_[static_cast<size_t>(k)] = {scratch_at(wants.forward, k), scratch_at(wants.backward, 2 * step_count - k)};
  }
}

void MemoryPlan::plan_activations(const Graph& graph, bool share) {
  const auto& values = graph.values();
  const auto& steps = graph.steps();
  const int step_count = static_cast<int>(steps.size());
  activation_.assign(values.size(), kNetworkInput);
  std::vector<int> residents;  // values living in each buffer
  const auto assign = [&](int value, int buffer) {
    activation_[static_cast<size_t>(value)] = buffer;
    if (buffer >= 0) ++residents[static_cast<size_t>(buffer)];
  };
  // An element-wise step may overwrite its input when nothing reads that input afterwards: it is the input's
  // only reader, shares no buffer with another value, and neither its producer's backward (reading its output)
  // nor this step's own backward (reading its input) needs it.
  const auto may_overwrite = [&](int step, int input) {
    const int buffer = activation_[static_cast<size_t>(input)];
    const Value& v = values[static_cast<size_t>(input)];
    return buffer >= 0 && v.consumers.size() == 1 && residents[static_cast<size_t>(buffer)] == 1 &&
           !steps[static_cast<size_t>(v.producer)].memory_use().backward_reads_output &&
           !steps[static_cast<size_t>(step)].memory_use().backward_reads_input;
  };
  for (int k = 0; k < step_count; ++k) {
    const Step& step = steps[static_cast<size_t>(k)];
    const int input = step.inputs[0];
    const OutputMemory output = step.memory_use().output;
    const bool shares_input =
        output == OutputMemory::is_input ||
        (share && output == OutputMemory::may_overwrite_input && may_overwrite(k, input));
    if (shares_input) {
      assign(step.output, activation_[static_cast<size_t>(input)]);
      continue;
    }
    residents.push_back(0);
    assign(step.output, value_buffer(values[static_cast<size_t>(step.output)]));
  }
  // Lifetimes: from the producing step to the last reader, in forward, at the loss (the logits), or in backward.
  const auto backward_time = [&](int k) { return 2 * step_count - k; };
  for (size_t v = 0; v < values.size(); ++v) {
    const int buffer = activation_[v];
    if (buffer < 0) continue;
    const Value& value = values[v];
    use(buffer, value.producer);
    if (steps[static_cast<size_t>(value.producer)].memory_use().backward_reads_output)
      use(buffer, backward_time(value.producer));
    for (const int c : value.consumers) {
      use(buffer, c);
      if (steps[static_cast<size_t>(c)].backward_reads(static_cast<int>(v))) use(buffer, backward_time(c));
    }
    if (static_cast<int>(v) == graph.output()) use(buffer, step_count);
  }
}

void MemoryPlan::plan_gradients(const Graph& graph) {
  const auto& values = graph.values();
  const auto& steps = graph.steps();
  const int step_count = static_cast<int>(steps.size());
  gradient_.assign(values.size(), kNoGradient);
  input_gradient_.resize(steps.size());
  sums_after_.resize(steps.size());
  std::vector<std::vector<int>> contributions(values.size());
  gradient_[static_cast<size_t>(graph.output())] = kOutputGradient;
  const auto needs_gradient = [&](int value) { return activation_[static_cast<size_t>(value)] != kNetworkInput; };

  // A value's gradient is final once every reader's backward has contributed: one contribution is the gradient
  // itself; several are summed after the last one arrives.
  const auto contribute = [&](int value, int buffer, int k, int time) {
    auto& got = contributions[static_cast<size_t>(value)];
    got.push_back(buffer);
    if (got.size() < values[static_cast<size_t>(value)].consumers.size()) return;
    if (got.size() == 1) {
      gradient_[static_cast<size_t>(value)] = buffer;
      return;
    }
    const int sum = value_buffer(values[static_cast<size_t>(value)]);
    use(sum, time);
    for (const int addend : got) use(addend, time);
    sums_after_[static_cast<size_t>(k)].push_back({value, got, sum});
    gradient_[static_cast<size_t>(value)] = sum;
  };

  for (int k = step_count - 1; k >= 0; --k) {
    const Step& step = steps[static_cast<size_t>(k)];
    const int time = 2 * step_count - k;
    const int dy = gradient_[static_cast<size_t>(step.output)];
    use(dy, time);
    auto& writes = input_gradient_[static_cast<size_t>(k)];
    writes.assign(step.inputs.size(), kNoGradient);
    if (step.kind == Step::Kind::layer) {
      const int input = step.inputs[0];
      if (!needs_gradient(input)) continue;
      // A view passes dy through as its input gradient.
      const int dx = step.memory_use().output == OutputMemory::is_input
                         ? dy
                         : value_buffer(values[static_cast<size_t>(input)]);
      use(dx, time);
      writes[0] = dx;
      contribute(input, dx, k, time);
      continue;
    }
    // A join hands both branches the gradient of its sum: dy itself, or dy through the ReLU's mask. A fused join
    // writes that for the shortcut whether or not it is wanted (its layer's backward reads it), and its layer's
    // input gradient beside it.
    const int dsum = step.relu ? value_buffer(values[static_cast<size_t>(step.output)]) : dy;
    use(dsum, time);
    if (step.layer) writes[1] = dsum;
    for (size_t slot = 0; slot < step.inputs.size(); ++slot) {
      const int input = step.inputs[slot];
      if (!needs_gradient(input)) continue;
      const int buffer = step.layer && slot == 0 ? value_buffer(values[static_cast<size_t>(input)]) : dsum;
      use(buffer, time);
      writes[slot] = buffer;
      contribute(input, buffer, k, time);
    }
  }
}

void MemoryPlan::place(bool share) {
  std::vector<int> order(buffers_.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first: the big activations settle low in the arena and the small ones fill the gaps between them.
  // Scratch last: a workspace lives for one step, so it takes whatever room that step leaves rather than
  // pushing long-lived activations above it.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Buffer &x = buffers_[static_cast<size_t>(a)], &y = buffers_[static_cast<size_t>(b)];
    return x.scratch != y.scratch ? y.scratch : x.bytes > y.bytes;
  });
  std::vector<int> placed;
  arena_bytes_ = 0;
  for (const int id : order) {
    Buffer& b = buffers_[static_cast<size_t>(id)];
    const int64_t bytes = aligned(b.bytes);
    std::vector<const Buffer*> in_the_way;
    for (const int other : placed) {
      const Buffer& o = buffers_[static_cast<size_t>(other)];
      if (!share || (o.first <= b.last && b.first <= o.last)) in_the_way.push_back(&o);
    }
    std::sort(in_the_way.begin(), in_the_way.end(), [](const Buffer* x, const Buffer* y) { return x->offset < y->offset; });
    int64_t offset = 0;
    for (const Buffer* o : in_the_way) {
      if (offset + bytes <= o->offset) break;
      offset = std::max(offset, o->offset + aligned(o->bytes));
    }
    b.offset = offset;
    arena_bytes_ = std::max(arena_bytes_, offset + bytes);
    placed.push_back(id);
  }
}

int64_t MemoryPlan::unshared_bytes() const {
  int64_t total = 0;
  for (const Buffer& b : buffers_) total += aligned(b.bytes);
  return total;
}

std::string MemoryPlan::summary() const {
  const double mib = 1 << 20;
  const int64_t unshared = unshared_bytes();
  int scratch = 0;
  int64_t largest_scratch = 0;
  for (const Buffer& b : buffers_)
    if (b.scratch) ++scratch, largest_scratch = std::max(largest_scratch, aligned(b.bytes));
  const char* type = kernels::element_type_name(element_type_);
  const std::string what = scratch == 0 ? fmt::format("{} activations and gradients", type)
                                        : fmt::format("{} activations and gradients, and scratch ({} scratch, the "
                                                      "largest {:.1f} MiB)",
                                                      type, scratch, static_cast<double>(largest_scratch) / mib);
  return fmt::format("{} buffers for {} in {:.1f} MiB ({:.1f} MiB unshared: {:.0f} % saved)", buffers_.size(), what,
                     static_cast<double>(arena_bytes_) / mib, static_cast<double>(unshared) / mib,
                     unshared > 0 ? 100.0 * (1.0 - static_cast<double>(arena_bytes_) / static_cast<double>(unshared))
                                  : 0.0);
}

}  // namespace ringtrain::model
