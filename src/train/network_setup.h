// Owns building the job's model and its optimizer on this rank, weighed first against the memory there is: the
// host's available memory shared by the node's ranks (less the data loaders' queues), or a GPU's free memory
// (less the convolution workspace cuDNN may still ask for), either less the samples the backend decodes.
#pragma once
#include <memory>
#include <string>

#include "data/data_plan.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "train/run_context.h"

namespace ringtrain::train {

// Where a job's model layers were read from, to go before a refusal of them: "job file 'F'", or "the job in
// checkpoint 'C'" for a job read from a checkpoint (predict and export read the model from it alone).
std::string model_source(const config::JobConfig& job);

// Collective: the model for inputs of `input` (its largest batch) and `classes` outputs, or an agreed error (too
// big for the memory, a shape it cannot take). `input_memory`: what the data loaders' queues and the device
// decode take. `memory`: where the parameters live when not in the backend's memory (the reducer's; may be
// collective).
std::unique_ptr<model::Network> build_network(const RunContext& run, const model::Shape& input, int classes,
                                              const InputMemory& input_memory, model::ParameterMemory* memory);

// Collective: the job's optimizer over `net` (its state was counted in build_network's budget).
std::unique_ptr<model::Optimizer> build_optimizer(const RunContext& run, model::Network& net);

}  // namespace ringtrain::train
