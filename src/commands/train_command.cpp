// Owns `ringtrain train`: MPI start-up, the job file, backend and reducer choice, and turning errors into
// the same message and exit code on every rank (or an abort of the whole job when one rank fails alone).
#include <fmt/format.h>

#include "backend/device_setup.h"
#include "commands/commands.h"
#include "common/process_label.h"
#include "config/job_config.h"
#include "dist/world.h"
#include "train/launcher_watch.h"
#include "train/stop_request.h"
#include "train/trainer.h"

namespace ringtrain::commands {

namespace {

void report(const Error& e) {
  fmt::print(stderr, "ringtrain: {} (exit {}) [{}]:\n  {}\n", exit_code_name(e.code()), static_cast<int>(e.code()),
             process_label(), e.what());
  std::fflush(stderr);
}

}  // namespace

int train(int* argc, char*** argv, const TrainArgs& args) {
  // Before MPI start-up, which takes a while: a stop signal then is a clean stop, not the signal's default death.
  train::remember_launcher();
  train::install_stop_handlers();
  dist::World world(argc, argv);
  train::install_stop_handlers();  // again, in case MPI start-up installed its own
  if (world.size() > 1) train::watch_launcher(world.rank());
  try {
    config::JobConfig job;
    world.all_succeed([&] { job = config::load_job(args.job, args.overrides); });
    backend::DeviceSetup device = backend::open_device(job, world);
    return train::Trainer(job, world, *device.backend, *device.reducer, args.resume).run();
  } catch (const AgreedError& e) {
    report(e);
    return static_cast<int>(e.code());
  } catch (const Error& e) {
    report(e);
    if (world.size() > 1) world.abort(e.code());  // other ranks may be inside a collective: end them all
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    report(Error(ExitCode::internal, e.what()));
    if (world.size() > 1) world.abort(ExitCode::internal);
    return static_cast<int>(ExitCode::internal);
  }
}

}  // namespace ringtrain::commands
