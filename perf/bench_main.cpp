// Owns ringtrain-bench's main(): OpenBLAS's kernels are chosen as ringtrain chooses them (util/blas_restart.h), so
// BM_Sgemm's rate is the one ringtrain's products get; MPI is initialised (threads: multiple, as in ringtrain) so
// the all-reduce benchmarks can run under `mpirun -np N`; every other benchmark runs alone as before. Only rank 0
// reports and writes --benchmark_out; the other ranks run the same benchmarks silently (they must, to take part).
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstring>
#include <vector>

#include "dist/open_mpi_defaults.h"
#include "perf/bench_registration.h"
#include "util/blas_restart.h"

namespace {

class SilentReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  ringtrain::util::restart_with_cpu_blas_kernels(argv);  // the BLAS kernels ringtrain runs, also for BM_Sgemm's rate
  ringtrain::dist::apply_open_mpi_defaults();  // measure the reducer as ringtrain runs it
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<char*> args(argv, argv + argc);
  if (rank != 0)  // one rank writes the output file
    std::erase_if(args, [](const char* a) { return std::strncmp(a, "--benchmark_out", 15) == 0; });
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  ringtrain::register_backend_layer_benchmarks();
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
