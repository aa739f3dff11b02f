// Owns how a command that runs on every rank is watched once its job file is read: one watchdog times every
// collective from then to the end (dist/collective_watch.h), and the command ends with its closing meeting.
#pragma once
#include <functional>

#include "config/job_config.h"
#include "dist/watchdog.h"
#include "dist/world.h"

namespace ringtrain::commands {

// body's exit code. On an error the watchdog ends with it, without the closing meeting (the ranks agreed the error,
// or one rank ends the job).
// `command`: what the watchdog's messages name (training's by default).
int with_watchdog(const dist::World& world, const config::JobConfig& job,
                  const std::function<int(dist::Watchdog&)>& body, const dist::WatchedCommand& command = {});

}  // namespace ringtrain::commands
