// Owns building the job's model on this rank; see network_setup.h.
#include "train/network_setup.h"

#include <fmt/format.h>

#include <new>
#include <string>

#include "common/host_memory.h"
#include "train/fault_injection.h"

namespace ringtrain::train {
namespace {

// The budget's source names the device decode's share where it has one.
std::string decoded_samples_text(const InputMemory& input) {
  if (input.device_decode <= 0) return "";
  return fmt::format(" and {} for the samples decoded on the device", byte_size_text(input.device_decode));
}

// What the network may take on this rank: the host's available memory shared by the node's ranks, less the data
// loaders' queues; on a GPU its free memory, less the convolution workspace cuDNN may still ask for; either less the
// samples the backend decodes (in its own memory).
model::MemoryBudget memory_budget(const RunContext& run, const InputMemory& input) {
  const double available = static_cast<double>(run.backend.memory_available());
  if (available <= 0) return {};
  // The weights' moving average (train.ema_decay) is one more array of one value per parameter.
  const double state_arrays =
      model::optimizer_state_arrays(run.job.optimizer.kind) + (run.job.train.ema_decay > 0 ? 1 : 0);
  const double optimizer_per_parameter = state_arrays * sizeof(float);
  if (!run.backend.allocates_host_memory()) {
    const double workspace = run.job.gpu.workspace_mb * (1 << 20);
    return {available - workspace - input.device_decode,
            fmt::format("what the GPU has free ({}) less the convolution workspace ({}){}", byte_size_text(available),
                        byte_size_text(workspace), decoded_samples_text(input)),
            optimizer_per_parameter, ""};
  }
  // The node's memory (the host's, the job's cgroup) is shared by its ranks; an address-space limit (ulimit -v) is
  // each process's own, whole. `available` > 0 above: one of the two is known.
  const RankMemoryShare rank = rank_memory_share(memory_of_process(), run.world.local_size(), run.world.host());
  // The optimizer's state, and host copies of the parameters (initialisation, broadcast) and of parameters and the
  // optimizer's state (a checkpoint).
  const double copies_per_parameter = optimizer_per_parameter + (2 + state_arrays) * sizeof(float);
  const AvailableMemory& host = rank.limit;
  const double share = rank.bytes;
  const double left = share - input.loader_queues - input.device_decode;
  const std::string& whose = rank.text;
  // Queues that take the rank's whole share leave the network no budget at all: refused here, or the run would pass
  // set-up and be killed for memory once the loaders fill them.
  if (left <= 0)
    throw JobFileError(fmt::format("the data loaders' queues need {} per rank (data.prefetch_batches + 1 batches ahead "
                                   "for training and evaluation) but {} is {}; lower data.prefetch_batches or "
                                   "train.batch_per_rank{}",
                                   byte_size_text(input.loader_queues + input.device_decode), whose,
                                   byte_size_text(share), host.or_remedy()));
  return {left,
          fmt::format("{}, less {} for the data loaders{},", whose, byte_size_text(input.loader_queues),
                      decoded_samples_text(input)),
          copies_per_parameter, host.or_remedy()};
}

// The budget, unless the fault-injection hook (train/fault_injection.h) gives this rank another.
model::MemoryBudget budget_on_this_rank(const RunContext& run, const InputMemory& input) {
  model::MemoryBudget budget = memory_budget(run, input);
  const std::optional<InjectedBudget> injected = injected_budget_from_env();
  if (injected && injected->rank == run.world.rank()) {
    budget.bytes = static_cast<double>(injected->bytes);
    budget.source = fmt::format("the budget {} gives rank {}", kMemoryBudgetEnv, injected->rank);
    budget.or_remedy.clear();
  }
  return budget;
}

// Mixed precision stores activations in the reduced type; the parameters, their gradients and the optimizer's
// state stay fp32 whatever the precision.
model::ElementType activation_type(config::Precision precision) {
  switch (precision) {
    case config::Precision::bf16: return model::ElementType::bf16;
    case config::Precision::fp16: return model::ElementType::f16;
    default: return model::ElementType::f32;
  }
}

}  // namespace

std::string model_source(const config::JobConfig& job) {
  const std::string path = job.source.string();
  return job.source.extension() == ".h5" ? fmt::format("the job in checkpoint '{}'", path)
                                         : fmt::format("job file '{}'", path);
}

std::unique_ptr<model::Network> build_network(const RunContext& run, const model::Shape& input, int classes,
                                              const InputMemory& input_memory, model::ParameterMemory* memory) {
  std::unique_ptr<model::Network> net;
  run.world.all_succeed([&] {
    const model::MemoryBudget budget = budget_on_this_rank(run, input_memory);
    try {
      net = std::make_unique<model::Network>(
          run.job.model.layers, run.backend, input, classes,
          model::NetworkOptions{.share_memory = true, .fuse = run.job.run.fuse_layers,
                                .budget = budget,
                                .activations = activation_type(run.job.train.precision),
                                .parameter_memory = memory,
                                .freeze_through = run.job.train.freeze});
    } catch (const JobFileError& e) {
      // The layers' and the data's refusals name model.layers[i] or the class count; the file they are in goes first.
      throw JobFileError(fmt::format("{}: {}", model_source(run.job), e.what()));
    } catch (const std::bad_alloc&) {
      // A library's buffers sized by the batch (oneDNN's scratchpad) come before the network's own budget check.
      const std::string share =
          budget.bytes > 0 ? fmt::format(" ({} is {})", budget.source, byte_size_text(budget.bytes)) : "";
      throw JobFileError(fmt::format("the model at batch {} could not be allocated on this rank: memory ran out while "
                                     "building it{}; lower train.batch_per_rank or make the model smaller",
                                     input.n, share));
    }
  });
  return net;
}

std::unique_ptr<model::Optimizer> build_optimizer(const RunContext& run, model::Network& net) {
  std::unique_ptr<model::Optimizer> optimizer;
  run.world.all_succeed([&] { optimizer = model::make_optimizer(run.job.optimizer, net); });
  return optimizer;
}


}  // namespace ringtrain::train
