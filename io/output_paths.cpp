// Owns refusing an output that is one of the command's inputs; see output_paths.h.
#include "io/output_paths.h"

#include <fmt/format.h>

#include "common/error.h"
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

}  // namespace ringtrain::io
