// Owns the check every command that writes a file the user names makes first: the output is none of the files the
// command reads (by any name), since writing it would destroy that input (export --onnx over its checkpoint).
#pragma once
#include <filesystem>
#include <vector>

namespace ringtrain::io {

struct CommandInput {
  const char* what;  // "the checkpoint", "the job file"
  std::filesystem::path path;
};

// Throws UsageError naming `option`, the output and the input it would overwrite.
void refuse_output_over_input(const char* option, const std::filesystem::path& output,
                              const std::vector<CommandInput>& inputs);

}  // namespace ringtrain::io
