// Owns the preemption signals: SIGTERM (scancel, a node going down) and SIGUSR1 (Slurm's
// `--signal=USR1@120` warning before the time limit) only set a flag here; the training loop agrees on it
// across ranks at a step boundary, writes a checkpoint and exits with ExitCode::preempted (75), so a requeued
// job resumes. A second SIGTERM while stopping ends the process at once (the default action).
#pragma once

namespace ringtrain::train {

void install_stop_handlers();
bool stop_requested() noexcept;
bool termination_requested() noexcept;  // SIGTERM in particular: the scheduler will SIGKILL soon
int stop_signal() noexcept;  // the signal that asked, 0 if none
const char* stop_signal_name() noexcept;

}  // namespace ringtrain::train
