// Owns the device decision, the precision checks that depend on it, and the full list of library versions.
#include "backend/device_setup.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "backend/gpu_device.h"
#include "common/error.h"
#include "dist/batch_statistics_group.h"
#include "dist/mpi_check.h"
#include "dist/mpi_gradient_reducer.h"
#include "dist/node_shared_reducer.h"
#include "dist/thread_gradient_reducer.h"
#include "model/optimizer.h"

namespace ringtrain::backend {
namespace {

bool wants_gpu(const config::JobConfig& job, const dist::World& world) {
  if (job.run.device == config::DeviceChoice::cuda) return true;
  if (job.run.device != config::DeviceChoice::auto_detect || !gpu::built()) return false;
  return world.min_across(gpu::device_visible() ? 1 : 0) == 1;
}

// The one place that says which train.precision runs where: tf32 is a tensor-core mode of the CUDA backend; fp32,
// bf16 and fp16 run on both backends.
void check_precision(const config::JobConfig& job, bool gpu, DeviceUse use) {
  if (!gpu && job.train.precision == config::Precision::tf32 && use == DeviceUse::training)
    throw JobFileError("train.precision = \"tf32\" needs the CUDA backend; this run uses the CPU backend (run.device, "
                       "no GPU visible, or a build without CUDA), which computes in fp32, bf16 or fp16");
}

// bf16 runs on oneDNN's bf16 kernels where the CPU has them, and is emulated by rounding operands elsewhere; fp16
// is always emulated (the CPU backend runs no oneDNN fp16 kernels).
struct CpuMath {
  kernels::cpu::DnnlMath dnnl = kernels::cpu::DnnlMath::fp32;
  kernels::cpu::OperandRounding rounding = kernels::cpu::OperandRounding::none;
};
CpuMath cpu_math(const config::JobConfig& job) {
  switch (job.train.precision) {
    case config::Precision::bf16:
      if (kernels::cpu::DnnlOps::bf16_available()) return {kernels::cpu::DnnlMath::bf16, {}};
      return {{}, kernels::cpu::OperandRounding::bf16};
    case config::Precision::fp16:
      return {{}, kernels::cpu::OperandRounding::fp16};
    default:
      return {};
  }
}

// Why a shared copy cannot serve this job, or "": it is updated a slice per rank, which only the element-wise rules
// can, and the fp16 loss scaler's overflow check needs every gradient on every rank.
std::string why_not_shared(const config::JobConfig& job) {
  const auto kind = job.optimizer.kind;
  if (kind != config::OptimizerKind::sgd && kind != config::OptimizerKind::adamw)
    return fmt::format("optimizer.name = \"{}\" cannot (its trust ratio needs whole tensors); use sgd or adamw",
                       model::optimizer_name(kind));
  if (job.train.precision == config::Precision::fp16)
    return "train.precision = \"fp16\" cannot (its loss scaling checks every gradient on every rank); use bf16";
  return "";
}

// auto: a shared copy where the job runs on one node and the job allows it. Between nodes the nonblocking
// reducer overlaps the network with backward, and a bf16 all-reduce is what the job asked the wire to carry.
config::CpuReducer resolve_reducer(const config::JobConfig& job, const dist::World& world) {
  if (job.dist.reducer != config::CpuReducer::automatic) return job.dist.reducer;
  const bool one_node = world.size() > 1 && world.local_size() == world.size();  // the same answer on every rank
  const bool fits = why_not_shared(job).empty() && job.dist.allreduce_dtype == config::WireFormat::fp32;
  return one_node && fits ? config::CpuReducer::shared : config::CpuReducer::nonblocking;
}

std::unique_ptr<dist::GradientReducer> open_cpu_reducer(const config::JobConfig& job, dist::World& world) {
  std::unique_ptr<dist::GradientReducer> reducer;
  switch (resolve_reducer(job, world)) {
    case config::CpuReducer::thread:
      // Its thread calls MPI while the main thread does (a synchronised batch norm's sums, the step's agreements).
      world.all_succeed([&] {
        int level = MPI_THREAD_SINGLE;
        MPI_CHECK(MPI_Query_thread(&level));
        if (level < MPI_THREAD_MULTIPLE)
          throw JobFileError("dist.reducer = \"thread\" calls MPI from a communication thread while the main thread "
                             "calls it too, which needs MPI_THREAD_MULTIPLE, and this MPI library gives less (built "
                             "without thread support?); use dist.reducer = \"nonblocking\"");
        reducer = std::make_unique<dist::ThreadGradientReducer>(world.comm(), job.dist.allreduce_dtype);
      });
      return reducer;
    case config::CpuReducer::shared:
      world.all_succeed([&] {
        if (const std::string why = why_not_shared(job); !why.empty())
          throw JobFileError(fmt::format("dist.reducer = \"shared\" updates the parameters a slice per rank, which {}, "
                                         "or dist.reducer = \"nonblocking\"",
                                         why));
        reducer = std::make_unique<dist::NodeSharedReducer>(world.comm(), job.dist.node_ranks,
                                                            job.dist.allreduce_dtype);
      });
      return reducer;
    case config::CpuReducer::automatic:
    case config::CpuReducer::nonblocking:
      break;
  }
  return std::make_unique<dist::MpiGradientReducer>(world.comm(), job.dist.allreduce_dtype);
}

// dist.sync_batchnorm_group: groups of that many consecutive ranks, so it must divide the world.
void check_sync_batchnorm(const config::JobConfig& job, const dist::World& world) {
  const int group = job.dist.sync_batchnorm_group;
  if (group == 0) return;
  if (world.size() % group != 0)
    throw JobFileError(fmt::format("dist.sync_batchnorm_group = {} must divide the world size ({} ranks); use a "
                                   "divisor of it, or 0 for unsynchronised batch norm",
                                   group, world.size()));
}

// A group of one rank (asked, or fitted on an elastic relaunch) has the rank's own statistics: nothing to add.
void synchronise_batchnorm(const config::JobConfig& job, dist::World& world, model::Backend& backend) {
  if (job.dist.sync_batchnorm_group <= 1) return;
  backend.synchronise_batchnorm(
      std::make_shared<dist::MpiBatchStatisticsGroup>(world.comm(), job.dist.sync_batchnorm_group));
}

DeviceSetup open_gpu(const config::JobConfig& job, dist::World& world) {
  DeviceSetup device;
  world.all_succeed([&] {
    device.backend = gpu::open_backend(job, world.local_rank(), world.local_size(), world.host());
  });
  world.all_succeed([&] {
    device.reducer = gpu::open_reducer(*device.backend, world.comm(), job.run.collective_timeout_s,
                                       job.dist.allreduce_dtype);
  });
  return device;
}

// A layer the CPU twin runs in NHWC between two reorders, or a residual block holding one.
bool runs_between_reorders(const config::LayerSpec& layer) {
  if (layer.is(config::kResidual))
    return std::any_of(layer.body.begin(), layer.body.end(), runs_between_reorders) ||
           std::any_of(layer.shortcut.begin(), layer.shortcut.end(), runs_between_reorders);
  return layer.is("batchnorm") || (layer.is("conv2d") && layer.integer("groups") > 1);
}

// A layer whose NHWC route is a matrix product over positions or patches (CpuBackend::runs_as_product), or that
// reads NHWC itself: every layer but pooling (squeeze-excitation's too) and the other convolutions; a residual
// block of such layers.
bool runs_on_tokens(const config::LayerSpec& layer) {
  if (layer.is(config::kResidual))
    return std::all_of(layer.body.begin(), layer.body.end(), runs_on_tokens) &&
           std::all_of(layer.shortcut.begin(), layer.shortcut.end(), runs_on_tokens);
  if (layer.is("maxpool") || layer.is("avgpool") || layer.is("global_avgpool") || layer.is("squeeze_excitation"))
    return false;
  if (!layer.is("conv2d")) return true;
  model::Conv2dShape window;
  window.kernel_h = window.kernel_w = static_cast<int>(layer.integer("kernel"));
  window.stride = static_cast<int>(layer.integer("stride"));
  window.padding = static_cast<int>(layer.integer("padding"));
  window.groups = static_cast<int>(layer.integer("groups"));
  return CpuBackend::runs_as_product(window);
}

DeviceSetup open_cpu(const config::JobConfig& job, dist::World& world) {
  const CpuMath math = cpu_math(job);
  DeviceSetup device;
  auto cpu = std::make_unique<CpuBackend>(job.run.threads > 0 ? job.run.threads : world.cores(), math.dnnl,
                                          math.rounding);
  cpu->store_nhwc(cpu_stores_nhwc(job, math.dnnl == kernels::cpu::DnnlMath::bf16),
                  CpuBackend::NhwcConvolutions::native);
  device.backend = std::move(cpu);
  device.reducer = open_cpu_reducer(job, world);
  return device;
}

}  // namespace

bool cpu_stores_nhwc(const config::JobConfig& job, bool bf16_products) {
  if (job.run.cpu_layout != config::CpuLayout::auto_detect) return job.run.cpu_layout == config::CpuLayout::nhwc;
  const auto& layers = job.model.layers;
  if (std::any_of(layers.begin(), layers.end(), runs_between_reorders)) return false;
  const auto precision = job.train.precision;
  const bool fp32_tensors = precision == config::Precision::fp32 || precision == config::Precision::tf32;
  return bf16_products || (fp32_tensors && std::all_of(layers.begin(), layers.end(), runs_on_tokens));
}

DeviceSetup open_device(const config::JobConfig& job, dist::World& world, DeviceUse use) {
  const bool gpu = wants_gpu(job, world);
  world.all_succeed([&] {
    check_precision(job, gpu, use);
    check_sync_batchnorm(job, world);
  });
  DeviceSetup device = gpu ? open_gpu(job, world) : open_cpu(job, world);
  // One place for both backends, so that no device path trains on its own rank's statistics while the job file
  // asks for the group's.
  synchronise_batchnorm(job, world, *device.backend);
  return device;
}

util::VersionList library_versions() {
  util::VersionList v = util::host_library_versions();
  for (auto& entry : gpu::library_versions()) v.push_back(std::move(entry));
  return v;
}

}  // namespace ringtrain::backend
