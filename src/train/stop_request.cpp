// Owns the async-signal-safe part of preemption: see stop_request.h.
#include "train/stop_request.h"

#include <csignal>

namespace ringtrain::train {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) { g_signal = sig; }

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // RESTART: a signal must not turn a read or an MPI wait into an error. RESETHAND: a second signal takes the
  // default action, so an impatient user or scheduler still wins.
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

bool stop_requested() noexcept { return g_signal != 0; }
bool termination_requested() noexcept { return g_signal == SIGTERM; }
int stop_signal() noexcept { return g_signal; }
const char* stop_signal_name() noexcept {
  switch (g_signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "none";
  }
}

}  // namespace ringtrain::train
