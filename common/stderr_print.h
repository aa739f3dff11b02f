// Owns writing the process's messages to stderr where a failed write must not throw: fmt::print throws when stderr
// cannot be written (a full disk under a job's output file, a closed stream), and an exception from an error's own
// report would skip the MPI_Abort that ends the other ranks, or end a healthy run over a note.
#pragma once
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <utility>

namespace ringtrain {

// Writes and flushes; a write that fails is dropped (there is nowhere left to say so).
inline void stderr_write(const std::string& text) noexcept {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

template <typename... Args>
void stderr_print(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    stderr_write(fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {  // no memory to format the message in: nothing more can be said
  }
}

}  // namespace ringtrain
