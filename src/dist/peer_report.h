// Owns what rank 0's watchdog says about the other ranks when a collective times out: which ranks have not arrived,
// from the heartbeats each rank sends (its wait's step, its place among the training steps, whether it waits in a
// collective, when it was last heard), and how a place is named.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain::dist {

// Where a rank is among the training steps: the last step it began (-1 before its first) and whether that step is
// still running; between steps come an epoch's checksum, checkpoint and evaluation, and the run's end.
struct StepPlace {
  int64_t begun = -1;
  bool in_step = false;
  bool operator==(const StepPlace&) const = default;
};

// As the progress lines count steps (from 1): "at step N" inside step N, "after step N" between it and the next,
// "before any training step".
std::string at_step(const StepPlace& place);

// One rank's last heartbeat as rank 0 received it: the step its waits are entered with, its place, whether it waits
// in a collective; heard_at 0 is never heard from.
struct PeerBeat {
  int64_t step = -1;
  StepPlace place;
  bool waiting = false;
  double heard_at = 0;
};

// How long a healthy rank can go unheard: heartbeats come every `heartbeat_every_s` whatever the rank does, so a
// rank unheard for a few of them is stopped, hung or unreachable, even if its last beat said it waits here too.
// Never longer than the collective's own timeout.
double silent_after_s(double heartbeat_every_s, double timeout_s);

// The ranks (peers[r] for r >= 1; peers[0] is rank 0 itself) that are not waiting in rank 0's collective (entered
// with `step` at `place`), silent ones first, each with what it last said (with its place among the training steps
// where the command `has_steps`); or that every rank reports waiting in it.
std::string describe_missing_ranks(const std::vector<PeerBeat>& peers, int64_t step, const StepPlace& place,
                                   double now, double silent_after_s, bool has_steps = true);

}  // namespace ringtrain::dist
