// Owns timing one phase of a step: a scope that adds its seconds to a total (the epoch record), records a
// span in the trace when one is kept, and opens an NVTX range of the same name when built with CUDA, so
// Nsight Systems shows the same phases as the trace.
#pragma once

namespace ringtrain::obs {

class Trace;

class Phase {
 public:
  // `name` must outlive the scope (a string literal). trace and total may be null.
  Phase(Trace* trace, const char* name, double* total = nullptr);
  ~Phase() { end(); }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;
  double end();  // ends the phase now (once); returns its seconds

 private:
  Trace* trace_;
  const char* name_;
  double* total_;
  double begin_s_;
  bool open_ = true;
};

// Runs `work` inside a phase and returns its result: `auto x = obs::timed(trace, "data_wait", [&] { ... });`
template <class Work>
auto timed(Trace* trace, const char* name, Work&& work) {
  Phase phase(trace, name);
  return work();
}

}  // namespace ringtrain::obs
