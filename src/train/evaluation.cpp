// Owns the distributed evaluation; see evaluation.h.
#include "train/evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "common/error.h"
#include "data/batch_loader.h"
#include "data/loader_work.h"
#include "dist/collective_watch.h"
#include "dist/mpi_check.h"

namespace ringtrain::train {

Evaluator::Evaluator(const RunContext& run, model::Network& net, SplitPart& part, int batch,
                     DeviceBatch& device_batch, InputNorm model_norm)
    : run_(run),
      net_(net),
      part_(part),
      model_norm_(std::move(model_norm)),
      batch_(batch),
      device_batch_(device_batch),
      totals_(run.backend.allocate(sizeof(model::LossTotals))) {}

// Summed and divided in double: a statistic every rank holds alike (synchronised batch norm's, a frozen layer's)
// comes back as it was, bit for bit, on any rank count, where a float sum of 3 equal values divided by 3 is not
// the value for about one float in eight.
void Evaluator::average_running_statistics() {
  if (net_.state_count() == 0 || run_.ranks() == 1) return;
  std::vector<float> states(static_cast<size_t>(net_.state_count()));
  run_.backend.to_host(states.data(), net_.states(), states.size() * sizeof(float));
  std::vector<double> sums(states.begin(), states.end());
  const dist::CollectiveWait wait("average of the batch-norm running statistics");
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM,
                          run_.world.comm()));
  for (size_t i = 0; i < states.size(); ++i) states[i] = static_cast<float>(sums[i] / run_.ranks());
  run_.backend.to_device(net_.states(), states.data(), states.size() * sizeof(float));
}

int64_t Evaluator::batches() const { return (part_.range.size() + batch_ - 1) / batch_; }

Totals Evaluator::run(const BatchSink& sink) {
  model::Backend& backend = run_.backend;
  backend.zero(totals_.as<void>(), sizeof(model::LossTotals));
  const int batch = batch_, classes = part_.meta().num_classes;
  const int64_t n = part_.range.size(), batches = this->batches();
  std::vector<float> logits_on_host(sink ? static_cast<size_t>(batch) * static_cast<size_t>(classes) : 0);
  BatchLoader loader(
      *part_.reader, batch, batches,
      [&](int64_t i, std::vector<int64_t>& out) {
        out.clear();
        for (int64_t s = i * batch; s < std::min(n, (i + 1) * batch); ++s) out.push_back(s);
      },
      run_.job.data.prefetch_batches, plain_loader_work(run_.job, run_.world, batch_form(run_.job, run_.backend), part_.meta(),
                                                         model_norm_));
  Totals totals;
  std::exception_ptr failure;  // the first batch this rank could not read or decode
  for (int64_t i = 0; i < batches; ++i) {
    const int count = static_cast<int>(std::min<int64_t>(batch, n - i * batch));
    std::unique_ptr<HostBatch> host;
    if (!failure) {
      try {
        host = loader.next(nullptr);
        device_batch_.load(*host);
      } catch (const std::exception&) {
        failure = std::current_exception();
      }
    }
    const int shape_batch = run_.job.gpu.full_eval_batches ? batch_ : count;
    const model::Tensor logits = net_.forward(device_batch_.input_padded(count, shape_batch), model::Mode::eval, 0);
    // After a failure the forward passes keep this rank's pace on the batch it holds, counting nothing, so it meets
    // the caller's agreement when the others do, not a whole evaluation early (which the watchdog would call a stall).
    if (failure) continue;
    backend.softmax_cross_entropy(count, classes, logits.as<float>(), device_batch_.labels(), {}, nullptr,
                                  totals_.as<model::LossTotals>());
    if (sink) {
      backend.to_host(logits_on_host.data(), logits.data, static_cast<size_t>(count) * classes * sizeof(float));
      sink({logits_on_host.data(), host->labels.data(), count, classes});
    }
    loader.recycle(std::move(host));
    totals.samples += count;
  }
  if (failure) std::rethrow_exception(failure);
  model::LossTotals sums;  // one copy for the whole evaluation
  backend.to_host(&sums, totals_.as<void>(), sizeof sums);
  if (sums.bad_labels > 0)
    throw DataError(fmt::format("{} labels of {} '{}' lie outside [0, {}) on rank {}; the dataset's labels do not "
                                "match its class count (re-run `ringtrain prepare`)",
                                sums.bad_labels, part_.key, part_.split.dir.string(), classes, run_.world.rank()));
  totals.loss_sum = sums.loss_sum;
  totals.correct = static_cast<double>(sums.correct);
  return totals;
}

}  // namespace ringtrain::train
