// Owns the error ending of commands run on every rank; see on_every_rank.h.
#include "commands/on_every_rank.h"

#include <fmt/format.h>

#include <cstdio>

#include "common/error.h"
#include "common/process_label.h"
#include "common/stderr_print.h"

namespace ringtrain::commands {
namespace {

void report(const Error& e, const std::string& origin = {}) {
  stderr_print("ringtrain: {} (exit {}) [{}]:\n  {}\n", exit_code_name(e.code()), static_cast<int>(e.code()),
             process_label(), e.what());
  if (!origin.empty()) stderr_print("  (found by {})\n", origin);
  std::fflush(stderr);
}

}  // namespace

int on_every_rank(dist::World& world, const std::function<int()>& body) {
  try {
    return body();
  } catch (const AgreedError& e) {
    report(e, e.origin());
    return static_cast<int>(e.code());
  } catch (const Error& e) {
    report(e);
    if (world.size() > 1) world.abort(e.code());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    report(Error(ExitCode::internal, e.what()));
    if (world.size() > 1) world.abort(ExitCode::internal);
    return static_cast<int>(ExitCode::internal);
  }
}

}  // namespace ringtrain::commands
