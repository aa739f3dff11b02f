// Owns the stall check's thread; see watchdog.h.
#include "dist/watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <limits>
#include <memory>

#include "common/process_label.h"
#include "dist/end_job.h"
#include "dist/mpi_check.h"
#include "util/clock.h"

namespace ringtrain::dist {
namespace {

constexpr int kHeartbeatTag = 7001;
constexpr double kHeartbeatEveryS = 0.5;
constexpr auto kTick = std::chrono::milliseconds(100);
// Long enough for a healthy step to finish its collective and checkpoint after SIGTERM, short enough that a
// job with a dead rank ends well inside the 15 s our users expect (and before Slurm's default KillWait).
constexpr double kTermGraceS = 5.0;
// What a rank may spend writing its last words (the trace) before the job is ended anyway.
constexpr double kLastWordsS = 2.0;
// The watchdog's own thread ticks every kTick unless an MPI call of its own (a heartbeat) has not returned: MPI
// itself is then wedged (seen under srun after a peer was killed: Open MPI's error path waiting on PMIx), and
// the MPI-free guard ends the rank once it has been stuck this long past SIGTERM's grace or the timeout.
constexpr double kStuckS = 5.0;

}  // namespace

// A timeout of 0 is none: no wait ends by its length, and no heartbeats are sent (nothing would name missing ranks),
// but the thread keeps SIGTERM's grace and the check of calls that must return at once, so that under srun the
// survivors of a dead rank still end in seconds instead of at the scheduler's SIGKILL.
Watchdog::Watchdog(MPI_Comm world, double timeout_s, int exit_code, WatchedCommand command)
    : exit_code_(exit_code), command_(command), timeout_s_(timeout_s > 0 ? timeout_s : std::numeric_limits<double>::infinity()) {
  int provided = 0;
  MPI_CHECK(MPI_Query_thread(&provided));
  MPI_CHECK(MPI_Comm_rank(world, &rank_));
  MPI_CHECK(MPI_Comm_size(world, &size_));
  // Heartbeats call MPI from this thread, which only MPI_THREAD_MULTIPLE allows; without it the watchdog
  // still ends a stalled job, it just cannot say which rank held it up.
  heartbeats_ = timeout_s > 0 && provided == MPI_THREAD_MULTIPLE && size_ > 1;
  if (heartbeats_) MPI_CHECK(MPI_Comm_dup(world, &comm_));
  if (rank_ == 0) peers_.resize(static_cast<size_t>(size_));
  last_tick_s_ = util::now_s();
  thread_ = std::thread([this] { loop(); });
  guard_ = std::thread([this] { guard(); });
}

// The guard outlives the watchdog's thread: a rank unwinding an error while that thread is stuck inside MPI would
// otherwise wait on its join for ever, and never reach the abort that ends the other ranks.
Watchdog::~Watchdog() {
  stop_thread();
  guard_stop_ = true;
  if (guard_.joinable()) guard_.join();
}

void Watchdog::stop_thread() {
  stop_ = true;
  if (!thread_.joinable()) return;
  joining_since_ = util::now_s();
  thread_.join();
  joining_since_ = 0;
}

// MPI-free: ends the rank when the watchdog's thread is stuck inside MPI and cannot do it itself.
void Watchdog::guard() {
  double terminating_since = -1;
  while (!guard_stop_) {
    std::this_thread::sleep_for(kTick);
    const double now = util::now_s(), stuck = now - last_tick_s_.load();
    if (const double joining = joining_since_.load(); joining > 0 && now - joining > kStuckS && stuck > kStuckS) {
      std::fprintf(stderr,
                   "ringtrain: stall (exit %d) [%s]:\n  this rank is ending, but the watchdog's own MPI calls have "
                   "not returned for %.1f s: MPI is stuck; ending this rank without MPI\n",
                   exit_code_, process_label().c_str(), stuck);
      end_job(exit_code_, /*use_mpi=*/false);
    }
    if (stop_) continue;  // the waits are over: only the join is watched
    if (auto* terminating = terminating_.load(); terminating && terminating_since < 0 && terminating())
      terminating_since = now;
    const bool past_sigterm = (!waiting_ || sigterm_ends_wait_) && terminating_since >= 0 &&
                              now - terminating_since > kTermGraceS + kStuckS;
    const bool past_timeout = waiting_ && now - entered_at_.load() > timeout_s_ + kStuckS;
    if (stuck < kStuckS || !(past_sigterm || past_timeout)) continue;
    std::fprintf(stderr,
                 "ringtrain: %s (exit %d) [%s]:\n  %s while '%s'%s was waiting, and MPI itself is stuck "
                 "(the watchdog's own MPI calls have not returned for %.1f s): ending this rank without MPI\n",
                 past_sigterm ? "terminated" : "stall", exit_code_, process_label().c_str(),
                 past_sigterm ? "SIGTERM arrived" : "the collective timed out", what_.load(),
                 where().c_str(), stuck);
    end_job(exit_code_, /*use_mpi=*/false);
  }
}

void Watchdog::enter(const char* what, int64_t step, bool sigterm_ends_wait) {
  what_ = what;
  step_ = step;
  sigterm_ends_wait_ = sigterm_ends_wait;
  entered_at_ = util::now_s();
  waiting_ = true;
}

void Watchdog::leave() { waiting_ = false; }

void Watchdog::enter_call(const char* what) {
  call_what_ = what;
  call_since_ = util::now_s();
}

void Watchdog::finish() {
  stop_thread();
  if (!heartbeats_) return;
  // Every rank's last heartbeat must be received before MPI_Finalize: complete our send, meet, then rank 0
  // takes whatever is still queued for it. Both are polled against the timeout, as the thread that timed waits has
  // stopped (a send can wait on a receiver that stopped answering).
  const double since = util::now_s();
  const auto complete = [&](MPI_Request& request) {
    for (int done = 0;;) {
      MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return;
      if (const double waited = util::now_s() - since; waited > timeout_s_) fire_at_finish(waited);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  if (send_ != MPI_REQUEST_NULL) complete(send_);
  MPI_Request met = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm_, &met));
  complete(met);
  if (rank_ == 0) drain(util::now_s());
  MPI_CHECK(MPI_Comm_free(&comm_));
  heartbeats_ = false;
}

void Watchdog::loop() {
  while (!stop_) {
    std::this_thread::sleep_for(kTick);
    const double now = util::now_s();
    tick(now);
    if (auto* terminating = terminating_.load(); terminating && terminating_since_ < 0 && terminating())
      terminating_since_ = now;
    check_call(now);
    if (!waiting_) continue;
    const double waited = now - entered_at_.load();
    if (sigterm_ends_wait_ && terminating_since_ >= 0 &&
        now - std::max(terminating_since_, entered_at_.load()) > kTermGraceS) {
      say_last_words();
      fire_terminated(waited);
    }
    // Every rank says its last words at the timeout itself; the other ranks only fire later (below), so
    // theirs are written while rank 0 is still deciding to end the job.
    const double entered = entered_at_.load();
    if (waited > timeout_s_) say_last_words();
    // The wait may have ended while the last words were written (they take up to kLastWordsS).
    if (!waiting_ || entered_at_.load() != entered) continue;
    // Rank 0 knows who is missing, so it speaks first; the others end the job themselves only if rank 0
    // could not (it may be the stalled one).
    const double limit = rank_ == 0 ? timeout_s_ : timeout_s_ + std::max(5.0, 0.1 * timeout_s_);
    if (waited <= limit) continue;
    // Heartbeats went on arriving while the last words were written: the report is of the moment it is made.
    const double at = util::now_s();
    fire(at, at - entered);
  }
}

// What every tick of the watchdog's thread does, also while it waits for the last words: a rank whose heartbeats
// stopped while its trace is written would be named silent, as a stopped one is.
void Watchdog::tick(double now) {
  last_tick_s_ = now;
  if (!heartbeats_) return;
  if (rank_ == 0)
    drain(now);
  else
    heartbeat(now);
}

void Watchdog::check_call(double now) {
  const double since = call_since_;
  if (since <= 0) return;
  const bool after_sigterm = terminating_since_ >= 0 && now - std::max(terminating_since_, since) > kTermGraceS;
  if (!after_sigterm && now - since <= timeout_s_) return;
  say_last_words();
  fire_stuck_call(now - since, after_sigterm);
}

void Watchdog::heartbeat(double now) {
  const int64_t step = step_;
  const StepPlace where = place();
  const bool waiting = waiting_;
  if (step == sent_step_ && where == sent_place_ && waiting == sent_waiting_ && now - sent_at_ < kHeartbeatEveryS)
    return;
  if (send_ != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_CHECK(MPI_Test(&send_, &done, MPI_STATUS_IGNORE));
    if (!done) return;  // rank 0 is behind; the next tick tries again
  }
  send_buffer_[0] = step;
  send_buffer_[1] = waiting ? 1 : 0;
  send_buffer_[2] = where.begun;
  send_buffer_[3] = where.in_step ? 1 : 0;
  MPI_CHECK(MPI_Isend(send_buffer_, 4, MPI_INT64_T, 0, kHeartbeatTag, comm_, &send_));
  sent_step_ = step, sent_place_ = where, sent_waiting_ = waiting, sent_at_ = now;
}

void Watchdog::drain(double now) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kHeartbeatTag, comm_, &flag, &status));
    if (!flag) return;
    int64_t beat[4];
    MPI_CHECK(MPI_Recv(beat, 4, MPI_INT64_T, status.MPI_SOURCE, kHeartbeatTag, comm_, MPI_STATUS_IGNORE));
    auto& peer = peers_[static_cast<size_t>(status.MPI_SOURCE)];
    peer.step = beat[0], peer.waiting = beat[1] != 0, peer.place = {beat[2], beat[3] != 0}, peer.heard_at = now;
  }
}

