// Owns the training job's control flow on one rank.
#include "train/trainer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <memory>
#include <optional>

#include "dist/gradient_sync.h"
#include "dist/mpi_check.h"
#include "io/partition.h"
#include "io/shard_reader.h"
#include "model/network.h"
#include "train/batch_loader.h"
#include "train/lr_schedule.h"
#include "train/progress.h"
#include "train/sample_order.h"
#include "train/step_runner.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/versions.h"

namespace ringtrain::train {
namespace {

namespace fs = std::filesystem;

struct Totals {
  double loss_sum = 0, correct = 0, samples = 0;
};

void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.flush()) throw Error(ExitCode::internal, fmt::format("cannot write {}", tmp.string()));
  }
  fs::rename(tmp, path);
}

// Rank 0 prepares run.dir; a run already there is never overwritten by accident.
void prepare_run_dir(const config::JobConfig& job) {
  const fs::path dir = job.run.dir;
  if (fs::exists(dir / "metrics.jsonl") && !job.run.overwrite)
    throw JobFileError(fmt::format("run.dir '{}' already holds a run (metrics.jsonl); choose another with "
                                   "--set run.dir=..., or --set run.overwrite=true to replace it",
                                   dir.string()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw JobFileError(fmt::format("run.dir '{}' cannot be created: {}; pick a writable folder with --set run.dir=...",
                                   dir.string(), ec.message()));
  const fs::path probe = dir / ".ringtrain-write-test";
  std::ofstream out(probe);
  if (!out || !(out << "x") || !out.flush())
    throw JobFileError(fmt::format("run.dir '{}' is not writable; pick a writable folder with --set run.dir=...",
                                   dir.string()));
  out.close();
  fs::remove(probe, ec);
  fs::remove(dir / "metrics.jsonl", ec);
}

io::SplitIndex open_checked(const fs::path& dir, const char* key) {
  try {
    return io::open_split(dir);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{} (from {})", e.what(), key));
  }
}

}  // namespace

Trainer::Trainer(const config::JobConfig& job, dist::World& world, model::Backend& backend,
                 dist::GradientReducer& reducer)
    : job_(job), world_(world), backend_(backend), reducer_(reducer) {}

void Trainer::run() {
  const bool root = world_.is_root();
  const int ranks = world_.size();
  auto say = [&](const std::string& text) {
    if (root) {
      fmt::print("{}\n", text);
      std::fflush(stdout);
    }
  };

  // ---- setup: every failure here is agreed, so all ranks stop with the same message
  world_.all_succeed([&] {
    if (root) prepare_run_dir(job_);
  });
  std::optional<io::SplitIndex> train_split, test_split;
  world_.all_succeed([&] {
    train_split = open_checked(job_.data.train, "data.train");
    test_split = open_checked(job_.data.test, "data.test");
    if (!(train_split->meta.shape == test_split->meta.shape) ||
        train_split->meta.num_classes != test_split->meta.num_classes)
      throw DataError(fmt::format("data.train '{}' and data.test '{}' disagree on sample shape or class count; "
                                  "prepare both from the same source",
                                  job_.data.train.string(), job_.data.test.string()));
  });
  const io::DatasetMeta& meta = train_split->meta;
  const int batch = job_.train.batch_per_rank;
  const int accumulate = job_.train.accumulate_steps;
  const io::SampleRange train_range = io::rank_range(train_split->total_samples(), world_.rank(), ranks);
  const io::SampleRange test_range = io::rank_range(test_split->total_samples(), world_.rank(), ranks);
  std::unique_ptr<io::ShardReader> train_reader, test_reader;
  world_.all_succeed([&] {
    train_reader = std::make_unique<io::ShardReader>(*train_split, train_range);
    test_reader = std::make_unique<io::ShardReader>(*test_split, test_range);
  });

  // Every rank runs the same number of steps, so no rank ever waits alone in a collective.
  const int64_t per_step = int64_t{batch} * accumulate;
  int64_t steps = world_.min_across(train_range.size() / per_step);
  if (job_.train.max_steps_per_epoch > 0) steps = std::min(steps, job_.train.max_steps_per_epoch);
  world_.all_succeed([&] {
    if (steps == 0)
      throw DataError(fmt::format(
          "data.train '{}' has {} samples: too few for {} ranks x batch_per_rank {} x accumulate_steps {} (= {} per "
          "step); lower train.batch_per_rank, use fewer ranks, or prepare more data",
          job_.data.train.string(), train_split->total_samples(), ranks, batch, accumulate, per_step * ranks));
  });

  std::unique_ptr<model::Network> net;
  const model::Shape input{batch, meta.shape.channels, meta.shape.height, meta.shape.width};
  world_.all_succeed([&] { net = std::make_unique<model::Network>(job_.model.layers, backend_, input, meta.num_classes); });

  // Rank 0 initialises from the seed and broadcasts: every rank starts bit-identical.
  {
    std::vector<float> params = root ? net->initial_params(job_.train.seed) : std::vector<float>(static_cast<size_t>(net->param_count()));
    world_.broadcast_floats(params.data(), net->param_count());
    backend_.to_device(net->params(), params.data(), params.size() * sizeof(float));
    const auto states = net->initial_states();
    backend_.to_device(net->states(), states.data(), states.size() * sizeof(float));
  }

  const int64_t global_batch = per_step * ranks;
  const LearningRateSchedule lr(job_.optimizer, global_batch, steps, job_.train.epochs);
  const auto versions = util::library_versions();
  const double train_flops = net->train_flops_per_sample();
  const int64_t used_per_rank = steps * per_step;

  say(fmt::format("ringtrain: job {} on {} rank{}, backend {}", job_.source.string(), ranks, ranks == 1 ? "" : "s",
                  backend_.description()));
  say(fmt::format("versions:\n{}", util::format_versions(versions)));
  say(fmt::format("model '{}': {} parameters, {:.2f} MFLOP/sample forward, {:.2f} MFLOP/sample training\n{}",
                  job_.model.name, net->param_count(), net->forward_flops_per_sample() / 1e6, train_flops / 1e6,
                  net->summary()));
  say(fmt::format("data: {} train samples in {} shards, {} test samples; {} per rank (rank 0 reads {} file{})",
                  train_split->total_samples(), train_split->shards.size(), test_split->total_samples(),
                  train_range.size(), train_reader->opened_files().size(),
                  train_reader->opened_files().size() == 1 ? "" : "s"));
  say(fmt::format("batch: {} ranks x {} per rank x {} accumulation = global batch {}; lr = {} x {}/{} = {:.5g} "
                  "(warm-up {} steps, then {})",
                  ranks, batch, accumulate, global_batch, job_.optimizer.base_lr, global_batch,
                  job_.optimizer.base_batch, lr.peak(), lr.warmup_steps(),
                  job_.optimizer.schedule == config::LrSchedule::cosine ? "cosine decay" : "constant"));
  say(fmt::format("epoch: {} steps x {} samples per rank = {} of rank 0's {} samples ({} dropped: the last partial "
                  "batch and any surplus of uneven partitions)",
                  steps, per_step, used_per_rank, train_range.size(), train_range.size() - used_per_rank));

  std::ofstream metrics;
  if (root) {
    write_file(job_.run.dir / "job.resolved.toml", job_.resolved_toml);
    write_file(job_.run.dir / "versions.json", util::versions_json(versions) + "\n");
    metrics.open(job_.run.dir / "metrics.jsonl");
    nlohmann::ordered_json start{{"kind", "job"},
                                 {"job", job_.source.string()},
                                 {"ranks", ranks},
                                 {"batch_per_rank", batch},
                                 {"accumulate_steps", accumulate},
                                 {"global_batch", global_batch},
                                 {"peak_lr", lr.peak()},
                                 {"steps_per_epoch", steps},
                                 {"epochs", job_.train.epochs},
                                 {"params", net->param_count()},
                                 {"forward_flops_per_sample", net->forward_flops_per_sample()},
                                 {"train_flops_per_sample", train_flops},
                                 {"backend", backend_.description()}};
    metrics << start.dump() << "\n" << std::flush;
  }

  // ---- buffers on the device
  const size_t image_floats = static_cast<size_t>(input.elements());
  model::DeviceBuffer images = backend_.allocate(image_floats * sizeof(float));
  model::DeviceBuffer labels = backend_.allocate(static_cast<size_t>(batch) * sizeof(int32_t));
  dist::GradientSync sync(*net, reducer_, job_.dist.bucket_mb);
  StepRunner runner(*net, sync, job_.optimizer, global_batch);
  say(fmt::format("gradients: {} floats in {} bucket{} of <= {} MiB, reduced with {}", net->param_count(),
                  sync.buckets().buckets().size(), sync.buckets().buckets().size() == 1 ? "" : "s",
                  job_.dist.bucket_mb, reducer_.name()));

  const int epochs = job_.train.epochs;
  const int64_t micro_per_epoch = steps * accumulate;
  const uint64_t seed = job_.train.seed;
  const int rank = world_.rank();
  const bool shuffle = job_.train.shuffle;
  BatchLoader train_loader(
      *train_reader, batch, micro_per_epoch * epochs,
      [&, cached_epoch = int64_t{-1}, order = std::vector<int64_t>()](int64_t i, std::vector<int64_t>& out) mutable {
        const int64_t epoch = i / micro_per_epoch, within = i % micro_per_epoch;
        if (epoch != cached_epoch) {
          order = epoch_order(train_range.size(), seed, epoch, rank, shuffle);
          cached_epoch = epoch;
        }
        out.assign(order.begin() + within * batch, order.begin() + (within + 1) * batch);
      },
      job_.data.prefetch_batches);

  Progress progress(job_.run.progress_every_s, steps * epochs, epochs, root);
  double train_time_total = 0, global_samples_total = 0, last_eval_s = 0;
  int64_t global_step = 0;

  for (int epoch = 0; epoch < epochs; ++epoch) {
    StepTimes times;
    Totals train_totals;
    double interval_loss = 0, interval_samples = 0;
    const double epoch_start = util::now_s();
    for (int64_t step = 0; step < steps; ++step, ++global_step) {
      runner.begin();
      for (int micro = 0; micro < accumulate; ++micro) {
        auto host = train_loader.next(&times.data_wait);
        backend_.to_device(images.as<float>(), host->images.data(), image_floats * sizeof(float));
        backend_.to_device(labels.as<int32_t>(), host->labels.data(), static_cast<size_t>(batch) * sizeof(int32_t));
        train_loader.recycle(std::move(host));
        // Distinct per (seed, micro-batch, rank): dropout masks are reproducible yet differ across ranks.
        const uint64_t step_seed =
            (seed * 0x100000001b3ull + static_cast<uint64_t>(global_step * accumulate + micro)) * 1024 +
            static_cast<uint64_t>(rank);
        const model::LossSums loss = runner.micro_batch(images.as<float>(), labels.as<int32_t>(), batch, step_seed,
                                                        micro + 1 == accumulate, times);
        if (!std::isfinite(loss.loss_sum))
          throw FaultError(fmt::format("non-finite training loss ({}) at epoch {} step {} on {}; lower "
                                       "optimizer.base_lr or add warm-up (optimizer.warmup_epochs)",
                                       loss.loss_sum, epoch + 1, step + 1, world_.host()));
        train_totals.loss_sum += loss.loss_sum;
        train_totals.correct += static_cast<double>(loss.correct);
        train_totals.samples += batch;
        interval_loss += loss.loss_sum;
        interval_samples += batch;
      }
      const float rate = static_cast<float>(lr.at(global_step));
      runner.apply(rate, times);

      const double elapsed = train_time_total + (util::now_s() - epoch_start);
      const double done_samples = global_samples_total + static_cast<double>((step + 1) * per_step * ranks);
      const double per_step_s = elapsed / static_cast<double>(global_step + 1);
      const double eta = per_step_s * static_cast<double>(steps * epochs - global_step - 1) +
                         last_eval_s * (epochs - epoch - (step + 1 == steps ? 1 : 0));
      if (progress.step(epoch, step, steps, global_step, interval_loss / std::max(interval_samples, 1.0), rate,
                        done_samples / elapsed, eta))
        interval_loss = interval_samples = 0;  // the printed loss is the mean since the previous line
    }
    const double epoch_train_s = util::now_s() - epoch_start;
    train_time_total += epoch_train_s;
    global_samples_total += static_cast<double>(steps * per_step * ranks);
    progress.finish_line();

    // ---- evaluation on the test split, distributed: each rank its own partition, one reduction of the sums
    const double eval_start = util::now_s();
    if (net->state_count() > 0 && ranks > 1) {
      // Batch-norm statistics differ per rank (each saw its own samples); average them so every rank evaluates
      // (and later checkpoints) the same model.
      std::vector<float> states(static_cast<size_t>(net->state_count()));
      backend_.to_host(states.data(), net->states(), states.size() * sizeof(float));
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, states.data(), static_cast<int>(states.size()), MPI_FLOAT, MPI_SUM,
                              world_.comm()));
      for (auto& s : states) s /= static_cast<float>(ranks);
      backend_.to_device(net->states(), states.data(), states.size() * sizeof(float));
    }
    Totals test_totals;
    {
      const int64_t n = test_range.size();
      BatchLoader eval_loader(
          *test_reader, batch, (n + batch - 1) / batch,
          [&](int64_t i, std::vector<int64_t>& out) {
            out.clear();
            for (int64_t s = i * batch; s < std::min(n, (i + 1) * batch); ++s) out.push_back(s);
          },
          job_.data.prefetch_batches);
      for (int64_t i = 0; i < (n + batch - 1) / batch; ++i) {
        auto host = eval_loader.next(nullptr);
        const int count = host->count;
        backend_.to_device(images.as<float>(), host->images.data(), static_cast<size_t>(count) * input.per_sample() * sizeof(float));
        backend_.to_device(labels.as<int32_t>(), host->labels.data(), static_cast<size_t>(count) * sizeof(int32_t));
        eval_loader.recycle(std::move(host));
        const model::Tensor logits =
            net->forward({images.as<float>(), input.with_batch(count)}, model::Mode::eval, {0});
        const auto loss = backend_.softmax_cross_entropy(count, meta.num_classes, logits.data, labels.as<int32_t>(),
                                                         1.0f, nullptr);
        test_totals.loss_sum += loss.loss_sum;
        test_totals.correct += static_cast<double>(loss.correct);
        test_totals.samples += count;
      }
    }
    double sums[] = {train_totals.loss_sum, train_totals.correct, train_totals.samples, test_totals.loss_sum,
                     test_totals.correct,   test_totals.samples,  times.data_wait,      times.forward,
                     times.backward,        times.allreduce,      times.optimizer};
    world_.sum_across(sums, static_cast<int>(std::size(sums)));
    last_eval_s = util::now_s() - eval_start;

    // Every rank must hold bit-identical parameters; a difference is silent corruption or a
    // non-deterministic reduction, and training on would average diverged models.
    std::vector<float> host_params(static_cast<size_t>(net->param_count()));
    backend_.to_host(host_params.data(), net->params(), host_params.size() * sizeof(float));
    const uint64_t checksum = util::fnv1a64(host_params.data(), host_params.size() * sizeof(float));
    std::vector<uint64_t> all(static_cast<size_t>(ranks));
    MPI_CHECK(MPI_Allgather(&checksum, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, world_.comm()));
    std::string differ;
    for (int r = 0; r < ranks; ++r)
      if (all[static_cast<size_t>(r)] != all[0]) differ += fmt::format(" {}", r);
    if (!differ.empty())
      throw FaultError(fmt::format("parameters differ between ranks after epoch {}: ranks{} differ from rank 0 "
                                   "(checksums {} vs {})", epoch + 1, differ, util::hex64(all[0]), util::hex64(checksum)));

    const double mean = 1.0 / ranks;
    const double samples_per_s = global_samples_total / train_time_total;
    const double test_acc = sums[4] / std::max(sums[5], 1.0);
    const double test_loss = sums[3] / std::max(sums[5], 1.0);
    const double train_loss = sums[0] / std::max(sums[2], 1.0);
    say(fmt::format("epoch {}/{}: train loss {:.4f} acc {:.4f} | test loss {:.4f} acc {:.4f} | {:.0f} samples/s | "
                    "per rank: data wait {:.2f}s forward {:.2f}s backward {:.2f}s all-reduce {:.2f}s optimizer "
                    "{:.2f}s | eval {:.1f}s | {:.1f} GFLOP/s per rank",
                    epoch + 1, epochs, train_loss, sums[1] / std::max(sums[2], 1.0), test_loss, test_acc,
                    samples_per_s, sums[6] * mean, sums[7] * mean, sums[8] * mean, sums[9] * mean, sums[10] * mean,
                    last_eval_s, train_flops * static_cast<double>(steps * per_step) / epoch_train_s / 1e9));
    if (root) {
      nlohmann::ordered_json rec{{"kind", "epoch"},
                                 {"epoch", epoch + 1},
                                 {"ranks", ranks},
                                 {"global_batch", global_batch},
                                 {"steps", steps},
                                 {"lr", lr.at(global_step - 1)},
                                 {"train_loss", train_loss},
                                 {"train_acc", sums[1] / std::max(sums[2], 1.0)},
                                 {"test_loss", test_loss},
                                 {"test_acc", test_acc},
                                 {"samples_per_s", samples_per_s},
                                 {"epoch_samples_per_s", static_cast<double>(steps * per_step * ranks) / epoch_train_s},
                                 {"epoch_train_s", epoch_train_s},
                                 {"eval_s", last_eval_s},
                                 {"data_wait_s", sums[6] * mean},
                                 {"forward_s", sums[7] * mean},
                                 {"backward_s", sums[8] * mean},
                                 {"allreduce_s", sums[9] * mean},
                                 {"optimizer_s", sums[10] * mean},
                                 {"flops_per_s_per_rank", train_flops * static_cast<double>(steps * per_step) / epoch_train_s},
                                 {"param_checksum", util::hex64(checksum)}};
      metrics << rec.dump() << "\n" << std::flush;
    }
  }
  say(fmt::format("done: {} epochs, {:.0f} training samples/s over the job, results in {}", epochs,
                  global_samples_total / train_time_total, (job_.run.dir / "metrics.jsonl").string()));
}

}  // namespace ringtrain::train
