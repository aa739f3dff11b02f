// Owns ringtrain-allreduce-bench, the all-reduce timing tool used to validate perf/scaling_model.py: one float
// buffer of the given size reduced the way ringtrain reduces gradients (by default the CPU path's `nonblocking`
// reducer over dist.bucket_mb buckets, under ringtrain's Open MPI defaults; `nccl` the GPU path's NCCL reducer, the
// node's ranks sharing its GPUs as emulated hosts where there are fewer GPUs than ranks), or with one plain blocking
// MPI_Allreduce for comparison; timed as the slowest rank's time per reduction, to the end of the reduction on the
// device; `--wire bf16` sends bf16 copies (dist.allreduce_dtype). Prints one JSON line on rank 0.
//   mpirun -np 2 ringtrain-allreduce-bench --mib 16 --iters 5 [--reducer nonblocking|thread|blocking|nccl]
//                                          [--bucket-mb 1] [--wire fp32|bf16]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "backend/gpu_device.h"
#include "config/job_config.h"
#include "dist/gradient_buckets.h"
#include "dist/mpi_check.h"
#include "dist/mpi_gradient_reducer.h"
#include "dist/thread_gradient_reducer.h"
#include "dist/world.h"

namespace {

struct Options {
  double mib = 16;
  int iters = 5;
  std::string reducer = "nonblocking";
  double bucket_mb = 1;  // ringtrain's default dist.bucket_mb
  std::string wire = "fp32";  // dist.allreduce_dtype
  ringtrain::config::WireFormat wire_format() const {
    return wire == "bf16" ? ringtrain::config::WireFormat::bf16 : ringtrain::config::WireFormat::fp32;
  }
};

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mib") == 0)
      opt.mib = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--iters") == 0)
      opt.iters = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--reducer") == 0)
      opt.reducer = argv[i + 1];
    else if (std::strcmp(argv[i], "--bucket-mb") == 0)
      opt.bucket_mb = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--wire") == 0)
      opt.wire = argv[i + 1];
  }
  if (opt.mib <= 0 || opt.iters <= 0 || opt.bucket_mb <= 0 ||
      (opt.reducer != "nonblocking" && opt.reducer != "thread" && opt.reducer != "blocking" && opt.reducer != "nccl") ||
      (opt.wire != "fp32" && opt.wire != "bf16") || (opt.wire == "bf16" && opt.reducer == "blocking"))
    throw ringtrain::UsageError(
        "usage: ringtrain-allreduce-bench [--mib MiB>0] [--iters N>0] [--reducer nonblocking|thread|blocking|nccl] "
        "[--bucket-mb MiB>0] [--wire fp32|bf16 (not with blocking)]");
  return opt;
}

