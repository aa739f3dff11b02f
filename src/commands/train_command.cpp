// Owns `ringtrain train`: MPI start-up, the job file, backend and reducer choice, and turning errors into
// the same message and exit code on every rank (or an abort of the whole job when one rank fails alone).
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "commands/commands.h"
#include "common/process_label.h"
#include "config/job_config.h"
#include "dist/mpi_gradient_reducer.h"
#include "dist/thread_gradient_reducer.h"
#include "dist/world.h"
#include "train/stop_request.h"
#include "train/trainer.h"
#ifdef RINGTRAIN_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_versions.h"
#include "backend/cuda/nccl_reducer.h"
#endif

namespace ringtrain::commands {

namespace {

void report(const Error& e) {
  fmt::print(stderr, "ringtrain: {} (exit {}) [{}]:\n  {}\n", exit_code_name(e.code()), static_cast<int>(e.code()),
             process_label(), e.what());
  std::fflush(stderr);
}

int default_threads(const dist::World& world) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / world.local_size());
}

}  // namespace

int train(int* argc, char*** argv, const TrainArgs& args) {
  dist::World world(argc, argv);
  train::install_stop_handlers();
  try {
    config::JobConfig job;
    world.all_succeed([&] { job = config::load_job(args.job, args.overrides); });
#ifdef RINGTRAIN_HAVE_CUDA
    // auto: cuda only when every rank sees a GPU, so a mixed allocation never splits the job across backends.
    const bool use_cuda = job.run.device == config::DeviceChoice::cuda ||
                          (job.run.device == config::DeviceChoice::auto_detect &&
                           world.min_across(backend::cuda_device_visible() ? 1 : 0) == 1);
    world.all_succeed([&] {
      if (job.train.precision == config::Precision::bf16)
        throw JobFileError("train.precision = \"bf16\" is not implemented yet (bf16 storage needs its own layer "
                           "kernels); use \"tf32\" for tensor-core math with fp32 storage, or \"fp32\"");
      if (!use_cuda && job.train.precision != config::Precision::fp32)
        throw JobFileError("train.precision = \"tf32\" needs the CUDA backend; this run uses the CPU backend "
                           "(run.device or no GPU visible), which computes in fp32");
    });
    if (use_cuda) {
      std::unique_ptr<backend::CudaBackend> gpu;  // declared before the reducer: NCCL must go before its device
      std::unique_ptr<backend::NcclGradientReducer> nccl;
      world.all_succeed([&] {
        backend::CudaOptions options;
        options.conv_search = job.gpu.measure_algorithms ? backend::ConvSearch::measure : backend::ConvSearch::heuristic;
        options.deterministic = job.gpu.deterministic;
        options.workspace_limit_bytes = static_cast<std::size_t>(job.gpu.workspace_mb * (1 << 20));
        options.math = job.train.precision == config::Precision::tf32 ? backend::MathMode::tf32 : backend::MathMode::fp32;
        gpu = std::make_unique<backend::CudaBackend>(world.local_rank(), world.local_size(), world.host(), options);
      });
      world.all_succeed([&] {
        nccl = std::make_unique<backend::NcclGradientReducer>(world.comm(), *gpu, job.run.collective_timeout_s);
      });
      return train::Trainer(job, world, *gpu, *nccl, args.resume).run();
    }
#else
    world.all_succeed([&] {
      if (job.run.device == config::DeviceChoice::cuda)
        throw JobFileError("run.device = \"cuda\" but this ringtrain was built without the CUDA backend; rebuild "
                           "with -DRINGTRAIN_CUDA=ON on a machine with the CUDA toolkit, cuDNN and NCCL, or set "
                           "run.device = \"cpu\"");
      if (job.train.precision != config::Precision::fp32)
        throw JobFileError("train.precision other than \"fp32\" needs the CUDA backend; the CPU backend computes in fp32");
    });
#endif
    const int threads = job.run.threads > 0 ? job.run.threads : default_threads(world);
    backend::CpuBackend backend(threads);
    std::unique_ptr<dist::GradientReducer> reducer;
    if (job.dist.reducer == config::CpuReducer::thread)
      reducer = std::make_unique<dist::ThreadGradientReducer>(world.comm());
    else
      reducer = std::make_unique<dist::MpiGradientReducer>(world.comm());
    return train::Trainer(job, world, backend, *reducer, args.resume).run();
  } catch (const AgreedError& e) {
    report(e);
    return static_cast<int>(e.code());
  } catch (const Error& e) {
    report(e);
    if (world.size() > 1) world.abort(e.code());  // other ranks may be inside a collective: end them all
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    report(Error(ExitCode::internal, e.what()));
    if (world.size() > 1) world.abort(ExitCode::internal);
    return static_cast<int>(ExitCode::internal);
  }
}

}  // namespace ringtrain::commands
