// Owns turning the job's data.augment, data.loader_threads and data.eval_resize, and a split's storage, into a
// loader's LoaderWork.
#include "data/loader_work.h"

#include <algorithm>
#include <thread>

#include "data/augment.h"
#include "data/photo_sample.h"

namespace ringtrain::train {

namespace {

// An encoded split's decoder: training crops keyed by (seed, epoch, rank, sample) as the raw augmentations are;
// evaluation's centre crop needs no key.
EncodedTransform photo_decoder(const config::JobConfig& job, const dist::World& world, const io::DatasetMeta& meta,
                               bool training, int64_t first_micro, int64_t micro_per_epoch) {
  const PhotoSampling sampling{training, job.data.augment, evaluation_resize(job.data.eval_resize, meta.shape),
                               meta.shape};
  return [sampling, seed = job.train.seed, rank = world.rank(), first_micro, micro_per_epoch](
             int64_t batch_index, int64_t sample, std::span<const uint8_t> jpeg, int height, int width,
             std::span<uint8_t> out) {
    const int64_t epoch = micro_per_epoch > 0 ? (first_micro + batch_index) / micro_per_epoch : 0;
    decode_photo_sample(sampling, {seed, epoch, rank, sample}, jpeg, height, width, out);
  };
}

}  // namespace

int loader_threads(const config::JobConfig& job, const dist::World& world) {
  if (job.data.loader_threads > 0) return job.data.loader_threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, world.local_size()));
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

LoaderWork plain_loader_work(const config::JobConfig& job, const dist::World& world, BatchForm form,
                             const io::DatasetMeta& meta) {
  LoaderWork work{loader_threads(job, world), {}, {}, form};
  if (meta.storage == io::SampleStorage::jpeg) work.decode = photo_decoder(job, world, meta, false, 0, 0);
  return work;
}

LoaderWork training_loader_work(const config::JobConfig& job, const dist::World& world, BatchForm form,
                                const io::DatasetMeta& meta, int64_t first_micro, int64_t micro_per_epoch) {
  LoaderWork work{loader_threads(job, world), {}, {}, form};
  if (meta.storage == io::SampleStorage::jpeg) {
    work.decode = photo_decoder(job, world, meta, true, first_micro, micro_per_epoch);
    return work;
  }
  if (job.data.augment.kind == AugmentKind::none) return work;
  work.transform = [spec = job.data.augment, seed = job.train.seed, rank = world.rank(), shape = meta.shape, first_micro,
                    micro_per_epoch](int64_t batch_index, int64_t sample, std::span<const uint8_t> in,
                                     std::span<uint8_t> out) {
    const SampleKey key{seed, (first_micro + batch_index) / micro_per_epoch, rank, sample};
    augment_sample(spec, key, shape, in, out);
  };
  return work;
}

}  // namespace ringtrain::train
