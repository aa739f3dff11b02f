// Owns the phase scope: clock, trace span and NVTX range.
#include "obs/phase.h"

#include "obs/trace.h"
#include "util/clock.h"
#ifdef RINGTRAIN_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace ringtrain::obs {

Phase::Phase(Trace* trace, const char* name, double* total)
    : trace_(trace), name_(name), total_(total), begin_s_(util::now_s()) {
#ifdef RINGTRAIN_HAVE_NVTX
  nvtxRangePushA(name_);  // a no-op unless a tool (nsys) injected itself
#endif
}

double Phase::end() {
  if (!open_) return 0;
  open_ = false;
  const double end_s = util::now_s();
#ifdef RINGTRAIN_HAVE_NVTX
  nvtxRangePop();
#endif
  if (total_) *total_ += end_s - begin_s_;
  if (trace_) trace_->add(name_, begin_s_, end_s);
  return end_s - begin_s_;
}

}  // namespace ringtrain::obs
