// Owns the checks every command that writes a file the user names makes first: the output is none of the files the
// command reads (by any name), since writing it would destroy that input (export --onnx over its checkpoint); and
// its folder takes it, so that a long evaluation does not end in a refusal it could have met at the start.
#pragma once
#include <filesystem>
#include <vector>

#include "io/dataset_meta.h"

namespace ringtrain::io {

struct CommandInput {
  const char* what;  // "the checkpoint", "the job file"
  std::filesystem::path path;
};

// Throws UsageError naming `option`, the output and the input it would overwrite.
void refuse_output_over_input(const char* option, const std::filesystem::path& output,
                              const std::vector<CommandInput>& inputs);

// Every shard of `split`, each as an input `what` names ("a shard of the split evaluated").
std::vector<CommandInput> shard_inputs(const SplitIndex& split, const char* what);

// Throws JobFileError (exit 3, as a failed write of it would) naming `option` and the system's reason where
// `output` is a folder, its folder is missing or takes no new file, or it is a file that may not be written.
// Nothing is created.
void refuse_unwritable_output(const char* option, const std::filesystem::path& output);

}  // namespace ringtrain::io
