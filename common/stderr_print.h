// Owns writing the process's messages to stderr where a failed write must not throw: fmt::print throws when stderr
// cannot be written (a full disk under a job's output file, a closed stream), and an exception from an error's own
// report would skip the MPI_Abort that ends the other ranks, or end a healthy run over a note.
#pragma once
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <utility>

namespace ringtrain {

// Formats, writes and flushes; a write that fails is dropped (there is nowhere left to say so), and so is a message
// there is no memory to format.
template <typename... Args>
void stderr_print(fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    const std::string text = fmt::format(format, std::forward<Args>(args)...);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  } catch (...) {
  }
}

}  // namespace ringtrain
