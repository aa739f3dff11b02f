// Owns `ringtrain predict`: the model of a checkpoint (its job is inside it) on the samples of split folders,
// on the CPU or a GPU like training, as JSON lines on stdout: each sample's label, its top-k classes with their
// probabilities, and optionally the logits. One rank.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/device_setup.h"
#include "commands/commands.h"
#include "commands/on_every_rank.h"
#include "common/error.h"
#include "config/job_config.h"
#include "dist/world.h"
#include "io/checkpoint_file.h"
#include "train/batch_loader.h"
#include "train/device_batch.h"
#include "train/loader_work.h"
#include "train/network_setup.h"
#include "train/split_part.h"
#include "train/start_point.h"

namespace ringtrain::commands {
namespace {

nlohmann::ordered_json prediction(const float* logits, const std::vector<std::string>& names, int top, bool with_logits) {
  const int classes = static_cast<int>(names.size());
  const float peak = *std::max_element(logits, logits + classes);
  std::vector<double> p(static_cast<size_t>(classes));
  double total = 0;
  for (int c = 0; c < classes; ++c) total += p[static_cast<size_t>(c)] = std::exp(static_cast<double>(logits[c] - peak));
  std::vector<int> order(static_cast<size_t>(classes));
  std::iota(order.begin(), order.end(), 0);
  const int k = std::min(top, classes);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
  nlohmann::ordered_json best = nlohmann::ordered_json::array();
  for (int i = 0; i < k; ++i) {
    const auto c = static_cast<size_t>(order[static_cast<size_t>(i)]);
    best.push_back({{"class", c}, {"name", names[c]}, {"p", p[c] / total}});
  }
  nlohmann::ordered_json j{{"top", best}};
  if (with_logits) j["logits"] = std::vector<float>(logits, logits + classes);
  return j;
}

void predict_split(const train::RunContext& run, const PredictArgs& args, const std::filesystem::path& dir) {
  train::SplitPart part = train::open_split_part(run, dir, "the input");
  const io::SampleShape& s = part.meta().shape;
  const model::Shape input{run.job.train.batch_per_rank, s.channels, s.height, s.width};
  const auto net = train::build_network(run, input, part.meta().num_classes, 0);
  train::restore_checkpoint(run, *net, args.checkpoint);
  train::DeviceBatch device_batch(run.backend, input, train::batch_form(run.job, run.backend));
  const int64_t n = part.range.size(), batches = (n + input.n - 1) / input.n;
  train::BatchLoader loader(
      *part.reader, input.n, batches,
      [&](int64_t i, std::vector<int64_t>& out) {
        out.clear();
        for (int64_t k = i * input.n; k < std::min(n, (i + 1) * input.n); ++k) out.push_back(k);
      },
      run.job.data.prefetch_batches, train::plain_loader_work(run.job, run.world, run.backend));
  const int classes = part.meta().num_classes;
  const std::vector<std::string> names = io::named_classes(part.meta());
  std::vector<float> logits(static_cast<size_t>(input.n) * classes);
  for (int64_t b = 0; b < batches; ++b) {
    auto host = loader.next(nullptr);
    device_batch.load(*host);
    const model::Tensor out = net->forward(device_batch.input(host->count), model::Mode::eval, 0);
    run.backend.to_host(logits.data(), out.data, static_cast<size_t>(host->count) * classes * sizeof(float));
    for (int i = 0; i < host->count; ++i) {
      nlohmann::ordered_json j{{"input", dir.string()}, {"sample", b * input.n + i}, {"label", host->labels[static_cast<size_t>(i)]}};
      j.update(prediction(logits.data() + static_cast<ptrdiff_t>(i) * classes, names, args.top, args.logits));
      fmt::print("{}\n", j.dump());
    }
    loader.recycle(std::move(host));
  }
}

}  // namespace

int predict(int* argc, char*** argv, const PredictArgs& args) {
  dist::World world(argc, argv);
  return on_every_rank(world, [&] {
    if (world.size() != 1)
      throw UsageError("predict runs as one process (it writes one stream of predictions): run it without mpirun/srun");
    const io::CheckpointData checkpoint = io::read_checkpoint(args.checkpoint);
    config::JobConfig job = config::parse_job(checkpoint.job_toml, args.checkpoint, {"run.device=" + args.device});
    backend::DeviceSetup device = backend::open_device(job, world);
    const train::RunContext run{job, world, *device.backend, false};
    for (const auto& dir : args.inputs) predict_split(run, args, dir);
    return 0;
  });
}

}  // namespace ringtrain::commands