// One reduction of `grad` in place, as ringtrain would make it; for nccl, of a device copy of it.
class Reduction {
 public:
  Reduction(const Options& opt, const ringtrain::dist::World& world, int64_t floats) : comm_(world.comm()) {
    if (opt.reducer == "blocking") return;
    // One tensor per bucket-size piece, so the bucket layout is what GradientBuckets gives a real model.
    const auto bucket_floats = static_cast<int64_t>(opt.bucket_mb * 1024 * 1024 / sizeof(float));
    std::vector<std::pair<int64_t, int64_t>> tensors;
    for (int64_t at = 0; at < floats; at += bucket_floats) tensors.emplace_back(at, std::min(bucket_floats, floats - at));
    buckets_ = std::make_unique<ringtrain::dist::GradientBuckets>(tensors, bucket_floats);
    if (opt.reducer == "nccl") {
      ringtrain::config::JobConfig job;
      job.gpu.share_device = true;
      gpu_ = ringtrain::backend::gpu::open_backend(job, world.local_rank(), world.local_size(), world.host());
      device_grad_ = gpu_->allocate(static_cast<size_t>(floats) * sizeof(float));
      reducer_ = ringtrain::backend::gpu::open_reducer(*gpu_, comm_, 120, opt.wire_format());
    } else if (opt.reducer == "thread") {
      reducer_ = std::make_unique<ringtrain::dist::ThreadGradientReducer>(comm_, opt.wire_format());
    } else {
      reducer_ = std::make_unique<ringtrain::dist::MpiGradientReducer>(comm_, opt.wire_format());
    }
  }
  // Puts `grad` where the reduction reads it (not timed).
  void load(const std::vector<float>& grad) {
    if (gpu_) gpu_->to_device(device_grad_.as<void>(), grad.data(), grad.size() * sizeof(float)), gpu_->synchronize();
  }
  void run(std::vector<float>& grad) {
    if (!reducer_) {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, grad.data(), static_cast<int>(grad.size()), MPI_FLOAT, MPI_SUM, comm_));
      return;
    }
    float* data = gpu_ ? device_grad_.as<float>() : grad.data();
    for (const auto& b : buckets_->buckets()) reducer_->launch(data, b);
    reducer_->wait_all();
    (void)reducer_->settle(0);  // the device's reductions have ended, not just been queued
  }
  // Brings the result back where the check reads it (not timed).
  void unload(std::vector<float>& grad) {
    if (gpu_) gpu_->to_host(grad.data(), device_grad_.as<void>(), grad.size() * sizeof(float));
  }
  int bucket_count() const { return buckets_ ? static_cast<int>(buckets_->buckets().size()) : 1; }

 private:
  MPI_Comm comm_;
  std::unique_ptr<ringtrain::model::Backend> gpu_;  // declared before the reducer: NCCL goes before its device
  ringtrain::model::DeviceBuffer device_grad_;
  std::unique_ptr<ringtrain::dist::GradientBuckets> buckets_;
  std::unique_ptr<ringtrain::dist::GradientReducer> reducer_;
};

}  // namespace

int main(int argc, char** argv) {
  ringtrain::dist::World world(&argc, &argv);
  try {
    const Options opt = parse(argc, argv);
    const auto count = static_cast<int64_t>(opt.mib * 1024 * 1024 / sizeof(float));
    std::vector<float> grad(static_cast<size_t>(count));
    Reduction reduction(opt, world, count);
    const auto reduce_ones = [&] {
      std::fill(grad.begin(), grad.end(), 1.0f);
      reduction.load(grad);
      reduction.run(grad);
    };
    reduce_ones();  // warm-up: connections are opened lazily by the first large transfer
    std::vector<double> times;
    for (int i = 0; i < opt.iters; ++i) {
      std::fill(grad.begin(), grad.end(), 1.0f);
      reduction.load(grad);
      world.barrier();
      const double start = MPI_Wtime();
      reduction.run(grad);
      double slowest = MPI_Wtime() - start;
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, world.comm()));
      times.push_back(slowest);
    }
    reduction.unload(grad);
    const auto expected = static_cast<float>(world.size());
    const bool correct = std::all_of(grad.begin(), grad.end(), [&](float v) { return v == expected; });
    if (!correct) throw ringtrain::Error(ringtrain::ExitCode::fault, "all-reduce returned a wrong sum");
    std::sort(times.begin(), times.end());
    double mean = 0;
    for (double t : times) mean += t / static_cast<double>(times.size());
    if (world.is_root())
      std::printf("{\"ranks\": %d, \"bytes\": %lld, \"reducer\": \"%s\", \"wire\": \"%s\", \"buckets\": %d, "
                  "\"iters\": %d, \"best_s\": %.6f, \"median_s\": %.6f, \"mean_s\": %.6f}\n",
                  world.size(), static_cast<long long>(count) * 4, opt.reducer.c_str(), opt.wire.c_str(),
                  reduction.bucket_count(),
                  opt.iters, times.front(), times[times.size() / 2], mean);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringtrain-allreduce-bench: rank %d: %s\n", world.rank(), e.what());
    world.abort(ringtrain::ExitCode::fault);
  }
}
