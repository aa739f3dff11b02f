// Owns `ringtrain --version` and `ringtrain keys [--layers]`.
#include <fmt/format.h>

#include "backend/device_setup.h"
#include "commands/commands.h"
#include "config/job_config.h"
#include "config/layer_types.h"
#include "util/versions.h"

namespace ringtrain::commands {

int print_versions() {
  fmt::print("{}", util::format_versions(backend::library_versions()));
  return 0;
}

int print_keys(bool layers) {
  fmt::print("{}", layers ? config::describe_layer_types() : config::describe_keys());
  return 0;
}

}  // namespace ringtrain::commands
