// Owns finding the data a checkpoint's model was trained on: its sample shape and normalisation (mean/std) are
// not in the checkpoint but in the shards of that data, which `export` and `predict` on image files need.
#pragma once
#include <filesystem>

#include <string>

#include "config/job_config.h"
#include "data/normalisation.h"
#include "io/dataset_meta.h"

namespace ringtrain::infer {

// The split `data` names, else the job's data.train. Throws DataError naming the folder and, when the data has
// moved, how to point --data at it.
io::SplitIndex open_training_split(const config::JobConfig& job, const std::filesystem::path& data);

// The numbers a model's inputs take on a split it is run on: the job's data.mean and data.std, else the statistics of
// its training data (the job's data.train, or `moved_to`), as training normalised them; where that data cannot be
// opened, the split's own, and `note` says so (else it is left empty). A `moved_to` that cannot be opened is a
// DataError (open_training_split's).
train::InputNorm model_input_norm(const config::JobConfig& job, const std::filesystem::path& moved_to,
                                  const io::DatasetMeta& split, std::string& note);

}  // namespace ringtrain::infer
