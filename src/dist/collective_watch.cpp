// Owns the per-thread watchdog of World's collectives; see collective_watch.h.
#include "dist/collective_watch.h"

namespace ringtrain::dist {
namespace {

thread_local Watchdog* attached = nullptr;

}  // namespace

WatchedCollectives::WatchedCollectives(Watchdog& dog) : previous_(attached) { attached = &dog; }

WatchedCollectives::~WatchedCollectives() { attached = previous_; }

CollectiveWait::CollectiveWait(const char* what, bool sigterm_ends_wait) {
  if (attached == nullptr || attached->waiting()) return;
  dog_ = attached;
  dog_->enter(what, dog_->step(), sigterm_ends_wait);
}

CollectiveWait::~CollectiveWait() {
  if (dog_) dog_->leave();
}

}  // namespace ringtrain::dist
