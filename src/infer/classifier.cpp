// Owns the classifier; see classifier.h.
#include "infer/classifier.h"

#include <fmt/format.h>

#include <cstdio>

#include "common/stderr_print.h"
#include "data/loader_work.h"
#include "train/network_setup.h"
#include "train/start_point.h"

namespace ringtrain::infer {

Classifier::Classifier(const train::RunContext& run, const std::filesystem::path& checkpoint,
                       const io::SampleShape& shape, int classes, train::Weights weights)
    : run_(run),
      input_{run.job.train.batch_per_rank, shape.channels, shape.height, shape.width},
      classes_(classes),
      form_(train::batch_form(run.job, run.backend)),
      net_(train::build_network(run, input_, classes, {}, nullptr)),
      device_batch_(run.backend, input_, form_),
      logits_(static_cast<size_t>(input_.n) * static_cast<size_t>(classes)) {
  const train::RestoredCheckpoint restored = train::restore_checkpoint(run, *net_, nullptr, checkpoint, weights);
  if (!restored.other_sample_shape.empty()) stderr_print("{}\n", restored.other_sample_shape);
}

std::span<const float> Classifier::logits(const train::HostBatch& batch) {
  device_batch_.load(batch);
  const int shape_batch = run_.job.gpu.full_eval_batches ? input_.n : batch.count;
  const model::Tensor out = net_->forward(device_batch_.input_padded(batch.count, shape_batch), model::Mode::eval, 0);
  const size_t values = static_cast<size_t>(batch.count) * static_cast<size_t>(classes_);
  run_.backend.to_host(logits_.data(), out.data, values * sizeof(float));
  return {logits_.data(), values};
}

}  // namespace ringtrain::infer
