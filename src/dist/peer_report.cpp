// Names the ranks a timed-out collective waits for; see peer_report.h.
#include "dist/peer_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace ringtrain::dist {

std::string at_step(const StepPlace& place) {
  if (place.in_step) return fmt::format("at step {}", place.begun + 1);
  if (place.begun < 0) return "before any training step";
  return fmt::format("after step {}", place.begun + 1);
}

// Four missed beats: a watchdog thread ticks every tenth of a second, so even a loaded node sends one in that time.
double silent_after_s(double heartbeat_every_s, double timeout_s) {
  return std::min(4 * heartbeat_every_s, timeout_s);
}

namespace {

std::string what_it_last_said(const PeerBeat& p, bool at_this_wait, double now, double silent_after, bool has_steps) {
  if (p.heard_at == 0) return "never heard from";
  const double ago = now - p.heard_at;
  const char* doing = p.waiting ? "waiting in a collective" : "computing or reading";
  const std::string where = has_steps ? fmt::format("{} ({})", at_step(p.place), doing) : doing;
  if (ago > silent_after && at_this_wait)
    return fmt::format("silent for {:.1f} s (stopped, hung or unreachable); it had reached this wait", ago);
  if (ago > silent_after) return fmt::format("silent for {:.1f} s (stopped, hung or unreachable), last {}", ago, where);
  return fmt::format("last heard {:.1f} s ago, {}", ago, where);
}

}  // namespace

// The silent ranks (never heard from, or not for silent_after) come first: they are the likelier cause, and the
// launch scripts (slurm/train.sbatch, scripts/elastic_mpirun.sh) blame the first rank named.
std::string describe_missing_ranks(const std::vector<PeerBeat>& peers, int64_t step, const StepPlace& place,
                                   double now, double silent_after, bool has_steps) {
  std::string missing, detail;
  int count = 0;
  for (const bool silent_ones : {true, false})
    for (size_t r = 1; r < peers.size(); ++r) {
      const PeerBeat& p = peers[r];
      const bool silent = p.heard_at == 0 || now - p.heard_at > silent_after;
      const bool at_this_wait = p.heard_at > 0 && p.step == step && p.place == place && p.waiting;
      if (silent != silent_ones || (at_this_wait && !silent)) continue;
      ++count;
      missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
      detail += fmt::format("\n    rank {}: {}", r, what_it_last_said(p, at_this_wait, now, silent_after, has_steps));
    }
  if (count == 0) return "every rank reports waiting in it: MPI or the network is stalled";
  return fmt::format("rank{} {} ha{} not arrived{}", count == 1 ? "" : "s", missing, count == 1 ? "s" : "ve",
                     detail);
}

}  // namespace ringtrain::dist
