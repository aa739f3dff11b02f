// Owns turning the job's data.augment, data.mixup_alpha, data.cutmix_alpha, data.loader_threads, data.eval_resize,
// data.decode and data.decode_regions, and a split's storage, into a loader's LoaderWork.
#include "data/loader_work.h"

#include <fmt/format.h>

#include <algorithm>

#include "data/augment.h"
#include "data/batch_mix.h"
#include "data/photo_sample.h"

namespace ringtrain::train {

namespace {

// The key each training sample's random choices are drawn with, (seed, epoch, rank, sample): loader batch i is
// micro-batch first_micro + i of the run. Evaluation (micro_per_epoch 0) draws nothing: epoch 0.
struct SampleKeys {
  uint64_t seed;
  int rank;
  int64_t first_micro, micro_per_epoch;

  SampleKey operator()(int64_t batch_index, int64_t sample) const {
    const int64_t epoch = micro_per_epoch > 0 ? (first_micro + batch_index) / micro_per_epoch : 0;
    return {seed, epoch, rank, sample};
  }
};

// An encoded split's samples as made from their photos; shared by the loader's own decoding and the crops it
// chooses for the device's, so both make the same samples.
struct PhotoKeys {
  PhotoSampling sampling;
  SampleKeys key;
};

// The loader threads decode: each sample made from its JPEG bytes on the CPU.
EncodedTransform photo_decoder(const PhotoKeys& photos) {
  return [photos](int64_t batch_index, int64_t sample, std::span<const uint8_t> jpeg, int height, int width,
                  std::span<uint8_t> out) {
    decode_photo_sample(photos.sampling, photos.key(batch_index, sample), jpeg, height, width, out);
  };
}

// The device decodes (Backend::decode_jpegs): the loader threads only choose each sample's crop.
CropChoice photo_crops(const PhotoKeys& photos) {
  return [photos](int64_t batch_index, int64_t sample, int height, int width) {
    return photo_crop(photos.sampling, photos.key(batch_index, sample), height, width);
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
  const PhotoKeys photos{{training, job.data.augment, evaluation_resize(job.data.eval_resize, meta.shape), meta.shape},
                         {job.train.seed, world.rank(), first_micro, micro_per_epoch}};
  if (decodes_on_device(job, meta)) {
    work.form = BatchForm::jpegs;
    work.choose_crop = photo_crops(photos);
    work.device_regions = job.data.decode_regions;
  } else {
    work.decode = photo_decoder(photos);
  }
  return work;
}

// A raw split's training samples: read, then augmented (data.augment) on the loader threads.
LoaderWork raw_training_work(const config::JobConfig& job, const dist::World& world, BatchForm form,
                             const io::SampleShape& shape, const SampleKeys& keys) {
  LoaderWork work = plain_work(job, world, form);
  if (job.data.augment.kind == AugmentKind::none) return work;
  work.transform = [spec = job.data.augment, keys, shape](int64_t batch_index, int64_t sample,
                                                          std::span<const uint8_t> in, std::span<uint8_t> out) {
    augment_sample(spec, keys(batch_index, sample), shape, in, out);
  };
  return work;
}

}  // namespace

bool decodes_on_device(const config::JobConfig& job, const io::DatasetMeta& meta) {
  return meta.storage == io::SampleStorage::jpeg && job.data.decode == config::DecodeOn::gpu;
}

void refuse_eval_resize_below_the_sample(const config::JobConfig& job, const io::SampleShape& shape) {
  const int side = std::max(shape.height, shape.width);
  if (job.data.eval_resize > 0 && job.data.eval_resize < side)
    throw JobFileError(fmt::format("'data.eval_resize' = {} is smaller than the samples' side {}: evaluation resizes "
                                   "the shorter side to it and then takes a centre crop of {}x{}, which must fit; set "
                                   "it to at least {} (0: the side / 0.875, {})",
                                   job.data.eval_resize, side, shape.height, shape.width, side,
                                   evaluation_resize(0, shape)));
}

void refuse_what_device_decoding_excludes(const config::JobConfig& job) {
  if (job.data.augment.kind == config::AugmentKind::pad_crop_flip)
    throw JobFileError("data.decode = gpu crops each photo as it decodes it, and data.augment = pad_crop_flip "
                       "augments a sample already decoded: use data.augment = resized_crop_flip, or data.decode = cpu");
  // The loader threads mix a batch's decoded pixels; with the device decoding, they never hold any.
  if (job.data.mix.on())
    throw JobFileError("data.decode = gpu decodes the photos on the device, and data.mixup_alpha / data.cutmix_alpha "
                       "mix decoded pixels on the loader threads, which then never see them: set data.decode = cpu "
                       "(or auto), or data.mixup_alpha = 0 and data.cutmix_alpha = 0");
}

int loader_threads(const config::JobConfig& job, const dist::World& world) {
  if (job.data.loader_threads > 0) return job.data.loader_threads;
  return world.cores();
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
                             const io::DatasetMeta& meta, const InputNorm& model_norm) {
  LoaderWork work = meta.storage == io::SampleStorage::jpeg ? encoded_loader_work(job, world, form, meta, false, 0, 0)
                                                            : plain_work(job, world, form);
  work.norm = model_norm;
  return work;
}

LoaderWork training_loader_work(const config::JobConfig& job, const dist::World& world, BatchForm form,
                                const io::DatasetMeta& meta, int64_t first_micro, int64_t micro_per_epoch) {
  const SampleKeys keys{job.train.seed, world.rank(), first_micro, micro_per_epoch};
  LoaderWork work = meta.storage == io::SampleStorage::jpeg
                        ? encoded_loader_work(job, world, form, meta, true, first_micro, micro_per_epoch)
                        : raw_training_work(job, world, form, meta.shape, keys);
  if (job.data.mix.on())
    work.choose_mix = [spec = job.data.mix, keys, shape = meta.shape](int64_t batch_index, int64_t sample) {
      return choose_pair_mix(spec, keys(batch_index, sample), shape);
    };
  work.norm = input_norm(meta, job.data);
  return work;
}

}  // namespace ringtrain::train
