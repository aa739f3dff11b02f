// Owns the per-class counts of an evaluation; see class_tally.h.
#include "infer/class_tally.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>


namespace ringtrain::infer {

ClassTally::ClassTally(int classes)
    : classes_(classes),
      counts_((classes <= kMatrixClasses ? static_cast<size_t>(classes) * classes : 2 * static_cast<size_t>(classes)) +
                  1,
              0) {}

void ClassTally::add(const train::EvaluatedBatch& b) {
  for (int i = 0; i < b.count; ++i) {
    const float* row = b.logits + static_cast<ptrdiff_t>(i) * b.classes;
    const int predicted = train::predicted_class(row, b.classes);
    const int truth = b.labels[i];
    if (truth < 0 || truth >= classes_) continue;  // the evaluator refuses the split after the batch
    if (has_matrix()) {
      ++counts_[static_cast<size_t>(truth) * classes_ + predicted];
    } else {
      ++counts_[static_cast<size_t>(truth)];
      if (predicted == truth) ++counts_[static_cast<size_t>(classes_ + truth)];
    }
    if (train::in_top(row, b.classes, truth, 5)) ++counts_.back();
  }
}

void ClassTally::sum_across(const dist::World& world) {
  world.sum_across(counts_.data(), static_cast<int>(counts_.size()));
}

int64_t ClassTally::count(int truth, int predicted) const {
  return counts_[static_cast<size_t>(truth) * classes_ + predicted];
}

int64_t ClassTally::samples() const {
  int64_t n = 0;
  for (int c = 0; c < classes_; ++c) n += of_class(c);
  return n;
}

int64_t ClassTally::of_class(int truth) const {
  if (!has_matrix()) return counts_[static_cast<size_t>(truth)];
  const auto row = counts_.begin() + static_cast<ptrdiff_t>(truth) * classes_;
  return std::accumulate(row, row + classes_, int64_t{0});
}

int64_t ClassTally::hits(int truth) const {
  return has_matrix() ? count(truth, truth) : counts_[static_cast<size_t>(classes_ + truth)];
}

double ClassTally::class_accuracy(int truth) const {
  const int64_t n = of_class(truth);
  return n > 0 ? static_cast<double>(hits(truth)) / static_cast<double>(n) : 0.0;
}

double ClassTally::top5_accuracy() const {
  return static_cast<double>(counts_.back()) / static_cast<double>(std::max<int64_t>(samples(), 1));
}

std::string ClassTally::table(const std::vector<std::string>& names) const {
  std::string out = fmt::format("{:>5}  {:<24} {:>8} {:>9}\n", "class", "name", "samples", "accuracy");
  for (int c = 0; c < classes_; ++c)
    out += fmt::format("{:>5}  {:<24} {:>8} {:>9.4f}\n", c, names[static_cast<size_t>(c)], of_class(c), class_accuracy(c));
  if (!has_matrix()) return out + fmt::format("(no confusion matrix past {} classes)\n", kMatrixClasses);
  if (classes_ > 20) return out + "(confusion matrix: in the --out JSON)\n";
  out += "confusion matrix (rows: label, columns: prediction):\n      ";
  for (int p = 0; p < classes_; ++p) out += fmt::format("{:>6}", p);
  for (int t = 0; t < classes_; ++t) {
    out += fmt::format("\n{:>5} ", t);
    for (int p = 0; p < classes_; ++p) out += fmt::format("{:>6}", count(t, p));
  }
  return out + "\n";
}

nlohmann::ordered_json ClassTally::json(const std::vector<std::string>& names) const {
  nlohmann::ordered_json per_class = nlohmann::ordered_json::array();
  nlohmann::ordered_json matrix = has_matrix() ? nlohmann::ordered_json::array() : nlohmann::ordered_json();
  for (int t = 0; t < classes_; ++t) {
    per_class.push_back({{"class", t}, {"name", names[static_cast<size_t>(t)]}, {"samples", of_class(t)},
                         {"accuracy", class_accuracy(t)}});
    if (!has_matrix()) continue;
    std::vector<int64_t> row;
    for (int p = 0; p < classes_; ++p) row.push_back(count(t, p));
    matrix.push_back(row);
  }
  return {{"per_class", per_class}, {"confusion_matrix", matrix}};
}

}  // namespace ringtrain::infer
