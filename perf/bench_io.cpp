// Owns the io/ benchmarks: ShardReader throughput for shuffled batches of 64 (what the loader thread does
// every step) against a raw read() of the same shard bytes, for Fashion-MNIST-sized and ImageNet-sized
// samples. The splits are prepared once per process in a temporary folder.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/batch_loader.h"
#include "io/partition.h"
#include "io/prepare.h"
#include "io/shard_reader.h"

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

const char* augment_name(ringtrain::train::AugmentKind kind) {
  switch (kind) {
    case ringtrain::train::AugmentKind::pad_crop_flip: return "pad_crop_flip";
    case ringtrain::train::AugmentKind::resized_crop_flip: return "resized_crop_flip";
    default: return "none";
  }
}

// The training loader's work for a benchmark: the augmentation keyed as training keys it (epoch 0, rank 0).
ringtrain::train::LoaderWork loader_work(ringtrain::train::AugmentKind kind, int threads, const SampleShape& shape,
                                         ringtrain::train::BatchForm form) {
  ringtrain::train::LoaderWork work{threads, {}, {}, form, {}, {}, {}};
  if (kind == ringtrain::train::AugmentKind::none) return work;
  work.transform = [kind, shape](int64_t, int64_t sample, std::span<const uint8_t> in, std::span<uint8_t> out) {
    ringtrain::train::augment_sample({kind}, {1, 0, 0, sample}, shape, in, out);
  };
  return work;
}

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

// The loader as training uses it: its thread reads shuffled batches of 64, then `threads` threads augment
// (none / pad_crop_flip / resized_crop_flip) and decode them (uint8 -> normalised float; or, form 1, leave them
// uint8 for the device to normalise, as on a GPU), `depth` batches ahead; the benchmark consumes batches as fast
// as they come, so the rate is the loader's ceiling (the step's data wait is 0 whenever the step is slower than
// this). Args: shape, augmentation, threads, form.
void BM_LoaderDecode(benchmark::State& state) {
  const int shape_id = static_cast<int>(state.range(0));
  const auto kind = static_cast<ringtrain::train::AugmentKind>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const auto form = static_cast<ringtrain::train::BatchForm>(state.range(3));
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
      4, loader_work(kind, threads, data.split.meta.shape, form));
  for (auto _ : state) {
    auto b = loader.next(nullptr);
    benchmark::DoNotOptimize(b->images.data());
    benchmark::DoNotOptimize(b->pixels.data());
    loader.recycle(std::move(b));
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.SetBytesProcessed(state.iterations() * batch * data.sample_bytes);
  state.counters["samples_per_s_per_thread"] =
      benchmark::Counter(static_cast<double>(state.iterations() * batch) / threads, benchmark::Counter::kIsRate);
  state.SetLabel(fmt::format("{} augment={} threads={} {}", shape_label(shape_id), augment_name(kind), threads,
                             form == ringtrain::train::BatchForm::pixels ? "uint8 out" : "float out"));
}

BENCHMARK(BM_ShardReaderShuffledBatch)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
// Real time: the work is on the loader thread, the benchmark thread only waits.
BENCHMARK(BM_LoaderDecode)
    ->Args({0, 0, 1, 0})
    ->ArgsProduct({{1}, {0, 1, 2}, {1, 2}, {0}})
    ->ArgsProduct({{1}, {0, 2}, {1}, {1}})  // uint8 out: what the loader does for a GPU
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawPreadShuffledBatch)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawReadWholeShard)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
