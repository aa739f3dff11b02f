// Owns checking stdout at the end of a command; see results_on_stdout.h.
#include "commands/results_on_stdout.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "common/error.h"

namespace ringtrain::commands {
namespace {

[[noreturn]] void unwritable(const std::string& reason) {
  std::clearerr(stdout);  // the error is reported once, here, not again by the C library at exit
  throw JobFileError(fmt::format("the results cannot be written to stdout: {}; what it printed is lost, what it wrote "
                                 "to files is in place (a prepare's splits: ringtrain inspect reads them back): free "
                                 "space where stdout goes (or redirect it to another file) and run the command again "
                                 "(a prepare with --overwrite)",
                                 reason));
}

}  // namespace

int with_results_on_stdout(const std::function<int()>& command) {
  int rc = 0;
  try {
    rc = command();
  } catch (const std::system_error& e) {
    // fmt::print throws std::system_error when fwrite fails; stdout's error flag tells it from any other.
    if (std::ferror(stdout)) unwritable(e.code().message());
    throw;
  } catch (...) {
    std::fflush(stdout);  // what was printed before the error stays where the user can see it
    throw;
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) unwritable(std::strerror(errno != 0 ? errno : EIO));
  return rc;
}

}  // namespace ringtrain::commands
