// Owns ringtrain-bench's all-reduce bandwidth rows (run under `mpirun -np N`): plain MPI_Allreduce of one message
// against our gradient reduction of the same bytes (GradientBuckets over 256 KiB tensors, buckets of dist.bucket_mb,
// launched back to back through either CPU reducer, then wait_all). Reports bus bandwidth as nccl-tests does,
// 2(N-1)/N x bytes / time, and checks the sums every iteration. Iteration counts are fixed (not timed by Google
// Benchmark) so every rank runs the same number of collectives.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "dist/gradient_buckets.h"
#include "dist/mpi_gradient_reducer.h"
#include "dist/thread_gradient_reducer.h"
#include "util/clock.h"

namespace {

using namespace ringtrain;

constexpr int64_t kTensorFloats = 64 * 1024;  // 256 KiB tensors: buckets can form at any size >= that

struct World {
  int rank = 0, size = 1;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
};

// Fills with rank + 1, so every element of the sum is size(size+1)/2; checks a spread of elements.
void fill(std::vector<float>& v, const World& w) { std::fill(v.begin(), v.end(), static_cast<float>(w.rank + 1)); }
bool summed(const std::vector<float>& v, const World& w) {
  const float want = static_cast<float>(w.size * (w.size + 1) / 2);
  for (size_t i = 0; i < v.size(); i += 4099)
    if (v[i] != want) return false;
  return v.back() == want;
}

void report(benchmark::State& state, const World& w, int64_t bytes) {
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["busbw_GBps"] = benchmark::Counter(
      2.0 * (w.size - 1) / w.size * static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
  state.counters["ranks"] = w.size;
}

bool needs_ranks(benchmark::State& state, const World& w) {
  if (w.size > 1) return true;
  state.SkipWithError("run under mpirun -np 2 (or more): an all-reduce of one rank moves no data");
  return false;
}

void BM_MpiAllreduce(benchmark::State& state) {
  const World w;
  if (!needs_ranks(state, w)) return;
  const int64_t bytes = state.range(0);
  std::vector<float> data(static_cast<size_t>(bytes / 4));
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : state) {
    fill(data, w);
    const double t0 = util::now_s();
    MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    state.SetIterationTime(util::now_s() - t0);
    if (!summed(data, w)) {
      state.SkipWithError("wrong sum");
      break;
    }
  }
  report(state, w, bytes);
}

// range(0): bytes; range(1): bucket size in KiB; range(2): 0 nonblocking (MPI_Iallreduce), 1 thread.
void BM_OurAllreduce(benchmark::State& state) {
  const World w;
  if (!needs_ranks(state, w)) return;
  const int64_t bytes = state.range(0), floats = bytes / 4;
  std::vector<std::pair<int64_t, int64_t>> tensors;
  for (int64_t at = 0; at < floats; at += kTensorFloats) tensors.emplace_back(at, std::min(kTensorFloats, floats - at));
  const dist::GradientBuckets buckets(tensors, state.range(1) * 1024 / 4);
  std::unique_ptr<dist::GradientReducer> reducer;
  if (state.range(2) == 1)
    reducer = std::make_unique<dist::ThreadGradientReducer>(MPI_COMM_WORLD);
  else
    reducer = std::make_unique<dist::MpiGradientReducer>(MPI_COMM_WORLD);
  std::vector<float> data(static_cast<size_t>(floats));
  MPI_Barrier(MPI_COMM_WORLD);
  for (auto _ : state) {
    fill(data, w);
    const double t0 = util::now_s();
    for (const auto& b : buckets.buckets()) reducer->launch(data.data(), b);
    reducer->wait_all();
    state.SetIterationTime(util::now_s() - t0);
    if (!summed(data, w)) {
      state.SkipWithError("wrong sum");
      break;
    }
  }
  report(state, w, bytes);
  state.counters["buckets"] = static_cast<double>(buckets.buckets().size());
  state.SetLabel(state.range(2) == 1 ? "thread" : "nonblocking");
}

// 64 KiB to 64 MiB. Ours: 1 MiB buckets through both reducers, and 25 MiB buckets (PyTorch DDP's default).
void sizes(benchmark::internal::Benchmark* b, bool ours) {
  for (int64_t bytes = 64 << 10; bytes <= (64 << 20); bytes *= 4) {
    if (!ours) {
      b->Args({bytes});
      continue;
    }
    b->Args({bytes, 1024, 0});
    b->Args({bytes, 1024, 1});
    b->Args({bytes, 25 * 1024, 0});
  }
}

}  // namespace

// A fixed iteration count: Google Benchmark's own choice could differ between ranks and deadlock them.
BENCHMARK(BM_MpiAllreduce)->Apply([](benchmark::internal::Benchmark* b) { sizes(b, false); })
    ->UseManualTime()->Iterations(40)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OurAllreduce)->Apply([](benchmark::internal::Benchmark* b) { sizes(b, true); })
    ->UseManualTime()->Iterations(40)->Unit(benchmark::kMicrosecond);
