// Owns the epoch's cross-rank sums, the per-rank samples, and the epoch's line and record.
#include "train/epoch_summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "dist/collective_watch.h"
#include "dist/mpi_check.h"

namespace ringtrain::train {
namespace {

// Every field of EpochSums, in one place: the reduction packs and unpacks them in this order.
template <class Visit>
void for_each_field(Totals& t, Visit visit) {
  visit(t.loss_sum), visit(t.correct), visit(t.samples);
}

template <class Visit>
void for_each_field(EpochSums& s, Visit visit) {
  for_each_field(s.train, visit);
  for_each_field(s.test, visit);
  StepTimes& p = s.times;
  for (double* f : {&p.data_wait, &p.forward, &p.backward, &p.allreduce, &p.optimizer, &p.allreduce_total,
                    &p.batch_load})
    visit(*f);
  for (std::vector<double>* per_class : {&s.test_classes.samples, &s.test_classes.correct})
    for (double& v : *per_class) visit(v);
  visit(s.test_classes.top5);
}

// One reduction of every field of `sums`, packed and unpacked by its field list.
template <class Sums>
void sum_fields(Sums& sums, const dist::World& world) {
  std::vector<double> packed;
  for_each_field(sums, [&](double& v) { packed.push_back(v); });
  world.sum_across(packed.data(), static_cast<int>(packed.size()));
  size_t next = 0;
  for_each_field(sums, [&](double& v) { v = packed[next++]; });
}

// "Shirt 0.61" (or "class 6 0.61" where the shards name no classes).
std::string worst_text(const std::vector<WorstClass>& worst) {
  std::vector<std::string> parts;
  for (const WorstClass& w : worst)
    parts.push_back(fmt::format("{} {:.2f}", w.name.empty() ? fmt::format("class {}", w.index) : w.name, w.accuracy));
  return parts.empty() ? std::string() : fmt::format(" | worst: {}", fmt::join(parts, ", "));
}

// "class" is the name where the shards carry class names, else the index.
nlohmann::ordered_json worst_json(const std::vector<WorstClass>& worst) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const WorstClass& w : worst)
    out.push_back({{"class", w.name.empty() ? nlohmann::ordered_json(w.index) : nlohmann::ordered_json(w.name)},
                   {"index", w.index},
                   {"accuracy", w.accuracy},
                   {"samples", w.samples}});
  return out;
}

}  // namespace

void GradNormStats::add(double norm) {
  sum += norm;
  max = std::max(max, norm);
  ++steps;
}

double Totals::mean_loss() const { return loss_sum / std::max(samples, 1.0); }
double Totals::accuracy() const { return correct / std::max(samples, 1.0); }

void Totals::sum_across(const dist::World& world) { sum_fields(*this, world); }
void EpochSums::sum_across(const dist::World& world) { sum_fields(*this, world); }

std::vector<RankSample> gather_samples(const dist::World& world, const RankSample& mine) {
  constexpr int kFields = sizeof(RankSample) / sizeof(double);
  static_assert(sizeof(RankSample) == kFields * sizeof(double), "RankSample is sent as doubles");
  std::vector<RankSample> all(static_cast<size_t>(world.size()));
  const dist::CollectiveWait wait("gathering the ranks' epoch timings");
  MPI_CHECK(MPI_Allgather(&mine, kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, world.comm()));
  return all;
}

double EpochReport::test_top5() const { return sums.test_classes.top5 / std::max(sums.test.samples, 1.0); }

namespace {

// "test loss 0.4 acc 0.87 top-5 0.99", or that the epoch was not evaluated.
std::string test_text(const EpochReport& r) {
  if (!r.evaluated) return "test not evaluated this epoch";
  return fmt::format("test loss {:.4f} acc {:.4f}", r.sums.test.mean_loss(), r.sums.test.accuracy()) +
         (r.has_top5() ? fmt::format(" top-5 {:.4f}", r.test_top5()) : std::string());
}

// "2071 samples/s (steady 2173; job average 957)": the epoch's own rate first, the whole job's labelled as such.
std::string rate_text(const EpochReport& r) {
  const std::string job = fmt::format("job average {:.0f}", r.samples_per_s);
  if (!r.timed()) return fmt::format("no step of this epoch ran in this launch ({})", job);
  return fmt::format("{:.0f} samples/s ({}{})", r.epoch_samples_per_s(),
                     r.steady_samples_per_s > 0 ? fmt::format("steady {:.0f}; ", r.steady_samples_per_s) : "", job);
}

}  // namespace

double EpochReport::epoch_samples_per_s() const {
  return timed() ? static_cast<double>(steps_run * per_step * ranks) / epoch_train_s : 0.0;
}

double EpochReport::flops_per_s_per_rank() const {
  return timed() ? train_flops_per_sample * static_cast<double>(steps_run * per_step) / epoch_train_s : 0.0;
}

