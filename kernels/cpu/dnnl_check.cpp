// Owns turning a failed oneDNN call into ringtrain's library error, with oneDNN's status and message.
#include "kernels/cpu/dnnl_check.h"

#include <string>

#include "common/error.h"

namespace ringtrain::kernels::cpu {
namespace {

const char* status_name(dnnl_status_t status) {
  switch (status) {
    case dnnl_out_of_memory: return "dnnl_out_of_memory";
    case dnnl_invalid_arguments: return "dnnl_invalid_arguments";
    case dnnl_unimplemented: return "dnnl_unimplemented";
    case dnnl_last_impl_reached: return "dnnl_last_impl_reached";
    case dnnl_runtime_error: return "dnnl_runtime_error";
    case dnnl_not_required: return "dnnl_not_required";
    default: return "dnnl status";
  }
}

}  // namespace

void dnnl_failed(const dnnl::error& e, const char* call, const char* file, int line) {
  throw_library_error("oneDNN", call, file, line,
                      std::string(status_name(e.status)) + " (" + std::to_string(static_cast<int>(e.status)) +
                          "): " + e.what());
}

}  // namespace ringtrain::kernels::cpu
