// Owns open_training_split; see training_split.h.
#include "infer/training_split.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::infer {

io::SplitIndex open_training_split(const config::JobConfig& job, const std::filesystem::path& data) {
  try {
    return io::open_split(data.empty() ? job.data.train : data);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{} (the data the model was trained on, for its sample shape and normalisation: "
                                "{}; point --data at a split of it)",
                                e.what(), data.empty() ? "the job's data.train" : "--data"));
  }
}

train::InputNorm model_input_norm(const config::JobConfig& job, const std::filesystem::path& moved_to,
                                  const io::DatasetMeta& split, std::string& note) {
  note.clear();
  if (!job.data.mean.empty()) return train::input_norm(split, job.data);
  try {
    return train::input_norm(open_training_split(job, moved_to).meta, job.data);
  } catch (const DataError& e) {
    if (!moved_to.empty()) throw;  // asked for by name: not to be replaced by other numbers
    note = fmt::format("note: inputs normalised with the statistics of the split itself, not of the model's training "
                       "data, which cannot be opened ({}); set data.mean and data.std to the training data's",
                       e.what());
    return train::input_norm(split, job.data);
  }
}

}  // namespace ringtrain::infer
