// Owns what rank 0's watchdog says about the other ranks when a collective times out: which ranks have not
// arrived, from the heartbeats each rank sends (its step, whether it waits in a collective, when it was last heard).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain::dist {

// One rank's last heartbeat as rank 0 received it (its step and the last step it began: see at_step); heard_at 0 is
// never heard from.
struct PeerBeat {
  int64_t step = -1;
  int64_t begun = -1;
  bool waiting = false;
  double heard_at = 0;
};

// Where a wait is, as the progress lines count steps (from 1): `step` is the training step it belongs to, the one in
// progress or, between steps (an epoch's checksum, checkpoint and evaluation, the run's end), the number of steps
// done; `begun` is the last step begun (-1 before the first). "at step N" within a step, "after step N" between
// steps, "before any training step".
std::string at_step(int64_t step, int64_t begun);

// How long a healthy rank can go unheard: heartbeats come every `heartbeat_every_s` whatever the rank does, so a
// rank unheard for a few of them is stopped, hung or unreachable, even if its last beat said it waits here too.
// Never longer than the collective's own timeout.
double silent_after_s(double heartbeat_every_s, double timeout_s);

// The ranks (peers[r] for r >= 1; peers[0] is rank 0 itself) that are not waiting in the collective of `step`,
// each with what it last said, or that every rank reports waiting in it.
std::string describe_missing_ranks(const std::vector<PeerBeat>& peers, int64_t step, double now,
                                   double silent_after_s);

}  // namespace ringtrain::dist
