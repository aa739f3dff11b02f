// Owns `ringtrain evaluate`: MPI start-up, the job file, the device, then infer::evaluate on every rank.
#include "backend/device_setup.h"
#include "commands/commands.h"
#include "commands/on_every_rank.h"
#include "commands/results_on_stdout.h"
#include "commands/same_job.h"
#include "commands/with_watchdog.h"
#include "config/job_config.h"
#include "dist/world.h"
#include "infer/evaluate.h"
#include "infer/inference_keys.h"
#include "io/output_paths.h"
#include "train/start_point.h"

namespace ringtrain::commands {

int evaluate(int* argc, char*** argv, const EvaluateArgs& args) {
  dist::World world(argc, argv);
  return on_every_rank(world, [&] {
    return with_results_on_stdout([&] {
      config::JobConfig job;
      world.all_succeed([&] {
        // The checkpoint is checked once it is chosen (infer::evaluate), the job file here, before it is read.
        io::refuse_output_over_input("--out", args.out, {{"the job file", args.job}});
        job = config::load_job(args.job, infer::with_inference_keys(args.overrides));
      });
      require_same_job(world, job);
      return with_watchdog(world, job, [&](dist::Watchdog&) {
        backend::DeviceSetup device = backend::open_device(job, world, backend::DeviceUse::inference);
        const train::RunContext run{job, world, *device.backend, false};
        return infer::evaluate(run, {args.checkpoint, args.data, args.out, train::weights_named(args.weights)});
      }, {"run.collective_timeout_s", "nothing was written (--out only once the evaluation is whole): run it again",
          "evaluations", /*has_steps=*/false});
    });
  });
}

}  // namespace ringtrain::commands
