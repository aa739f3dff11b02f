// Owns the stall check: a thread per rank that ends the whole job when a collective of the training loop has
// not completed within run.collective_timeout_s, instead of letting it hang until the reservation runs out.
// With MPI_THREAD_MULTIPLE every rank also sends rank 0 a heartbeat (its step, its place among the steps, and whether
// it waits in a collective) on a communicator of its own, so rank 0 can name the ranks that have not arrived: a stopped
// (SIGSTOP) or hung rank sends nothing, a rank stuck in I/O says it is alive but not yet at the step.
// It also watches the gradient reducer's calls on the main thread (a bucket's launch, a progress poll), which return
// at once while communication is healthy: Open MPI 4.1's TCP transport can deadlock inside one when a peer dies
// mid-transfer.
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/peer_report.h"

namespace ringtrain::dist {

// What the watchdog's messages name: the setting that holds its timeout, and what of the command's work survives
// the end of the job. Training's by default.
struct WatchedCommand {
  const char* timeout_setting = "run.collective_timeout_s";
  const char* what_survives = "the last checkpoint in run.dir is intact, continue with --resume";
  const char* long_work = "steps";  // "raise <timeout_setting> if <long_work> legitimately take this long"
  bool has_steps = true;            // waits are named by their place among the training steps
};

class Watchdog {
 public:
  // `exit_code` is what the job ends with on a stall. A timeout <= 0 sets no limit on a wait (no heartbeats either);
  // SIGTERM's grace and the check of calls that must return at once still run.
  Watchdog(MPI_Comm world, double timeout_s, int exit_code, WatchedCommand command = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Main thread, around each blocking collective. `what` must outlive the call (a string literal).
  // `sigterm_ends_wait` false: a wait on another rank's long local work (rank 0 writing a checkpoint), which the
  // grace after SIGTERM must not end; run.collective_timeout_s still does.
  void enter(const char* what, int64_t step, bool sigterm_ends_wait = true);
  void leave();
  bool waiting() const { return waiting_; }  // inside a collective's wait (enter), not in LocalWork
  int64_t step() const { return step_; }     // the step begun or the last wait entered; -1 before either
  // Main thread, as a training step begins: the step that the waits inside its passes (synchronised batch norm's,
  // through CollectiveWait) are entered with and that heartbeats report, before the step's own watched waits enter.
  // Waits are named by the place among the steps (dist/peer_report.h's at_step): inside this step until end_step,
  // after it from then on (the checksum, checkpoint and evaluation between steps).
  void begin_step(int64_t step) {
    in_step_ = true;
    begun_ = step;
    step_ = step;
  }
  void end_step() { in_step_ = false; }
  // Main thread, before a resumed run's first step: the waits until then are after the steps the checkpoint holds.
  void resume_after(int64_t steps_done) {
    in_step_ = false;
    begun_ = steps_done - 1;
  }
  // Normal end of the job on every rank: stops heartbeats and drains those in flight (collective; a rank that never
  // arrives ends the job after run.collective_timeout_s, as in any other wait).
  void finish();
  // `terminating` says whether the process has been told to terminate (SIGTERM). A scheduler sends that to
  // the surviving ranks when one rank died (srun --kill-on-bad-exit) and only SIGKILLs them after its KillWait
  // (Slurm's default: 30 s); a collective still waiting kTermGraceS after it will never complete, so the job
  // ends then instead of at the SIGKILL. Must be async-signal-safe to read (a flag).
  void end_stuck_collective_on_termination(bool (*terminating)() noexcept) { terminating_ = terminating; }
  // Runs once, on the watchdog's thread, when this rank's collective has waited run.collective_timeout_s (or
  // the grace after SIGTERM), before any rank ends the job: what a user needs to see the hang (the trace of
  // the last steps). Set before the training loop; must be safe to call while the main thread is blocked in
  // MPI. Best effort: a rank killed by another's MPI_Abort first may not get to it.
  // Cleared (an empty function) by whoever set it, before what it captures goes.
  void on_timeout(std::function<void()> last_words) {
    const std::lock_guard<std::mutex> hold(last_words_mutex_);
    last_words_ = std::move(last_words);
  }

  // Main thread, around a call that must return at once (a reducer's non-blocking launch or poll). One that has not
  // returned kTermGraceS after SIGTERM, or run.collective_timeout_s in any case, means the communication library is
  // stuck inside it: the rank then ends without MPI. Not a wait in a collective: heartbeats still say this rank is computing.
  void enter_call(const char* what);
  void leave_call() { call_since_ = 0; }

  // What a Scope watches: a blocking collective (enter/leave) or a call that must return at once (enter_call).
  enum class Watch { collective, call };
  class Scope {
   public:
    Scope(Watchdog* dog, const char* what, int64_t step, Watch watch = Watch::collective,
          bool sigterm_ends_wait = true)
        : dog_(dog), watch_(watch) {
      if (!dog_) return;
      if (watch_ == Watch::collective)
        dog_->enter(what, step, sigterm_ends_wait);
      else
        dog_->enter_call(what);
    }
    ~Scope() {
      if (!dog_) return;
      if (watch_ == Watch::collective)
        dog_->leave();
      else
        dog_->leave_call();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
   private:
    Watchdog* dog_;
    Watch watch_;
  };

  // Inside a collective Scope, around this rank's own work (an evaluation's forward passes, rank 0 writing a
  // checkpoint): not a wait on the other ranks, so neither run.collective_timeout_s nor the grace after SIGTERM runs
  // through it, and the Scope's wait starts again after it. A preempted job whose evaluation takes longer than the
  // grace then reaches its checkpoint instead of being ended as stuck.
  class LocalWork {
   public:
    explicit LocalWork(Watchdog* dog) : dog_(dog && dog->waiting_ ? dog : nullptr) {
      if (dog_) dog_->waiting_ = false;
    }
    ~LocalWork() {
      if (dog_) dog_->enter(dog_->what_, dog_->step_, dog_->sigterm_ends_wait_);
    }
    LocalWork(const LocalWork&) = delete;
    LocalWork& operator=(const LocalWork&) = delete;

   private:
    Watchdog* dog_;
  };

 private:
  void loop();
  void guard();
  void stop_thread();  // the watchdog's thread, joined while the guard still watches it
  void check_call(double now);
  void heartbeat(double now);
  void drain(double now);
  [[noreturn]] void fire(double now, double waited);
  [[noreturn]] void fire_terminated(double waited);
  [[noreturn]] void fire_stuck_call(double waited, bool after_sigterm);
  [[noreturn]] void fire_at_finish(double waited);
  void say_last_words() noexcept;
  void tick(double now);
  StepPlace place() const { return {begun_.load(), in_step_.load()}; }
  std::string where() const;  // " at step 3", or "" where the command has no steps

  std::string missing_ranks(double now) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, exit_code_;
  WatchedCommand command_;
  double timeout_s_;
  bool heartbeats_ = false;
  std::atomic<int64_t> step_{-1};
  std::atomic<int64_t> begun_{-1};  // the last training step begun
  std::atomic<bool> in_step_{false};  // begun_ has not ended (end_step)
  std::atomic<double> entered_at_{0};
  std::atomic<bool> waiting_{false}, stop_{false};
  std::atomic<bool> guard_stop_{false};  // set once the watchdog's thread has been joined
  std::atomic<double> joining_since_{0};  // > 0: the watchdog's thread is being joined (stop_thread) since then
  std::atomic<bool> sigterm_ends_wait_{true};  // the grace after SIGTERM ends the current wait (enter)
  std::atomic<double> last_tick_s_{0};  // the watchdog thread's last tick, read by the guard
  std::atomic<const char*> what_{""};
  std::atomic<const char*> call_what_{""};
  std::atomic<double> call_since_{0};  // 0: the main thread is not inside a watched call
  std::atomic<bool (*)() noexcept> terminating_{nullptr};
  std::mutex last_words_mutex_;
  std::function<void()> last_words_;  // run at most once, by the watchdog's thread
  bool said_last_words_ = false;      // watchdog thread only
  double terminating_since_ = -1;  // watchdog thread only
  std::vector<PeerBeat> peers_;  // rank 0 only; touched only by the watchdog thread
  int64_t sent_step_ = -2;
  StepPlace sent_place_{-2, false};
  bool sent_waiting_ = false;
  double sent_at_ = 0;
  int64_t send_buffer_[4] = {0, 0, 0, 0};  // step, waiting, place.begun, place.in_step
  MPI_Request send_ = MPI_REQUEST_NULL;
  std::thread thread_, guard_;
};

}  // namespace ringtrain::dist