std::string EpochReport::line() const {
  const double mean = 1.0 / ranks;
  const StepTimes& t = sums.times;
  return fmt::format("epoch {}/{}: train loss {:.4f} acc {:.4f} | {} | {} | "
                     "mean over ranks: data wait {:.2f}s to device {:.2f}s forward {:.2f}s backward {:.2f}s all-reduce "
                     "{:.2f}s exposed of {:.2f}s optimizer {:.2f}s | eval {:.1f}s | {:.1f} GFLOP/s per rank",
                     epoch, epochs, sums.train.mean_loss(), sums.train.accuracy(), test_text(*this),
                     rate_text(*this), t.data_wait * mean, t.batch_load * mean, t.forward * mean, t.backward * mean,
                     t.allreduce * mean, t.allreduce_total * mean, t.optimizer * mean, eval_s,
                     flops_per_s_per_rank() / 1e9) +
         (loss_scale > 0 ? fmt::format(" | fp16 loss scale {:g}, {} step{} skipped", loss_scale, skipped_steps,
                                       skipped_steps == 1 ? "" : "s")
                         : std::string()) +
         (grad_norm.steps > 0 ? fmt::format(" | gradient norm mean {:.4g} max {:.4g}", grad_norm.mean(), grad_norm.max)
                              : std::string()) +
         worst_text(worst_classes);
}

nlohmann::ordered_json EpochReport::record() const {
  using json = nlohmann::ordered_json;
  const double mean = 1.0 / ranks;
  const StepTimes& t = sums.times;
  std::vector<double> rss_mb;
  double device_peak_mb = 0, device_allocated_mb = 0, peak_rss = 0;
  for (const RankSample& r : per_rank) {
    rss_mb.push_back(r.peak_rss_mb);
    peak_rss = std::max(peak_rss, r.peak_rss_mb);
    device_peak_mb = std::max(device_peak_mb, r.device_mb);
    device_allocated_mb = std::max(device_allocated_mb, r.device_allocated_peak_mb);
  }
  const auto device_only = [&](double v) { return device_is_host ? json() : json(v); };
  const auto if_timed = [&](double v) { return timed() ? json(v) : json(); };
  return json{{"kind", "epoch"},
              {"epoch", epoch},
              {"ranks", ranks},
              {"global_batch", global_batch},
              {"steps", steps},
              {"steps_run", steps_run},
              {"lr", lr},
              {"train_loss", sums.train.mean_loss()},
              {"train_acc", sums.train.accuracy()},
              {"test_loss", evaluated ? json(sums.test.mean_loss()) : json()},
              {"test_acc", evaluated ? json(sums.test.accuracy()) : json()},
              {"test_top5", has_top5() ? json(test_top5()) : json()},
              {"ema_test_loss", ema_test ? json(ema_test->mean_loss()) : json()},
              {"ema_test_acc", ema_test ? json(ema_test->accuracy()) : json()},
              {"samples_per_s", samples_per_s},
              {"epoch_samples_per_s", if_timed(epoch_samples_per_s())},
              {"steady_samples_per_s", steady_samples_per_s > 0 ? json(steady_samples_per_s) : json()},
              {"timing_warmup_steps", timing_warmup_steps},
              {"epoch_train_s", epoch_train_s},
              {"eval_s", eval_s},
              {"data_wait_s", t.data_wait * mean},
              {"batch_load_s", t.batch_load * mean},
              {"forward_s", t.forward * mean},
              {"backward_s", t.backward * mean},
              {"allreduce_s", t.allreduce * mean},
              {"optimizer_s", t.optimizer * mean},
              {"allreduce_total_s", t.allreduce_total * mean},
              {"data_wait_fraction", if_timed(t.data_wait * mean / epoch_train_s)},
              {"allreduce_exposed_fraction", if_timed(t.allreduce * mean / epoch_train_s)},
              {"step_time_min_s", if_timed(spread.min_s)},
              {"step_time_median_s", if_timed(spread.median_s)},
              {"step_time_max_s", if_timed(spread.max_s)},
              {"step_time_max_rank", timed() ? json(spread.slowest_rank) : json()},
              {"straggler_rank", spread.straggler_rank < 0 ? json() : json(spread.straggler_rank)},
              {"peak_rss_mb", peak_rss},
              {"peak_rss_mb_per_rank", rss_mb},
              {"baseline_rss_mb", baseline_rss_mb},
              {"memory_needed_mb", memory_needed_mb},
              {"memory_planned_mb", memory_planned_mb},
              {"activation_arena_mb", arena_mb},
              {"device_memory_peak_mb", device_only(device_peak_mb)},
              {"device_memory_at_start_mb", device_only(device_baseline_mb)},
              {"device_memory_allocated_peak_mb", device_only(device_allocated_mb)},
              {"rss_growth_over_needed", memory_needed_mb > 0 ? (peak_rss - baseline_rss_mb) / memory_needed_mb : 0.0},
              {"warnings", warnings},
              {"flops_per_s_per_rank", if_timed(flops_per_s_per_rank())},
              {"param_checksum", param_checksum},
              {"ema_checksum", ema_checksum.empty() ? json() : json(ema_checksum)},
              {"loss_scale", loss_scale > 0 ? json(loss_scale) : json()},
              {"skipped_steps", loss_scale > 0 ? json(skipped_steps) : json()},
              {"grad_norm_mean", grad_norm.steps > 0 ? json(grad_norm.mean()) : json()},
              {"grad_norm_max", grad_norm.steps > 0 ? json(grad_norm.max) : json()},
              {"graph_steps", graph_steps ? json{{"eager", graph_steps->eager},
                                                 {"captured", graph_steps->captured},
                                                 {"replayed", graph_steps->replayed}}
                                          : json()},
              {"worst_classes", worst_json(worst_classes)}};
}

}  // namespace ringtrain::train
