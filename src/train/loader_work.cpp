// Owns turning the job's data.augment and data.loader_threads into the training loader's LoaderWork.
#include "train/loader_work.h"

#include <algorithm>
#include <thread>

#include "train/augment.h"

namespace ringtrain::train {

int loader_threads(const config::JobConfig& job, const dist::World& world) {
  if (job.data.loader_threads > 0) return job.data.loader_threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(cores / std::max(1, world.local_size()), 1, 8);
}

// On the CPU twin "the device" is this process: normalising there would put the work on the step's critical
// path (the twin runs each operation at its call), where the loader threads do it while the step computes.
// On a GPU the kernel is nearly free and the host-to-device copy shrinks 4x.
BatchForm batch_form(const config::JobConfig& job, const model::Backend& backend) {
  switch (job.data.normalize) {
    case config::NormalizeOn::loader: return BatchForm::normalized;
    case config::NormalizeOn::device: return BatchForm::pixels;
    case config::NormalizeOn::auto_detect: break;
  }
  return backend.allocates_host_memory() ? BatchForm::normalized : BatchForm::pixels;
}

LoaderWork plain_loader_work(const config::JobConfig& job, const dist::World& world, const model::Backend& backend) {
  return {loader_threads(job, world), {}, batch_form(job, backend)};
}

LoaderWork training_loader_work(const config::JobConfig& job, const dist::World& world, const model::Backend& backend,
                                const io::SampleShape& shape, int64_t first_micro, int64_t micro_per_epoch) {
  LoaderWork work = plain_loader_work(job, world, backend);
  if (job.data.augment.kind == AugmentKind::none) return work;
  work.transform = [spec = job.data.augment, seed = job.train.seed, rank = world.rank(), shape, first_micro,
                    micro_per_epoch](int64_t batch_index, int64_t sample, std::span<const uint8_t> in,
                                     std::span<uint8_t> out) {
    const SampleKey key{seed, (first_micro + batch_index) / micro_per_epoch, rank, sample};
    augment_sample(spec, key, shape, in, out);
  };
  return work;
}

}  // namespace ringtrain::train
