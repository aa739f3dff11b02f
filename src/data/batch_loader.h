// Owns the loader thread: reads a rank's samples from its shards, decodes them (an encoded split's JPEGs) or
// augments them (optionally), mixes the batch's pairs (optionally: mixup, CutMix), on `LoaderWork::threads` threads,
// and either normalises them to float or leaves them
// uint8 for the device to normalise, and keeps up to `depth` batches ready in a bounded queue so the step does not
// wait for the disk (an AheadQueue, data/ahead_queue.h). The wait that remains is measured, and so is where the
// loader's own time goes (reading, decoding and augmenting), so a starved step can name its remedy. A read or
// decode error on the loader's threads is rethrown to the caller of next(), naming the shard and sample.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "data/ahead_queue.h"
#include "data/augment.h"
#include "data/batch_mix.h"
#include "data/normalisation.h"
#include "io/dataset_meta.h"
#include "io/shard_reader.h"
#include "kernels/jpeg_crop.h"

namespace ringtrain::train {

// What a batch carries to the device: fp32 input normalised on the loader threads, or the uint8 pixels (after
// augmentation) with their split's InputNorm, for the device to normalise (Backend::normalize_pixels), so the
// copy to a GPU is a quarter of the bytes; or, for a JPEG split decoded on the device (data.decode = gpu), each
// sample's JPEG bytes and the crop chosen for it, for Backend::decode_jpegs.
enum class BatchForm { normalized, pixels, jpegs };

struct HostBatch {
  int64_t index = 0;  // position in the loader's plan
  int count = 0;      // samples (the last evaluation batch may be short)
  BatchForm form = BatchForm::normalized;
  std::vector<float> images;    // BatchForm::normalized
  std::vector<uint8_t> pixels;  // BatchForm::pixels
  std::vector<std::vector<uint8_t>> jpegs;  // BatchForm::jpegs: each sample's bytes, which crops[i].jpeg views
  std::vector<kernels::JpegCrop> crops;
  std::vector<int64_t> samples;             // BatchForm::jpegs: partition-local indices, to name a sample
  const io::ShardReader* reader = nullptr;  // that does not decode on the device
  const InputNorm* norm = nullptr;  // the split's; owned by the loader
  std::vector<int32_t> labels;
  std::vector<float> targets;  // mixed training batches: count x classes soft targets (data/batch_mix.h); else empty
};

// Which samples make batch i (partition-local indices); `indices` is cleared and filled by the plan.
using BatchPlan = std::function<void(int64_t batch_index, std::vector<int64_t>& indices)>;

// Rewrites one sample's uint8 pixels before normalisation (augmentation): batch i of the plan, the sample's
// partition-local index, its pixels as read, and where to write them. Called from several threads at once.
using SampleTransform = std::function<void(int64_t batch_index, int64_t sample, std::span<const uint8_t> in,
                                           std::span<uint8_t> out)>;

// Makes one sample of an encoded split from its JPEG bytes and its image's size: batch i of the plan, the
// sample's partition-local index, the bytes, and where to write the sample. Called from several threads at once;
// throws DataError saying what is wrong with the bytes.
using EncodedTransform = std::function<void(int64_t batch_index, int64_t sample, std::span<const uint8_t> jpeg,
                                            int height, int width, std::span<uint8_t> out)>;

// The crop a sample of an encoded split is made from, chosen from its photo's size (batch i of the plan, the
// sample's partition-local index) where the device decodes it. Called from several threads at once.
using CropChoice = std::function<PhotoCrop(int64_t batch_index, int64_t sample, int height, int width)>;

// The mix of the pair whose first member is this sample (its partition-local index) in batch i of the plan. Called on
// the loader thread, once per pair.
using MixChoice = std::function<PairMix(int64_t batch_index, int64_t sample)>;

struct LoaderWork {
  int threads = 1;            // threads sharing each batch's per-sample transform and normalisation
  SampleTransform transform;  // raw splits; empty: samples are normalised as read
  EncodedTransform decode;    // encoded splits decoded here (one of decode and choose_crop is required for them)
  BatchForm form = BatchForm::normalized;
  CropChoice choose_crop;     // encoded splits decoded on the device: BatchForm::jpegs
  MixChoice choose_mix;       // mixed training batches (not BatchForm::jpegs): pixels blended, targets soft
  std::optional<InputNorm> norm;  // the job's (input_norm(meta, keys)); none: the split's own
  bool device_regions = false;    // BatchForm::jpegs: each crop's region JPEG handed over (data/device_crop.h)
};

// Where the loader thread's time went, summed over the batches made so far.
struct LoaderTimes {
  double read_s = 0;     // shard reads (an encoded split's: summed over its threads, divided by their number)
  double convert_s = 0;  // decoding, augmenting and normalising, wall time on the loader's threads
  int64_t batches = 0, samples = 0;
};

class BatchLoader {
 public:
  BatchLoader(io::ShardReader& reader, int max_batch, int64_t batches, BatchPlan plan, int depth, LoaderWork work = {});
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Blocks until the next batch is ready; adds the time blocked to *waited_s.
  std::unique_ptr<HostBatch> next(double* waited_s) { return queue_->next(waited_s); }
  void recycle(std::unique_ptr<HostBatch> batch) { queue_->recycle(std::move(batch)); }
  // Ends the loader thread after the batch it is making; a later next() throws (AheadQueue::stop).
  void stop() { queue_->stop(); }
  LoaderTimes times() const;
  int threads() const { return work_.threads; }
  int64_t batches() const { return batches_; }
  BatchForm form() const { return work_.form; }

