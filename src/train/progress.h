// Owns rank 0's progress output: a live line on a terminal, plain lines every few seconds in a batch log,
// with loss, throughput and ETA.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace ringtrain::train {

class Progress {
 public:
  Progress(double every_s, int64_t total_steps, int epochs, bool enabled);
  // Called after every optimizer step; prints (and returns true) when `every_s` has passed since the last line.
  bool step(int epoch, int64_t step_in_epoch, int64_t steps_per_epoch, int64_t global_step, double loss,
            double lr, double samples_per_s, double eta_s);
  void finish_line();  // ends the live line before other output
  static std::string duration(double seconds);  // "1h02m", "3m12s", "45s"

 private:
  double every_s_, last_ = 0;
  int64_t total_steps_;
  int epochs_;
  bool enabled_, tty_;
  bool live_line_open_ = false;
};

}  // namespace ringtrain::train
