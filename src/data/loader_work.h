// Owns what the loaders do per sample beyond reading: which decoding (an encoded split's JPEGs) or augmentation,
// keyed by which epoch, rank and sample, on how many threads, and whether they normalise or leave that to the
// device (data.augment, data.mixup_alpha, data.cutmix_alpha, data.eval_resize, data.loader_threads, data.normalize,
// data.decode), and with which numbers (data.mean, data.std).
#pragma once
#include <cstdint>

#include "config/job_config.h"
#include "data/batch_loader.h"
#include "dist/world.h"
#include "io/dataset_meta.h"
#include "model/backend.h"

namespace ringtrain::train {

// Training batches only. Loader batch i is micro-batch first_micro + i of the run, so its epoch is
// (first_micro + i) / micro_per_epoch: a resumed run augments and mixes exactly as the uninterrupted one would.
LoaderWork training_loader_work(const config::JobConfig& job, const dist::World& world, BatchForm form,
                                const io::DatasetMeta& meta, int64_t first_micro, int64_t micro_per_epoch);

// Evaluation and prediction batches: never augmented; an encoded split's photos take the evaluation centre crop;
// normalised with the model's numbers (its job's data.mean and data.std, or its training split's statistics), not
// necessarily the split's own.
LoaderWork plain_loader_work(const config::JobConfig& job, const dist::World& world, BatchForm form,
                             const io::DatasetMeta& meta, const InputNorm& model_norm);

// data.normalize, with auto resolved by the backend: uint8 to a GPU, normalised floats from the loader
// threads on the CPU twin.
BatchForm batch_form(const config::JobConfig& job, const model::Backend& backend);

// data.decode: whether the split's samples are decoded by the backend (Backend::decode_jpegs) rather than on the
// loader threads: a JPEG split with data.decode = gpu. auto means the loader threads until the GPU decoder has been
// measured on a GPU.
bool decodes_on_device(const config::JobConfig& job, const io::DatasetMeta& meta);
// Where the device decodes, what the loader threads then cannot do (augment a decoded sample, mix decoded pixels):
// JobFileError naming both keys and the fix. Training and input-bench alike call it.
void refuse_what_device_decoding_excludes(const config::JobConfig& job);

// data.eval_resize (when set) must leave room for the centre crop of the sample's size.
void refuse_eval_resize_below_the_sample(const config::JobConfig& job, const io::SampleShape& shape);

// data.loader_threads, with 0 resolved to the node's hardware threads divided among its ranks (at least 1).
int loader_threads(const config::JobConfig& job, const dist::World& world);

}  // namespace ringtrain::train
