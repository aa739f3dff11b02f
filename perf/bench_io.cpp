// Owns the io/ benchmarks: ShardReader throughput for shuffled batches of 64 (what the loader thread does
// every step) against a raw read() of the same shard bytes, for Fashion-MNIST-sized and ImageNet-sized
// samples. The splits are prepared once per process in a temporary folder.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/partition.h"
#include "io/prepare.h"
#include "io/shard_reader.h"
#include "train/batch_loader.h"

namespace {

namespace fs = std::filesystem;
using namespace ringtrain::io;

constexpr int batch = 64;

struct BenchSplit {
  SplitIndex split;
  int64_t sample_bytes = 0;
};

// Prepared splits live for the whole process and are removed at exit.
class BenchData {
 public:
  ~BenchData() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  // shape_id 0: 1x28x28 x 30000 samples; 1: 3x224x224 x 1024 samples (150 MiB, page-cache resident).
  const BenchSplit& get(int shape_id) {
    auto found = splits_.find(shape_id);
    if (found != splits_.end()) return found->second;
    SyntheticOptions options;
    options.shape = shape_id == 0 ? SampleShape{1, 28, 28} : SampleShape{3, 224, 224};
    options.samples = shape_id == 0 ? 30000 : 1024;
    options.test_samples = 1;
    options.num_classes = 10;
    options.shards = 1;
    const fs::path dir = root_ / std::to_string(shape_id);
    prepare_synthetic(dir, options, true);
    BenchSplit entry{open_split(dir / "train"), options.shape.elements()};
    return splits_.emplace(shape_id, std::move(entry)).first->second;
  }

 private:
  fs::path root_ = fs::temp_directory_path() / ("ringtrain-bench-io-" + std::to_string(::getpid()));
  std::map<int, BenchSplit> splits_;
};

BenchData& bench_data() {
  static BenchData data;
  return data;
}

const char* shape_label(int shape_id) { return shape_id == 0 ? "1x28x28" : "3x224x224"; }

void BM_ShardReaderShuffledBatch(benchmark::State& state) {
  const int shape_id = static_cast<int>(state.range(0));
  const BenchSplit& data = bench_data().get(shape_id);
  const int64_t total = data.split.total_samples();
  ShardReader reader(data.split, rank_range(total, 0, 1));
  std::vector<int64_t> indices(batch);
  std::vector<uint8_t> images(static_cast<std::size_t>(batch * data.sample_bytes));
  std::vector<int32_t> labels(batch);
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  for (auto _ : state) {
    for (auto& index : indices) index = pick(rng);
    reader.read(indices, images, labels);
    benchmark::DoNotOptimize(images.data());
  }
  state.SetBytesProcessed(state.iterations() * batch * data.sample_bytes);
  state.SetLabel(shape_label(shape_id));
}

// The floor: the same number of sample-sized pread()s at random sample-aligned offsets of the shard file.
void BM_RawPreadShuffledBatch(benchmark::State& state) {
  const int shape_id = static_cast<int>(state.range(0));
  const BenchSplit& data = bench_data().get(shape_id);
  const fs::path file = data.split.shards.front().path;
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) {
    state.SkipWithError("cannot open the shard file");
    return;
  }
  const auto file_samples = static_cast<int64_t>(fs::file_size(file)) / data.sample_bytes;
  std::vector<uint8_t> images(static_cast<std::size_t>(batch * data.sample_bytes));
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> pick(0, file_samples - 1);
  const auto bytes = static_cast<std::size_t>(data.sample_bytes);
  bool failed = false;
  for (auto _ : state) {
    for (int i = 0; i < batch && !failed; ++i)
      failed = ::pread(fd, images.data() + static_cast<std::size_t>(i) * bytes, bytes,
                       static_cast<off_t>(pick(rng) * data.sample_bytes)) != static_cast<ssize_t>(bytes);
    if (failed) {
      state.SkipWithError("short pread");
      break;
    }
    benchmark::DoNotOptimize(images.data());
  }
  ::close(fd);
  state.SetBytesProcessed(state.iterations() * batch * data.sample_bytes);
  state.SetLabel(shape_label(shape_id));
}

// Sequential read() of the whole shard file in 1 MiB blocks: the page-cache bandwidth ceiling.
void BM_RawReadWholeShard(benchmark::State& state) {
  const int shape_id = static_cast<int>(state.range(0));
  const BenchSplit& data = bench_data().get(shape_id);
  const fs::path file = data.split.shards.front().path;
  std::vector<uint8_t> buffer(std::size_t{1} << 20);
  int64_t bytes_read = 0;
  for (auto _ : state) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) {
      state.SkipWithError("cannot open the shard file");
      return;
    }
    ssize_t got = 0;
    while ((got = ::read(fd, buffer.data(), buffer.size())) > 0) bytes_read += got;
    ::close(fd);
    benchmark::DoNotOptimize(buffer.data());
  }
  state.SetBytesProcessed(bytes_read);
  state.SetLabel(shape_label(shape_id));
}

// The loader as training uses it: its thread reads shuffled batches of 64 and decodes them (uint8 -> normalised
// float), `depth` batches ahead; the benchmark consumes batches as fast as they come, so the rate is the
// loader's ceiling (the step's data wait is 0 whenever the step is slower than this).
void BM_LoaderDecode(benchmark::State& state) {
  const int shape_id = static_cast<int>(state.range(0));
  const BenchSplit& data = bench_data().get(shape_id);
  const int64_t total = data.split.total_samples();
  ShardReader reader(data.split, rank_range(total, 0, 1));
  constexpr int64_t kBatches = 1 << 30;  // more than any run consumes; the loader stops with the benchmark
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  ringtrain::train::BatchLoader loader(
      reader, batch, kBatches,
      [&](int64_t, std::vector<int64_t>& out) {
        out.resize(batch);
        for (auto& i : out) i = pick(rng);
      },
      4);
  for (auto _ : state) {
    auto b = loader.next(nullptr);
    benchmark::DoNotOptimize(b->images.data());
    loader.recycle(std::move(b));
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetBytesProcessed(state.iterations() * batch * data.sample_bytes);
  state.SetLabel(shape_label(shape_id));
}

BENCHMARK(BM_ShardReaderShuffledBatch)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
// Real time: the work is on the loader thread, the benchmark thread only waits.
BENCHMARK(BM_LoaderDecode)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawPreadShuffledBatch)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawReadWholeShard)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
