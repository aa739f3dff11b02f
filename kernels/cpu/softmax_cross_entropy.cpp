// Owns the fused softmax cross-entropy: loss, accuracy count and logit gradient in one pass per row. Each row
// is shifted by its maximum before exponentiating, so any finite logits give finite results.
#include "kernels/cpu/softmax_cross_entropy.h"

#include <cmath>
#include <cstddef>

namespace ringtrain::kernels::cpu {

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
    int argmax = 0;
    for (int j = 1; j < classes; ++j)
      if (row[j] > row[argmax]) argmax = j;
    const double max = row[argmax];
    double sum = 0, shifted_sum = 0;
    for (int j = 0; j < classes; ++j) {
      sum += std::exp(static_cast<double>(row[j]) - max);
      shifted_sum += static_cast<double>(row[j]) - max;
    }
    // -log softmax(j) = log(sum exp(x - max)) - (x_j - max): both terms are bounded, no overflow. Smoothed, the
    // loss is (1 - e) of the label's term plus e of the mean over the classes.
    if (valid) {
      const double label_term = std::log(sum) - (static_cast<double>(row[label]) - max);
      loss_sum += smoothing == 0 ? label_term
                                 : on_label * label_term + smoothing * (std::log(sum) - shifted_sum / classes);
    }
    if (valid && argmax == label) ++totals.correct;
    if (dlogits) {
      float* d = dlogits + std::ptrdiff_t{b} * classes;
      const double inv_sum = 1.0 / sum;
      for (int j = 0; j < classes; ++j) {
        const double prob = std::exp(static_cast<double>(row[j]) - max) * inv_sum;
        const double target = valid ? (j == label ? on_label : 0.0) + everywhere : 0.0;
        d[j] = static_cast<float>((prob - target) * settings.grad_scale);
      }
    }
  }
  totals.loss_sum += loss_sum;
}

}  // namespace ringtrain::kernels::cpu
