// Owns the formatting of library-call failures and exit-code names.
#include "common/error.h"

#include <fmt/format.h>

#include "common/process_label.h"

namespace ringtrain {

void throw_library_error(const char* library, const char* call, const char* file, int line,
                         const std::string& library_message) {
  throw Error(ExitCode::library, fmt::format("{} call failed on {}: {}\n  at {}:{}\n  {} says: {}", library,
                                             process_label(), call, file, line, library, library_message));
}

const char* exit_code_name(ExitCode code) noexcept {
  switch (code) {
    case ExitCode::ok: return "ok";
    case ExitCode::internal: return "internal error";
    case ExitCode::usage: return "usage error";
    case ExitCode::job_file: return "job file error";
    case ExitCode::data: return "data error";
    case ExitCode::checkpoint: return "checkpoint error";
    case ExitCode::fault: return "runtime fault";
    case ExitCode::library: return "library call failed";
    case ExitCode::preempted: return "preempted (checkpoint written)";
  }
  return "unknown";
}

}  // namespace ringtrain
