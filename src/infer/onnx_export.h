// Owns turning a checkpoint into an ONNX model in inference form: the job's layers as ONNX operators (batch norm
// with its running statistics, dropout left out), the checkpoint's parameters as initializers, and the input
// normalisation folded in, so the model takes raw pixel values. Input "pixels": float32 N x C x H x W in 0..255;
// outputs "logits" (N x classes) and "probabilities" (their softmax). Class names and the normalisation are in
// the model's metadata.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "io/checkpoint_file.h"
#include "io/dataset_meta.h"

namespace ringtrain::infer {

struct ExportSource {
  const io::CheckpointData& checkpoint;
  std::string checkpoint_path;
  const config::JobConfig& job;    // the job the checkpoint was written by
  const io::DatasetMeta& data;     // the data it was trained on: sample shape, classes, mean and std
  std::vector<std::string> class_names;
};

// Throws CheckpointError when the checkpoint's tensors do not follow the job's layers.
void export_onnx(const ExportSource& source, const std::filesystem::path& file);

}  // namespace ringtrain::infer
