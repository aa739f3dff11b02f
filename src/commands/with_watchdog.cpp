// Owns the watched span of a command; see with_watchdog.h.
#include "commands/with_watchdog.h"

#include "common/error.h"
#include "dist/collective_watch.h"

namespace ringtrain::commands {

int with_watchdog(const dist::World& world, const config::JobConfig& job,
                  const std::function<int(dist::Watchdog&)>& body, const dist::WatchedCommand& command) {
  dist::Watchdog watchdog(world.comm(), job.run.collective_timeout_s, static_cast<int>(ExitCode::fault), command);
  int code = 0;
  {
    const dist::WatchedCollectives watched(watchdog);
    code = body(watchdog);
  }
  watchdog.finish();
  return code;
}

}  // namespace ringtrain::commands
