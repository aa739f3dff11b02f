// Owns ringtrain-jpeg-decode-bench: the GPU JPEG decoder (kernels/cuda/jpeg_batch_decoder.h) fed as training would
// feed it, alone: batches of a JPEG split's samples in an epoch's shuffled order, each sample's bytes read from its
// shard (ShardReader::read_encoded_sample), its training crop drawn (train::random_photo_crop), and the batch decoded
// and cropped on the GPU, the next batch read while the device works on this one. Prints one JSON line: images per
// second, and the host CPU seconds per image (the process's, every thread's), the figure that says how many cores a
// GPU's input needs. --read-only leaves the GPU out (the host's share alone, runnable anywhere).
//   ringtrain-jpeg-decode-bench SPLIT_DIR [--batch 256] [--batches 20] [--warmup 3] [--no-hardware] [--read-only]
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/sample_order.h"
#include "io/dataset_meta.h"
#include "io/image_decode.h"
#include "io/shard_reader.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/jpeg_batch_decoder.h"

namespace ringtrain {
namespace {

using Clock = std::chrono::steady_clock;
namespace gpu = kernels::cuda;

struct Args {
  std::string split;
  int batch = 256, batches = 20, warmup = 3;
  bool hardware = true, read_only = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return std::atoi(argv[++i]);
    };
    if (arg == "--batch") a.batch = value();
    else if (arg == "--batches") a.batches = value();
    else if (arg == "--warmup") a.warmup = value();
    else if (arg == "--no-hardware") a.hardware = false;
    else if (arg == "--read-only") a.read_only = true;
    else if (a.split.empty() && arg[0] != '-') a.split = arg;
    else throw UsageError("unknown argument '" + arg + "'");
  }
  if (a.split.empty() || a.batch <= 0 || a.batches <= 0 || a.warmup < 0)
    throw UsageError("usage: ringtrain-jpeg-decode-bench SPLIT_DIR [--batch N] [--batches N] [--warmup N] "
                     "[--no-hardware] [--read-only]");
  return a;
}

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// What nvJPEG leaves to the host (CMYK/YCCK): libjpeg's full decode, as the CPU path's pixels.
void host_decode(std::span<const uint8_t> jpeg, int channels, gpu::HostPixels& out) {
  io::DecodedImage image =
      io::convert_channels(io::decode_image_bytes("sample", jpeg), channels);
  out = {std::move(image.pixels), image.height, image.width, image.channels};
}

// One batch on the host: its samples' bytes and crops, read in the epoch's order from `first`.
struct HostBatch {
  std::vector<uint8_t> bytes;
  std::vector<std::size_t> offsets;
  std::vector<kernels::JpegCrop> crops;
};

void read_batch(const io::ShardReader& reader, const std::vector<int64_t>& order, int64_t first, int batch,
                HostBatch& out) {
  const train::AugmentSpec spec{train::AugmentKind::resized_crop_flip};
  out.bytes.clear();
  out.offsets.assign(1, 0);
  out.crops.clear();
  for (int i = 0; i < batch; ++i) {
    const int64_t sample = order[static_cast<std::size_t>((first + i) % static_cast<int64_t>(order.size()))];
    const auto size = reader.read_encoded_sample(sample, out.bytes);
    const train::PhotoCrop crop = train::random_photo_crop(spec, {1, 0, 0, sample}, size.height, size.width);
    out.offsets.push_back(out.bytes.size());
    out.crops.push_back({{}, crop.window, crop.flip, size.height, size.width});
  }
  // The spans only now: appending may have moved the bytes.
  for (std::size_t i = 0; i < out.crops.size(); ++i)
    out.crops[i].jpeg = std::span<const uint8_t>(out.bytes).subspan(out.offsets[i], out.offsets[i + 1] - out.offsets[i]);
}

struct Totals {
  double seconds = 0, cpu_seconds = 0, read_s = 0, decode_call_s = 0;
  gpu::JpegRoutes routes;
};

void add_routes(gpu::JpegRoutes& to, const gpu::JpegRoutes& from) {
  to.batched += from.batched;
  to.one_by_one += from.one_by_one;
  to.host += from.host;
  to.retried += from.retried;
}

