// Owns H5_CHECK: turns a failed HDF5 C call into ringtrain's library error carrying HDF5's own error stack,
// instead of HDF5 printing that stack to stderr and returning a negative id that is easy to ignore.
#pragma once
#include <hdf5.h>

#include <string>

namespace ringtrain::io::detail {

// HDF5's automatic error printing is per thread in thread-safe builds (Debian's is one), so each thread
// turns it off before its first call; H5_CHECK does this itself so no caller and no new thread can forget.
void silence_hdf5_auto_print() noexcept;

// The current thread's HDF5 error stack as one line ("H5Fopen(): unable to open file; H5F__super_read():
// truncated file ..."), innermost cause last; clears the stack.
std::string take_hdf5_error_stack();

[[noreturn]] void throw_hdf5_error(const char* call, const char* file, int line);

template <typename Result>
Result checked_h5_result(Result result, const char* call, const char* file, int line) {
  if (result < 0) [[unlikely]]
    throw_hdf5_error(call, file, line);
  return result;
}

}  // namespace ringtrain::io::detail

// Evaluates an HDF5 call returning hid_t/herr_t/htri_t/ssize_t/int and yields its value; a negative value
// throws ringtrain::Error(ExitCode::library) naming the call, the source line and HDF5's error stack.
#define H5_CHECK(call)                                                                                    \
  (::ringtrain::io::detail::silence_hdf5_auto_print(),                                                    \
   ::ringtrain::io::detail::checked_h5_result((call), #call, __FILE__, __LINE__))
