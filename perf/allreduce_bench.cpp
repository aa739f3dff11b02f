// Owns the all-reduce micro-benchmark used to validate perf/scaling_model.py: MPI_Allreduce (sum) of one
// float buffer of the given size, the same call ringtrain's CPU gradient reducer makes, timed as the slowest
// rank's time per call. Prints one JSON line on rank 0.
//   mpirun -np 2 ringtrain-allreduce-bench --mib 16 --iters 5
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "dist/mpi_check.h"
#include "dist/world.h"

namespace {

struct Options {
  double mib = 16;
  int iters = 5;
};

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mib") == 0)
      opt.mib = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--iters") == 0)
      opt.iters = std::atoi(argv[i + 1]);
  }
  if (opt.mib <= 0 || opt.iters <= 0)
    throw ringtrain::UsageError("usage: ringtrain-allreduce-bench [--mib MiB>0] [--iters N>0]");
  return opt;
}

}  // namespace

int main(int argc, char** argv) {
  ringtrain::dist::World world(&argc, &argv);
  try {
    const Options opt = parse(argc, argv);
    const auto count = static_cast<int>(opt.mib * 1024 * 1024 / sizeof(float));
    std::vector<float> grad(static_cast<size_t>(count), 1.0f);
    std::vector<float> sum(grad.size());
    // Warm-up: connections are opened lazily by the first large transfer.
    MPI_CHECK(MPI_Allreduce(grad.data(), sum.data(), count, MPI_FLOAT, MPI_SUM, world.comm()));
    std::vector<double> times;
    for (int i = 0; i < opt.iters; ++i) {
      world.barrier();
      const double start = MPI_Wtime();
      MPI_CHECK(MPI_Allreduce(grad.data(), sum.data(), count, MPI_FLOAT, MPI_SUM, world.comm()));
      double slowest = MPI_Wtime() - start;
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, world.comm()));
      times.push_back(slowest);
    }
    const bool correct = sum.front() == static_cast<float>(world.size()) && sum.back() == sum.front();
    if (!correct) throw ringtrain::Error(ringtrain::ExitCode::fault, "all-reduce returned a wrong sum");
    std::sort(times.begin(), times.end());
    double mean = 0;
    for (double t : times) mean += t / static_cast<double>(times.size());
    if (world.is_root())
      std::printf("{\"ranks\": %d, \"bytes\": %lld, \"iters\": %d, \"best_s\": %.6f, \"median_s\": %.6f, "
                  "\"mean_s\": %.6f}\n",
                  world.size(), static_cast<long long>(count) * 4, opt.iters, times.front(),
                  times[times.size() / 2], mean);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringtrain-allreduce-bench: rank %d: %s\n", world.rank(), e.what());
    world.abort(ringtrain::ExitCode::fault);
  }
}
