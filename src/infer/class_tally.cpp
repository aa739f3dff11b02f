// Owns the per-class counts of an evaluation; see class_tally.h.
#include "infer/class_tally.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>


namespace ringtrain::infer {

ClassTally::ClassTally(int classes) : classes_(classes), matrix_(static_cast<size_t>(classes) * classes + 1, 0) {}

void ClassTally::add(const train::EvaluatedBatch& b) {
  for (int i = 0; i < b.count; ++i) {
    const float* row = b.logits + static_cast<ptrdiff_t>(i) * b.classes;
    const int predicted = train::predicted_class(row, b.classes);
    const int truth = b.labels[i];
    if (truth < 0 || truth >= classes_) continue;  // the evaluator refuses the split after the batch
    ++matrix_[static_cast<size_t>(truth * classes_ + predicted)];
    if (train::in_top(row, b.classes, truth, 5)) ++matrix_.back();
  }
}

void ClassTally::sum_across(const dist::World& world) {
  world.sum_across(matrix_.data(), static_cast<int>(matrix_.size()));
}

int64_t ClassTally::samples() const { return std::accumulate(matrix_.begin(), matrix_.end() - 1, int64_t{0}); }

int64_t ClassTally::of_class(int truth) const {
  const auto row = matrix_.begin() + static_cast<ptrdiff_t>(truth) * classes_;
  return std::accumulate(row, row + classes_, int64_t{0});
}

double ClassTally::class_accuracy(int truth) const {
  const int64_t n = of_class(truth);
  return n > 0 ? static_cast<double>(count(truth, truth)) / static_cast<double>(n) : 0.0;
}

double ClassTally::top5_accuracy() const {
  return static_cast<double>(matrix_.back()) / static_cast<double>(std::max<int64_t>(samples(), 1));
}

std::string ClassTally::table(const std::vector<std::string>& names) const {
  std::string out = fmt::format("{:>5}  {:<24} {:>8} {:>9}\n", "class", "name", "samples", "accuracy");
  for (int c = 0; c < classes_; ++c)
    out += fmt::format("{:>5}  {:<24} {:>8} {:>9.4f}\n", c, names[static_cast<size_t>(c)], of_class(c), class_accuracy(c));
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
  nlohmann::ordered_json per_class = nlohmann::ordered_json::array(), matrix = nlohmann::ordered_json::array();
  for (int t = 0; t < classes_; ++t) {
    per_class.push_back({{"class", t}, {"name", names[static_cast<size_t>(t)]}, {"samples", of_class(t)},
                         {"accuracy", class_accuracy(t)}});
    std::vector<int64_t> row;
    for (int p = 0; p < classes_; ++p) row.push_back(count(t, p));
    matrix.push_back(row);
  }
  return {{"per_class", per_class}, {"confusion_matrix", matrix}};
}

}  // namespace ringtrain::infer