std::string Watchdog::where() const { return command_.has_steps ? fmt::format(" {}", at_step(place())) : ""; }

std::string Watchdog::missing_ranks(double now) const {
  return describe_missing_ranks(peers_, step_, place(), now, silent_after_s(kHeartbeatEveryS, timeout_s_),
                                command_.has_steps);
}

// On a helper thread, waited for at most kLastWordsS: the hang being reported may be the file system the last
// words write to (a stalled parallel file system under run.dir), and the watchdog itself must never hang.
void Watchdog::say_last_words() noexcept {
  if (said_last_words_) return;
  std::function<void()> last_words;
  {
    const std::lock_guard<std::mutex> hold(last_words_mutex_);
    last_words = last_words_;
  }
  if (!last_words) return;
  said_last_words_ = true;
  try {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::thread([words = std::move(last_words), done] {
      try {
        words();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ringtrain: [%s] before ending the stalled job: %s\n", process_label().c_str(),
                     e.what());
      } catch (...) {
      }
      done->set_value();
    }).detach();
    const double until = util::now_s() + kLastWordsS;
    while (finished.wait_for(kTick) != std::future_status::ready) {
      const double now = util::now_s();
      if (now > until) {
        std::fprintf(stderr, "ringtrain: [%s] the trace was not written within %.0f s (is run.dir's file system "
                     "stalled too?); ending the job without it\n", process_label().c_str(), kLastWordsS);
        break;
      }
      tick(now);
    }
  } catch (...) {  // no thread to be had: end the job without the last words
  }
}

