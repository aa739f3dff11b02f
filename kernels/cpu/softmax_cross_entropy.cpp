// Owns the fused softmax cross-entropy: loss, accuracy count and logit gradient in one pass per row. Each row
// is shifted by its maximum before exponentiating, so any finite logits give finite results.
#include "kernels/cpu/softmax_cross_entropy.h"

#include <cmath>
#include <cstddef>

namespace ringtrain::kernels::cpu {
namespace {

int first_max(const float* row, int classes) {
  int at = 0;
  for (int j = 1; j < classes; ++j)
    if (row[j] > row[at]) at = j;
  return at;
}

// One row of logits as both losses need it: its first maximum, and sum(exp(x - max)) and sum(x - max).
struct ShiftedRow {
  int argmax = 0;
  double max = 0, sum = 0, shifted_sum = 0;
};

ShiftedRow shifted_row(const float* row, int classes) {
  ShiftedRow r;
  r.argmax = first_max(row, classes);
  r.max = row[r.argmax];
  for (int j = 0; j < classes; ++j) {
    r.sum += std::exp(static_cast<double>(row[j]) - r.max);
    r.shifted_sum += static_cast<double>(row[j]) - r.max;
  }
  return r;
}

// d = (softmax(row) - target(j)) * scale: the gradient both losses write.
template <class Target>
void write_gradient(const float* row, int classes, const ShiftedRow& r, float scale, Target target, float* d) {
  const double inv_sum = 1.0 / r.sum;
  for (int j = 0; j < classes; ++j) {
    const double prob = std::exp(static_cast<double>(row[j]) - r.max) * inv_sum;
    d[j] = static_cast<float>((prob - target(j)) * scale);
  }
}

}  // namespace

void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                           const LossSettings& settings, float* dlogits, LossTotals& totals) {
  const double smoothing = settings.label_smoothing;
  const double on_label = 1.0 - smoothing, everywhere = smoothing / classes;
  // The batch's loss is summed on its own and then added, so a step's total is the same sum of batch sums on
  // every backend.
  double loss_sum = 0;
  for (int b = 0; b < batch; ++b) {
    const float* row = logits + std::ptrdiff_t{b} * classes;
    const int32_t label = labels[b];
    const bool valid = label >= 0 && label < classes;
    if (!valid) ++totals.bad_labels;
    const ShiftedRow r = shifted_row(row, classes);
    // -log softmax(j) = log(sum exp(x - max)) - (x_j - max): both terms are bounded, no overflow. Smoothed, the
    // loss is (1 - e) of the label's term plus e of the mean over the classes.
    if (valid) {
      const double label_term = std::log(r.sum) - (static_cast<double>(row[label]) - r.max);
      loss_sum += smoothing == 0 ? label_term
                                 : on_label * label_term + smoothing * (std::log(r.sum) - r.shifted_sum / classes);
    }
    if (valid && r.argmax == label) ++totals.correct;
    if (dlogits)
      write_gradient(row, classes, r, settings.grad_scale,
                     [&](int j) { return valid ? (j == label ? on_label : 0.0) + everywhere : 0.0; },
                     dlogits + std::ptrdiff_t{b} * classes);
  }
  totals.loss_sum += loss_sum;
}

void soft_target_cross_entropy(int batch, int classes, const float* logits, const float* targets,
                               const LossSettings& settings, float* dlogits, LossTotals& totals) {
  const double smoothing = settings.label_smoothing;
  double loss_sum = 0;
  for (int b = 0; b < batch; ++b) {
    const float* row = logits + std::ptrdiff_t{b} * classes;
    const float* t = targets + std::ptrdiff_t{b} * classes;
    double mass = 0;
    for (int j = 0; j < classes; ++j) mass += t[j];
    const bool valid = mass > 0;
    if (!valid) ++totals.bad_labels;
    // mass is 1 on a valid row; written so, a one-hot row's targets are the hard loss's bit for bit.
    const double everywhere = smoothing * mass / classes;
    const auto target = [&](int j) { return valid ? (1.0 - smoothing) * t[j] + everywhere : 0.0; };
    const ShiftedRow r = shifted_row(row, classes);
    if (valid) {
      const double log_sum = std::log(r.sum);
      double loss = 0;
      for (int j = 0; j < classes; ++j) loss += target(j) * (log_sum - (static_cast<double>(row[j]) - r.max));
      loss_sum += loss;
    }
    if (valid && r.argmax == first_max(t, classes)) ++totals.correct;
    if (dlogits) write_gradient(row, classes, r, settings.grad_scale, target, dlogits + std::ptrdiff_t{b} * classes);
  }
  totals.loss_sum += loss_sum;
}

}  // namespace ringtrain::kernels::cpu
