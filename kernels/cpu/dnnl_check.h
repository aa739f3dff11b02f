// Owns the one check for oneDNN calls: DNNL_CALL(expr) evaluates a call of oneDNN's C++ API and turns the
// dnnl::error it may throw into ringtrain::Error (ExitCode::library) naming the call as written, file:line,
// this process and oneDNN's own status and message. The value of the call, if any, is returned.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

namespace ringtrain::kernels::cpu {

[[noreturn]] void dnnl_failed(const dnnl::error& e, const char* call, const char* file, int line);

template <class Call>
auto dnnl_call(Call&& call, const char* text, const char* file, int line) {
  try {
    return call();
  } catch (const dnnl::error& e) {
    dnnl_failed(e, text, file, line);
  }
}

// For oneDNN's functions that answer a status instead of throwing (dnnl::sgemm): the status as the API's error.
inline void throw_unless_success(dnnl::status status, const char* what) {
  if (status != dnnl::status::success) throw dnnl::error(static_cast<dnnl_status_t>(status), what);
}

}  // namespace ringtrain::kernels::cpu

#define DNNL_CALL(expr) ::ringtrain::kernels::cpu::dnnl_call([&] { return expr; }, #expr, __FILE__, __LINE__)
