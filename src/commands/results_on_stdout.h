// Owns the ending of every command whose results go to stdout (predict's JSON lines, evaluate's table, inspect's
// report, keys, --version, the summaries of prepare and export): stdout is flushed and checked, so results that
// could not be written (a full disk, a file system gone) are an error with exit 3, as for any output that cannot
// be written, never lost behind exit 0, and never an internal error.
#pragma once
#include <functional>

namespace ringtrain::commands {

// Runs `command`, then flushes stdout. A failed write to stdout, met while printing or at the flush, becomes
// JobFileError (exit 3) naming the system's reason; on any other error what was printed is flushed before it goes on.
int with_results_on_stdout(const std::function<int()>& command);

}  // namespace ringtrain::commands
