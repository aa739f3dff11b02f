// Owns `ringtrain prepare` and `ringtrain inspect`: thin wrappers over io/ that print results.
#include <fmt/format.h>

#include "commands/commands.h"
#include "common/error.h"
#include "io/inspect.h"
#include "io/prepare.h"

namespace ringtrain::commands {

int prepare_fashion_mnist(const std::filesystem::path& source, const std::filesystem::path& out, int shards, bool overwrite) {
  io::prepare_fashion_mnist(source, out, shards, overwrite);
  fmt::print("wrote {}/train and {}/test ({} shards each)\n", out.string(), out.string(), shards);
  return 0;
}

int prepare_synthetic(const std::filesystem::path& out, const io::SyntheticOptions& options, bool overwrite) {
  io::prepare_synthetic(out, options, overwrite);
  fmt::print("wrote {}/train and {}/test: {}x{}x{} images, {} classes, {} training samples, {} shards\n", out.string(),
             out.string(), options.shape.channels, options.shape.height, options.shape.width, options.num_classes,
             options.samples, options.shards);
  return 0;
}

int inspect(const std::filesystem::path& split_dir) {
  const io::SplitReport report = io::inspect_split(split_dir);
  fmt::print("{}", io::format_report(report));
  return report.valid() ? 0 : static_cast<int>(ExitCode::data);
}

}  // namespace ringtrain::commands