 private:
  // The split and the work agree (wiring errors throw), and the loader's own buffers are sized.
  void prepare();
  struct ThreadSeconds {
    double read = 0, convert = 0;
  };
  // Reads batch i's samples and converts them: a raw split read into raw_ (or the batch) by this thread, then
  // converted on the threads; an encoded split's samples each read and decoded by the thread that claims it.
  void make(int64_t batch_index, std::vector<int64_t>& indices, HostBatch& batch);
  // Runs convert_share(t) for t = 0 .. threads - 1, the loader thread taking share 0; rethrows the first error.
  void on_threads(const std::function<void(int)>& convert_share);
  void decode_claimed(int64_t batch_index, const std::vector<int64_t>& indices, std::atomic<size_t>& next,
                      HostBatch& batch, ThreadSeconds& spent);
  void keep_claimed(int64_t batch_index, const std::vector<int64_t>& indices, std::atomic<size_t>& next,
                      HostBatch& batch, ThreadSeconds& spent);
  // Transforms (if any) and normalises (BatchForm::normalized) samples first, first + step, ... of the batch
  // read into raw_.
  void convert(int64_t batch_index, const std::vector<int64_t>& indices, int first, int step, HostBatch& batch);
  // Where the shard read lands: straight in the batch when the loader has nothing to do to the bytes.
  std::span<uint8_t> read_target(HostBatch& batch, int count);
  // Where sample s's transformed or decoded pixels go: unmixed_ when the batch is then mixed, else the batch
  // (BatchForm::pixels) or scratch_, to be normalised from.
  uint8_t* converted(HostBatch& batch, size_t s);
  // Mixes the batch's pairs from `unmixed` (its samples as transformed, decoded or read), normalises (if its form
  // asks) and writes the soft targets.
  void mix(int64_t batch_index, const std::vector<int64_t>& indices, const uint8_t* unmixed, HostBatch& batch);
  bool mixes() const { return static_cast<bool>(work_.choose_mix); }
  bool normalizes_each_sample() const { return work_.form == BatchForm::normalized && !mixes(); }

  io::ShardReader& reader_;
  int max_batch_;
  int64_t batches_;
  BatchPlan plan_;
  size_t depth_;
  LoaderWork work_;
  std::vector<uint8_t> raw_, scratch_;  // the batch as read; transformed samples (one slot per sample)
  std::vector<uint8_t> unmixed_;        // mixed batches: the samples as transformed or decoded, before mixing
  InputNorm norm_;
  std::vector<float> table_;  // per channel: 256 normalised values (kernels/cpu/pixel_norm.h)
  std::vector<int64_t> indices_;  // the batch being made's samples
  mutable std::mutex times_mutex_;
  LoaderTimes times_;
  std::optional<AheadQueue<HostBatch>> queue_;  // last: its thread stops before anything it uses goes
};

}  // namespace ringtrain::train