void Watchdog::fire(double now, double waited) {
  std::string who;
  if (rank_ == 0)
    who = heartbeats_ ? missing_ranks(now) : "(which ranks are missing is unknown: MPI lacks MPI_THREAD_MULTIPLE)";
  else
    who = "rank 0, which names the missing ranks, did not end the job, so this rank does";
  std::fprintf(stderr,
               "ringtrain: stall (exit %d) [%s]:\n  '%s'%s has not completed after %.1f s "
               "(%s = %g); %s\n  ending the job; raise %s if %s legitimately take this long; %s\n",
               exit_code_, process_label().c_str(), what_.load(), where().c_str(), waited,
               command_.timeout_setting, timeout_s_, who.c_str(), command_.timeout_setting, command_.long_work,
               command_.what_survives);
  // Without MPI_THREAD_MULTIPLE: a rank that exits makes mpirun/srun end the job.
  end_job(exit_code_, heartbeats_);
}

void Watchdog::fire_terminated(double waited) {
  std::fprintf(stderr,
               "ringtrain: terminated (exit %d) [%s]:\n  SIGTERM arrived while '%s'%s was waiting, and it "
               "has not completed %.1f s later (%.1f s in all): another rank has most likely died, so it never "
               "will\n  ending the job now instead of waiting for the scheduler's SIGKILL; %s\n",
               exit_code_, process_label().c_str(), what_.load(), where().c_str(), kTermGraceS, waited,
               command_.what_survives);
  end_job(exit_code_, heartbeats_);
}

// The communication library (MPI, or NCCL under the CUDA reducer) is wedged inside this rank's own call, so neither
// MPI_Abort nor a collective can be trusted to return: the rank ends by itself, and the launcher (mpirun, or srun
// --kill-on-bad-exit) ends the others.
void Watchdog::fire_stuck_call(double waited, bool after_sigterm) {
  std::fprintf(stderr,
               "ringtrain: %s (exit %d) [%s]:\n  '%s'%s, a call that returns at once while communication is "
               "healthy, has not returned after %.1f s%s: the communication library is stuck inside it (another rank "
               "has most likely died)\n"
               "  ending this rank without MPI; %s\n",
               after_sigterm ? "terminated" : "stall", exit_code_, process_label().c_str(), call_what_.load(),
               where().c_str(), waited,
               after_sigterm ? ", SIGTERM having arrived meanwhile" : "", command_.what_survives);
  end_job(exit_code_, /*use_mpi=*/false);
}

// The thread that would name the missing ranks has stopped, so this says only that the end of the run was not met.
void Watchdog::fire_at_finish(double waited) {
  std::fprintf(stderr,
               "ringtrain: stall (exit %d) [%s]:\n  the end of the run has not been met by every rank after %.1f s "
               "(%s = %g): another rank is stalled or has died after its own work\n  ending the job; %s\n",
               exit_code_, process_label().c_str(), waited, command_.timeout_setting, timeout_s_,
               command_.what_survives);
  end_job(exit_code_, /*use_mpi=*/true);
}

}  // namespace ringtrain::dist
