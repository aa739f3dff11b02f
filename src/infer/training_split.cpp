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

}  // namespace ringtrain::infer
