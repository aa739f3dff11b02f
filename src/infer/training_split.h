// Owns finding the data a checkpoint's model was trained on: its sample shape and normalisation (mean/std) are
// not in the checkpoint but in the shards of that data, which `export` and `predict` on image files need.
#pragma once
#include <filesystem>

#include "config/job_config.h"
#include "io/dataset_meta.h"

namespace ringtrain::infer {

// The split `data` names, else the job's data.train. Throws DataError naming the folder and, when the data has
// moved, how to point --data at it.
io::SplitIndex open_training_split(const config::JobConfig& job, const std::filesystem::path& data);

}  // namespace ringtrain::infer
