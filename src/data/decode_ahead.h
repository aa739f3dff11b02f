// Owns decoding a JPEG split's batches on the device (data.decode = gpu) one batch ahead of the step, on a thread of
// its own: it takes each host batch from the loader, has the backend decode it into one of two slots
// (model::JpegSlots: on a GPU, nvJPEG's host phase on this thread and its device phase on a stream of its own), and
// queues it (an AheadQueue: one slot decoded or being decoded while the step's thread uses the other). The step's
// thread then only makes its work wait for the slot and normalises it (DeviceBatch::load_decoded), so the decode's
// host time stays off the thread that launches the steps. A sample that does not decode is named by its shard and
// sample (DataError), rethrown on the step's thread by next().
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "data/ahead_queue.h"
#include "data/batch_loader.h"
#include "data/device_batch.h"
#include "model/backend.h"

namespace ringtrain::train {

// Where the decoding thread's time went, summed over the batches decoded so far.
struct DecodeTimes {
  double decode_s = 0;  // in the backend's decode: its host phase, and its wait for a slot the device still reads
  int64_t batches = 0;
};

// The memory a run's samples decoded on the device take at batches of `input` (its largest): DecodeAhead's slots for
// training and Backend::decode_jpegs' for evaluation, each one batch of uint8 samples. The backend's memory: a GPU's,
// or the host's on the CPU twin. nvJPEG's own buffers for the whole photos vary with them and are not counted.
double device_decode_bytes(const model::Shape& input);
// Backend::decode_jpegs' share of it alone: what a run that only evaluates (`ringtrain evaluate`) decodes into.
double evaluation_decode_bytes(const model::Shape& input);

class DecodeAhead {
 public:
  // A decoded batch: its slot and the host batch it was decoded from (labels, the split's norm).
  struct Decoded {
    int slot = 0;
    std::unique_ptr<HostBatch> host;
  };

  // Decodes every batch `loader` makes (BatchForm::jpegs) to samples of `input`'s C x H x W; stops `loader` when it
  // goes, so `loader` must outlive it.
  DecodeAhead(model::Backend& backend, BatchLoader& loader, const model::Shape& input);
  ~DecodeAhead();
  DecodeAhead(const DecodeAhead&) = delete;
  DecodeAhead& operator=(const DecodeAhead&) = delete;

  // Blocks until the next batch is decoded; adds the time blocked to *waited_s. Rethrows the loader's and the
  // decode's errors.
  std::unique_ptr<Decoded> next(double* waited_s) { return queue_->next(waited_s); }
  // Into `device` (on the thread that queues the steps): the step's work waits for the slot, which goes back to
  // the decoding thread, and the host batch to the loader.
  void load(DeviceBatch& device, std::unique_ptr<Decoded> decoded);
  DecodeTimes times() const;

 private:
  void decode(Decoded& into);

  BatchLoader& loader_;
  model::Shape sample_;
  std::unique_ptr<model::JpegSlots> slots_;
  mutable std::mutex times_mutex_;
  DecodeTimes times_;
  std::optional<AheadQueue<Decoded>> queue_;  // last: its thread stops before anything it uses goes
};

}  // namespace ringtrain::train
