// Owns collecting HDF5's error stack into the text that H5_CHECK's errors carry.
#include "io/h5_check.h"

#include "common/error.h"

namespace ringtrain::io::detail {

void silence_hdf5_auto_print() noexcept {
  thread_local bool silenced = false;
  if (silenced) return;
  // Nothing useful can be done if this fails: the worst case is HDF5 also printing what we throw.
  if (H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0) silenced = true;
}

namespace {
herr_t append_error_entry(unsigned /*position*/, const H5E_error2_t* entry, void* text_ptr) {
  auto& text = *static_cast<std::string*>(text_ptr);
  if (!text.empty()) text += "; ";
  text += entry->func_name != nullptr ? entry->func_name : "?";
  text += "(): ";
  text += entry->desc != nullptr ? entry->desc : "(no description)";
  return 0;
}
}  // namespace

std::string take_hdf5_error_stack() {
  std::string text;
  // Downward: from the API call to the innermost cause, which is usually the entry a user needs
  // ("truncated file: eof = ..."), so it ends the line. These calls cannot go through H5_CHECK: a failure
  // here would recurse into the very error being reported.
  if (H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, append_error_entry, &text) < 0) text += " (HDF5 error stack unreadable)";
  H5Eclear2(H5E_DEFAULT);  // a failure to clear only leaves stale entries; the next failure still reports
  if (text.empty()) text = "no details on the HDF5 error stack";
  return text;
}

void throw_hdf5_error(const char* call, const char* file, int line) {
  throw_library_error("HDF5", call, file, line, take_hdf5_error_stack());
}

}  // namespace ringtrain::io::detail
