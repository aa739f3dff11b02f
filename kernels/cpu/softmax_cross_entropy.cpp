// Owns the fused softmax cross-entropy: loss, accuracy count and logit gradient in one pass per row. Each row
// is shifted by its maximum before exponentiating, so any finite logits give finite results.
#include "kernels/cpu/softmax_cross_entropy.h"

#include <cmath>
#include <cstddef>
#include <string>

#include "common/error.h"

namespace ringtrain::kernels::cpu {

LossResult softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                 float grad_scale, float* dlogits) {
  LossResult result;
  for (int b = 0; b < batch; ++b) {
    const float* row = logits + std::ptrdiff_t{b} * classes;
    const int32_t label = labels[b];
    if (label < 0 || label >= classes)
      throw DataError("label " + std::to_string(label) + " of sample " + std::to_string(b) + " is outside [0, " +
                      std::to_string(classes) + ")");
    int argmax = 0;
    for (int j = 1; j < classes; ++j)
      if (row[j] > row[argmax]) argmax = j;
    const double max = row[argmax];
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j]) - max);
    // -log softmax(label) = log(sum exp(x - max)) - (x_label - max): both terms are bounded, no overflow.
    result.loss_sum += std::log(sum) - (static_cast<double>(row[label]) - max);
    if (argmax == label) ++result.correct;
    if (dlogits) {
      float* d = dlogits + std::ptrdiff_t{b} * classes;
      const double inv_sum = 1.0 / sum;
      for (int j = 0; j < classes; ++j) {
        const double prob = std::exp(static_cast<double>(row[j]) - max) * inv_sum;
        d[j] = static_cast<float>((prob - (j == label ? 1.0 : 0.0)) * grad_scale);
      }
    }
  }
  return result;
}

}  // namespace ringtrain::kernels::cpu
