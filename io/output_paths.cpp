// Owns the checks on an output the user names before a command runs; see output_paths.h.
#include "io/output_paths.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/path_probe.h"
#include "io/whole_file.h"

namespace ringtrain::io {

void refuse_output_over_input(const char* option, const std::filesystem::path& output,
                              const std::vector<CommandInput>& inputs) {
  for (const CommandInput& input : inputs)
    if (!output.empty() && !input.path.empty() && io::same_file(output, input.path))
      throw UsageError(fmt::format("{} '{}' is {} this command reads ('{}'): writing it would destroy it; name "
                                   "another file",
                                   option, output.string(), input.what, input.path.string()));
}

void refuse_unwritable_output(const char* option, const std::filesystem::path& output) {
  if (output.empty()) return;
  const auto refuse = [&](const std::string& why) {
    throw JobFileError(fmt::format("{} '{}' cannot be written: {}; pick a writable path with {}", option,
                                   output.string(), why, option));
  };
  const PathProbe probe = probe_path(output);
  if (probe.kind == PathProbe::Kind::directory) refuse("it is a folder");
  if (probe.kind == PathProbe::Kind::other) refuse("it " + probe.describe());
  if (access(output.c_str(), F_OK) == 0) {
    if (access(output.c_str(), W_OK) != 0) refuse(std::strerror(errno));
    return;
  }
  // ENOENT: the path leads to a folder that lacks the file, which must take a new one; anything else (a file where
  // a folder should be, a missing folder) the system names.
  if (errno != ENOENT) refuse(std::strerror(errno));
  const std::filesystem::path folder = output.has_parent_path() ? output.parent_path() : ".";
  if (access(folder.c_str(), W_OK | X_OK) != 0) refuse(std::strerror(errno));
}

std::vector<CommandInput> shard_inputs(const SplitIndex& split, const char* what) {
  std::vector<CommandInput> inputs;
  for (const ShardInfo& shard : split.shards) inputs.push_back({what, shard.path});
  return inputs;
}

}  // namespace ringtrain::io
