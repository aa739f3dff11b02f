// Names the ranks a timed-out collective waits for; see peer_report.h.
#include "dist/peer_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace ringtrain::dist {

std::string at_step(int64_t step, int64_t begun) {
  if (step < 0) return "before any training step";
  return step > begun ? fmt::format("after step {}", step) : fmt::format("at step {}", step + 1);
}

// Four missed beats: a watchdog thread ticks every tenth of a second, so even a loaded node sends one in that time.
double silent_after_s(double heartbeat_every_s, double timeout_s) {
  return std::min(4 * heartbeat_every_s, timeout_s);
}

namespace {

std::string what_it_last_said(const PeerBeat& p, int64_t step, double now, double silent_after) {
  if (p.heard_at == 0) return "never heard from";
  const double ago = now - p.heard_at;
  const char* doing = p.waiting ? "waiting in a collective" : "computing or reading";
  if (ago > silent_after && p.step == step && p.waiting)
    return fmt::format("silent for {:.1f} s (stopped, hung or unreachable); it had reached this wait", ago);
  if (ago > silent_after)
    return fmt::format("silent for {:.1f} s (stopped, hung or unreachable), last {} ({})", ago, at_step(p.step, p.begun),
                       doing);
  return fmt::format("last heard {:.1f} s ago, {} ({})", ago, at_step(p.step, p.begun), doing);
}

}  // namespace

std::string describe_missing_ranks(const std::vector<PeerBeat>& peers, int64_t step, double now,
                                   double silent_after) {
  std::string missing, detail;
  int count = 0;
  for (size_t r = 1; r < peers.size(); ++r) {
    const PeerBeat& p = peers[r];
    const bool arrived = p.heard_at > 0 && p.step == step && p.waiting && now - p.heard_at <= silent_after;
    if (arrived) continue;
    ++count;
    missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
    detail += fmt::format("\n    rank {}: {}", r, what_it_last_said(p, step, now, silent_after));
  }
  if (count == 0) return "every rank reports waiting in it: MPI or the network is stalled";
  return fmt::format("rank{} {} ha{} not arrived{}", count == 1 ? "" : "s", missing, count == 1 ? "s" : "ve",
                     detail);
}

}  // namespace ringtrain::dist
