// Owns `ringtrain train`: MPI start-up, the job file, backend and reducer choice, and turning errors into
// the same message and exit code on every rank (or an abort of the whole job when one rank fails alone).
#include <fmt/format.h>

#include "backend/device_setup.h"
#include "commands/commands.h"
#include "commands/on_every_rank.h"
#include "commands/results_on_stdout.h"
#include "commands/same_job.h"
#include "commands/with_watchdog.h"
#include "config/job_config.h"
#include "dist/world.h"
#include "train/launcher_watch.h"
#include "train/stop_request.h"
#include "train/trainer.h"

namespace ringtrain::commands {

int train(int* argc, char*** argv, const TrainArgs& args) {
  // Before MPI start-up, which takes a while: a stop signal then is a clean stop, not the signal's default death.
  train::remember_launcher();
  train::install_stop_handlers();
  dist::World world(argc, argv);
  train::install_stop_handlers();  // again, in case MPI start-up installed its own
  if (world.size() > 1) train::watch_launcher(world.rank());
  return on_every_rank(world, [&] {
    return with_results_on_stdout([&] {
      config::JobConfig job;
      world.all_succeed([&] { job = config::load_job(args.job, args.overrides); });
      require_same_job(world, job);
      return with_watchdog(world, job, [&](dist::Watchdog& watchdog) {
        // The device synchronises batch norm over the group a resume on a smaller world fits; the trainer fits the
        // same from `job` and says so in the run header.
        const train::MembershipChange membership{args.failed_node, args.seconds_lost};
        config::JobConfig device_job = job;
        device_job.dist.sync_batchnorm_group =
            train::device_sync_batchnorm_group(job, world.size(), args.resume, membership);
        backend::DeviceSetup device = backend::open_device(device_job, world);
        return train::Trainer(job, world, *device.backend, *device.reducer, watchdog, args.resume, membership).run();
      });
    });
  });
}

}  // namespace ringtrain::commands
