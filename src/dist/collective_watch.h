// Owns which watchdog times the blocking collectives made through dist::World and dist::agree_on_errors: start-up,
// the end of a run and the evaluate command, the waits outside the training loop's own watched ones. A rank that
// stalls there (SIGSTOP, hung I/O) then ends the job after run.collective_timeout_s instead of holding every other
// rank until the allocation ends. Per thread: only the thread that attached a watchdog (the main thread) is timed.
#pragma once
#include "dist/watchdog.h"

namespace ringtrain::dist {

// Attaches `dog` to this thread's collectives for its lifetime.
class WatchedCollectives {
 public:
  explicit WatchedCollectives(Watchdog& dog);
  ~WatchedCollectives();
  WatchedCollectives(const WatchedCollectives&) = delete;
  WatchedCollectives& operator=(const WatchedCollectives&) = delete;

 private:
  Watchdog* previous_;
};

// Around one blocking collective: a wait on the other ranks, timed by the attached watchdog unless it already times
// an enclosing wait (a training-loop Scope). The grace after SIGTERM does not end it unless `sigterm_ends_wait`: a
// wait at start-up may be on another rank's own work (rank 0 reading a checkpoint), and a stop signal then is taken
// at the first step; a collective inside a step (synchronised batch norm's) is as the step's gradient all-reduce.
class CollectiveWait {
 public:
  // `what` must outlive the call (a string literal).
  explicit CollectiveWait(const char* what, bool sigterm_ends_wait = false);
  ~CollectiveWait();
  CollectiveWait(const CollectiveWait&) = delete;
  CollectiveWait& operator=(const CollectiveWait&) = delete;

 private:
  Watchdog* dog_ = nullptr;
};

}  // namespace ringtrain::dist