// Batch k is read into host[k % 2] while the device works on batch k - 1: decode() waits for the stream's earlier
// work before it reuses anything, so batch k - 2's bytes are free by then.
Totals run(const Args& args, const io::ShardReader& reader, const io::SampleShape& shape, gpu::JpegBatchDecoder* decoder,
           uint8_t* out) {
  const std::vector<int64_t> order = train::epoch_order(reader.size(), 1, 0, 0, true);
  const kernels::cpu::SampleExtent extent{shape.channels, shape.height, shape.width};
  HostBatch host[2];
  Totals t;
  double cpu_start = 0;
  Clock::time_point start;
  for (int k = 0; k < args.warmup + args.batches; ++k) {
    if (k == args.warmup) {
      if (decoder) CUDA_CHECK(cudaDeviceSynchronize());
      t = {};
      start = Clock::now();
      cpu_start = process_cpu_seconds();
    }
    const auto read_start = Clock::now();
    read_batch(reader, order, int64_t{k} * args.batch, args.batch, host[k % 2]);
    const auto decode_start = Clock::now();
    if (decoder) {
      decoder->decode(host[k % 2].crops, extent, out);
      add_routes(t.routes, decoder->last_routes());
    }
    t.read_s += std::chrono::duration<double>(decode_start - read_start).count();
    t.decode_call_s += std::chrono::duration<double>(Clock::now() - decode_start).count();
  }
  if (decoder) CUDA_CHECK(cudaDeviceSynchronize());
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  t.cpu_seconds = process_cpu_seconds() - cpu_start;
  return t;
}

std::string device_name() {
  cudaDeviceProp p{};
  return cudaGetDeviceProperties(&p, 0) == cudaSuccess ? std::string(p.name) : std::string("unknown");
}

int bench(const Args& args) {
  const io::SplitIndex split = io::open_split(args.split);
  if (split.meta.storage != io::SampleStorage::jpeg)
    throw DataError("'" + args.split + "' holds decoded samples; the bench needs a JPEG split (prepare images "
                    "--store jpeg)");
  const io::ShardReader reader(split, {0, split.total_samples()});
  const io::SampleShape shape = split.meta.shape;
  std::unique_ptr<gpu::JpegBatchDecoder> decoder;
  uint8_t* out = nullptr;
  cudaStream_t stream = nullptr;
  if (!args.read_only) {
    // A blocking wait: a spinning one would count as host CPU time that decoding does not need.
    CUDA_CHECK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void* memory = nullptr;
    CUDA_CHECK(cudaMalloc(&memory, static_cast<std::size_t>(args.batch) * static_cast<std::size_t>(shape.elements())));
    out = static_cast<uint8_t*>(memory);
    decoder = std::make_unique<gpu::JpegBatchDecoder>(stream, gpu::JpegDecoderOptions{args.hardware, host_decode});
  }
  const Totals t = run(args, reader, shape, decoder.get(), out);
  const double images = static_cast<double>(args.batches) * args.batch;
  nlohmann::ordered_json line{{"bench", "jpeg_decode"},
                              {"decode", args.read_only ? "none (bytes and crops only)" : "gpu"},
                              {"device", args.read_only ? "none" : device_name()},
                              {"backend", decoder ? decoder->backend() : "none"},
                              {"nvjpeg", gpu::nvjpeg_version()},
                              {"split", args.split},
                              {"samples_in_split", split.total_samples()},
                              {"sample_shape", {shape.channels, shape.height, shape.width}},
                              {"batch", args.batch},
                              {"batches", args.batches},
                              {"warmup_batches", args.warmup},
                              {"images_per_s", images / t.seconds},
                              {"seconds", t.seconds},
                              {"cpu_seconds", t.cpu_seconds},
                              {"cpu_s_per_image", t.cpu_seconds / images},
                              {"read_s", t.read_s},
                              {"decode_call_s", t.decode_call_s},
                              {"routes",
                               {{"batched", t.routes.batched},
                                {"one_by_one", t.routes.one_by_one},
                                {"host", t.routes.host},
                                {"retried", t.routes.retried}}}};
  fmt::print("{}\n", line.dump());
  decoder.reset();
  if (out) (void)cudaFree(out);
  if (stream) (void)cudaStreamDestroy(stream);
  return 0;
}

}  // namespace
}  // namespace ringtrain

int main(int argc, char** argv) {
  try {
    return ringtrain::bench(ringtrain::parse(argc, argv));
  } catch (const ringtrain::Error& e) {
    fmt::print(stderr, "ringtrain-jpeg-decode-bench: {}\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    fmt::print(stderr, "ringtrain-jpeg-decode-bench: {}\n", e.what());
    return 1;
  }
}
