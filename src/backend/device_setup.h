// Owns choosing and opening the compute device a job runs on: the backend and the gradient reducer that goes
// with it, the same choice on every rank; and the list of libraries the binary runs on, the GPU's included.
#pragma once
#include <memory>

#include "config/job_config.h"
#include "dist/gradient_reducer.h"
#include "dist/world.h"
#include "model/backend.h"
#include "util/versions.h"

namespace ringtrain::backend {

struct DeviceSetup {
  std::unique_ptr<model::Backend> backend;           // declared first: the reducer (NCCL) goes before its device
  std::unique_ptr<dist::GradientReducer> reducer;
};

// Collective. run.device = "cuda" takes the GPU backend; "auto" takes it when this build has one and every rank
// sees a GPU (so a mixed allocation never splits a job across backends); otherwise the CPU twin with the
// dist.reducer the job names. Every rank throws the same JobFileError when the job asks for what it cannot have.
// For inference (evaluate, predict) and input-bench a tf32 job runs on the CPU too, in fp32: tf32 keeps fp32 values
// and only rounds the GPU's matrix products' operands, so the CPU computes the same model more exactly.
enum class DeviceUse { training, inference };
DeviceSetup open_device(const config::JobConfig& job, dist::World& world, DeviceUse use = DeviceUse::training);

// Whether the CPU twin stores 4-D activations NHWC (run.cpu_layout): as asked, or under auto where no layer of the
// model would run between reorders in it (batch norm, grouped and depthwise convolutions) and either bf16_products
// (the products run in bf16 on oneDNN) or, with fp32 tensors, every product is one over positions or patches (a
// token model: pointwise convolutions and patch embeddings, no pooling), the cases measured faster.
bool cpu_stores_nhwc(const config::JobConfig& job, bool bf16_products);

// Every library this binary runs on, as `ringtrain --version` and versions.json list them: the host's
// (util/versions.h), then the GPU backend's (or the line saying none was built). Safe before MPI_Init.
util::VersionList library_versions();

}  // namespace ringtrain::backend
