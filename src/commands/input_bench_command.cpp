// Owns `ringtrain input-bench`: a job's training input pipeline alone (read, decode or augment, to uint8 batches as a
// GPU receives them; with data.decode = gpu, through the backend's decode to normalised device batches), on each
// rank's partition and its loader threads, timed after a warm-up, as one JSON line with the images per second, so
// the pipeline can be measured against its peers (tf.data, torchvision, DALI) on the same machine without a model.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <chrono>
#include <optional>
#include <string>

#include "backend/device_setup.h"
#include "commands/commands.h"
#include "commands/on_every_rank.h"
#include "commands/results_on_stdout.h"
#include "commands/same_job.h"
#include "commands/with_watchdog.h"
#include "common/error.h"
#include "config/job_config.h"
#include "data/batch_loader.h"
#include "data/device_batch.h"
#include "data/data_plan.h"
#include "data/decode_ahead.h"
#include "data/loader_work.h"
#include "data/sample_order.h"
#include "dist/world.h"
#include "io/partition.h"
#include "io/shard_reader.h"
#include "util/json_text.h"

namespace ringtrain::commands {

namespace {

using Clock = std::chrono::steady_clock;

// The training loop's batches: each epoch's seeded order of the partition, cut into full batches.
train::BatchPlan epoch_batches(const config::JobConfig& job, const dist::World& world, int64_t partition, int batch) {
  const int64_t per_epoch = std::max<int64_t>(1, partition / batch);
  return [=, seed = job.train.seed, shuffle = job.train.shuffle, rank = world.rank(), cached = int64_t{-1},
          order = std::vector<int64_t>()](int64_t i, std::vector<int64_t>& out) mutable {
    const int64_t epoch = i / per_epoch, within = i % per_epoch;
    if (epoch != cached) {
      order = train::epoch_order(partition, seed, epoch, rank, shuffle);
      cached = epoch;
    }
    out.assign(order.begin() + within * batch, order.begin() + (within + 1) * batch);
  };
}

struct Timed {
  double seconds = 0;
  double cpu_seconds = 0;  // the process's, every thread's: a rate per CPU-second holds on a busy machine too
  train::LoaderTimes loader;
};

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Where the device decodes (data.decode = gpu), each batch also goes through a DeviceBatch on `device`: decoded
// and cropped there one batch ahead (train::DecodeAhead, as training does), normalised, the device waited for at
// the end.
Timed run_pipeline(const config::JobConfig& job, const dist::World& world, const InputBenchArgs& args,
                   io::ShardReader& reader, model::Backend* device, int& threads) {
  const int batch = job.train.batch_per_rank;
  const int64_t per_epoch = std::max<int64_t>(1, reader.size() / batch);
  train::LoaderWork work =
      train::training_loader_work(job, world, train::BatchForm::pixels, reader.meta(), 0, per_epoch);
  threads = work.threads;
  // Planned past the timed batches by what the pipeline holds in flight (the queue, the batch being made, the device's
  // one ahead): the window then ends with work in flight as it began with some, as the peers' loops run on past theirs,
  // rather than crediting the window with a head start and stopping the producers early.
  const int in_flight = job.data.prefetch_batches + 2;
  train::BatchLoader loader(reader, batch, args.warmup + args.batches + in_flight,
                            epoch_batches(job, world, reader.size(), batch), job.data.prefetch_batches, std::move(work));
  const io::SampleShape& s = reader.meta().shape;
  const model::Shape input{batch, s.channels, s.height, s.width};
  std::optional<train::DeviceBatch> on_device;
  if (device) on_device.emplace(*device, input, train::BatchForm::pixels);
  std::optional<train::DecodeAhead> ahead;  // as training decodes: one batch ahead, on a thread of its own
  if (device && loader.form() == train::BatchForm::jpegs) ahead.emplace(*device, loader, input);
  const auto take = [&] {
    if (ahead) return ahead->load(*on_device, ahead->next(nullptr));
    auto host = loader.next(nullptr);
    if (on_device) on_device->load(*host);
    loader.recycle(std::move(host));
  };
  for (int i = 0; i < args.warmup; ++i) take();
  if (device) device->synchronize();
  const train::LoaderTimes before = loader.times();
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  for (int i = 0; i < args.batches; ++i) take();
  if (device) device->synchronize();
  Timed timed{std::chrono::duration<double>(Clock::now() - start).count(), process_cpu_seconds() - cpu_start,
              loader.times()};
  timed.loader.read_s -= before.read_s;
  timed.loader.convert_s -= before.convert_s;
  timed.loader.samples -= before.samples;
  timed.loader.batches -= before.batches;
  return timed;
}

// "cpu" (the loader threads), "gpu" (the GPU backend), "cpu_twin" (data.decode = gpu on the CPU twin) or "none".
std::string decode_place(const io::DatasetMeta& meta, bool device_decode, const model::Backend* device) {
  if (meta.storage != io::SampleStorage::jpeg) return "none";
  if (!device_decode) return "cpu";
  return device->allocates_host_memory() ? "cpu_twin" : "gpu";
}

}  // namespace

int input_bench(int* argc, char*** argv, const InputBenchArgs& args) {
  dist::World world(argc, argv);
  return on_every_rank(world, [&] {
    return with_results_on_stdout([&] {
      config::JobConfig job;
      world.all_succeed([&] {
        job = config::load_job(args.job, args.overrides);
        if (args.threads > 0) job.data.loader_threads = args.threads;
      });
      require_same_job(world, job);
      // Its waits on the other ranks (the split agreed, the rates summed) are timed by run.collective_timeout_s.
      return with_watchdog(world, job, [&](dist::Watchdog&) {
        io::SplitIndex split;
        world.all_succeed([&] { split = io::open_split(job.data.train); });
        const io::SampleRange range = io::rank_range(split.total_samples(), world.rank(), world.size());
        io::ShardReader reader(split, range);
        const bool device_decode = train::decodes_on_device(job, split.meta);
        world.all_succeed([&] {
          if (device_decode) train::refuse_what_device_decoding_excludes(job);
        });
        // What training refuses (DataPlan): too few samples for a step; the batches would read past the partition.
        train::steps_every_rank_can_take(job, world, range.size(), split.total_samples());
        backend::DeviceSetup device;
        if (device_decode) device = backend::open_device(job, world, backend::DeviceUse::inference);
        int threads = 0;
        const Timed timed = run_pipeline(job, world, args, reader, device.backend.get(), threads);
        const double images = static_cast<double>(args.batches) * job.train.batch_per_rank;
        const double all_images_per_s = world.sum_across(images / timed.seconds);
        if (!world.is_root()) return 0;
        nlohmann::ordered_json line{
            {"images_per_s", all_images_per_s},
            {"images_per_s_per_rank", images / timed.seconds},
            {"ranks", world.size()},
            {"threads", threads},
            {"decode", decode_place(split.meta, device_decode, device.backend.get())},
            {"storage", split.meta.storage == io::SampleStorage::jpeg ? "jpeg" : "raw"},
            {"augment", job.data.augment.kind == config::AugmentKind::resized_crop_flip ? "resized_crop_flip"
                        : job.data.augment.kind == config::AugmentKind::pad_crop_flip   ? "pad_crop_flip"
                                                                                        : "none"},
            {"sample_shape", {split.meta.shape.channels, split.meta.shape.height, split.meta.shape.width}},
            {"batch", job.train.batch_per_rank},
            {"batches", args.batches},
            {"warmup_batches", args.warmup},
            {"seconds", timed.seconds},
            {"cpu_seconds", timed.cpu_seconds},
            {"images_per_cpu_s", images / timed.cpu_seconds},
            {"loader_read_s", timed.loader.read_s},
            {"loader_convert_s", timed.loader.convert_s}};
        fmt::print("{}\n", util::json_text(line));
        return 0;
      }, {"run.collective_timeout_s", "input-bench writes nothing: run it again", "batches", /*has_steps=*/false});
    });
  });
}

}  // namespace ringtrain::commands
