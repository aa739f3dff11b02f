// Owns turning the job's data.augment, data.loader_threads, data.eval_resize and data.decode, and a split's storage,
// into a loader's LoaderWork.
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

// Where the device decodes: the crops photo_decoder's samples are made from, chosen alike, for Backend::decode_jpegs.
CropChoice photo_crops(const config::JobConfig& job, const dist::World& world, const io::DatasetMeta& meta,
                       bool training, int64_t first_micro, int64_t micro_per_epoch) {
  const PhotoSampling sampling{training, job.data.augment, evaluation_resize(job.data.eval_resize, meta.shape),
                               meta.shape};
  return [sampling, seed = job.train.seed, rank = world.rank(), first_micro, micro_per_epoch](
             int64_t batch_index, int64_t sample, int height, int width) {
    const int64_t epoch = micro_per_epoch > 0 ? (first_micro + batch_index) / micro_per_epoch : 0;
    return photo_crop(sampling, {seed, epoch, rank, sample}, height, width);
  };
}

// Reading only: each sample as the split holds it, on the job's threads, in `form`.
LoaderWork plain_work(const config::JobConfig& job, const dist::World& world, BatchForm form) {
  LoaderWork work;
  work.threads = loader_threads(job, world);
  work.form = form;
  return work;
}

// An encoded split's loader work: decoded on the loader threads, or only read and cropped for the device.
LoaderWork encoded_loader_work(const config::JobConfig& job, const dist::World& world, BatchForm form,
                               const io::DatasetMeta& meta, bool training, int64_t first_micro,
                               int64_t micro_per_epoch) {
  LoaderWork work = plain_work(job, world, form);
  if (decodes_on_device(job)) {
    work.form = BatchForm::jpegs;
    work.choose_crop = photo_crops(job, world, meta, training, first_micro, micro_per_epoch);
  } else {
    work.decode = photo_decoder(job, world, meta, training, first_micro, micro_per_epoch);
  }
  return work;
}

}  // namespace

bool decodes_on_device(const config::JobConfig& job) { return job.data.decode == config::DecodeOn::gpu; }

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
  if (meta.storage == io::SampleStorage::jpeg) return encoded_loader_work(job, world, form, meta, false, 0, 0);
  return plain_work(job, world, form);
}

LoaderWork training_loader_work(const config::JobConfig& job, const dist::World& world, BatchForm form,
                                const io::DatasetMeta& meta, int64_t first_micro, int64_t micro_per_epoch) {
  if (meta.storage == io::SampleStorage::jpeg)
    return encoded_loader_work(job, world, form, meta, true, first_micro, micro_per_epoch);
  LoaderWork work = plain_work(job, world, form);
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
