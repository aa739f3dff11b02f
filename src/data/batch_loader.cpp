// Owns making a batch on the loader thread (its reads, decodes, augmentations and mixes); the queue is AheadQueue's.
#include "data/batch_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "common/error.h"
#include "data/device_crop.h"
#include "kernels/cpu/pixel_norm.h"

namespace ringtrain::train {

BatchLoader::BatchLoader(io::ShardReader& reader, int max_batch, int64_t batches, BatchPlan plan, int depth, LoaderWork work)
    : reader_(reader),
      max_batch_(max_batch),
      batches_(batches),
      plan_(std::move(plan)),
      depth_(static_cast<size_t>(depth)),
      work_(std::move(work)) {
  work_.threads = std::max(1, work_.threads);
  const auto& meta = reader.meta();
  norm_ = work_.norm ? *work_.norm : input_norm(meta);
  table_ = kernels::cpu::pixel_table(meta.shape.channels, norm_.mean.data(), norm_.stddev.data());
  const auto batch_elements = static_cast<size_t>(max_batch_ * meta.shape.elements());
  std::vector<std::unique_ptr<HostBatch>> made;
  for (size_t i = 0; i < depth_ + 1; ++i) {
    auto b = std::make_unique<HostBatch>();
    b->form = work_.form;
    if (work_.form == BatchForm::pixels) b->pixels.resize(batch_elements);
    if (work_.form == BatchForm::normalized) b->images.resize(batch_elements);
    if (work_.form == BatchForm::jpegs) {
      b->jpegs.resize(static_cast<size_t>(max_batch_));
      b->crops.resize(static_cast<size_t>(max_batch_));
      b->reader = &reader;
    }
    b->norm = &norm_;
    b->labels.resize(static_cast<size_t>(max_batch_));
    if (mixes()) b->targets.resize(static_cast<size_t>(max_batch_) * static_cast<size_t>(meta.num_classes));
    made.push_back(std::move(b));
  }
  prepare();
  queue_.emplace(std::move(made), batches_, [this](int64_t i, HostBatch& batch) { make(i, indices_, batch); });
}

BatchLoader::~BatchLoader() = default;

void BatchLoader::prepare() {
  const auto batch_elements = static_cast<size_t>(max_batch_ * reader_.meta().shape.elements());
  const bool encoded = reader_.meta().storage == io::SampleStorage::jpeg;
  if (encoded && !work_.decode && !work_.choose_crop)
    throw Error(ExitCode::internal, "an encoded split reached a loader made without a decoder");
  if (work_.form == BatchForm::jpegs && !(encoded && work_.choose_crop))
    throw Error(ExitCode::internal, "a loader of JPEG batches was made for a split it cannot make them of");
  if (work_.form == BatchForm::jpegs && mixes())
    throw Error(ExitCode::internal, "a loader of JPEG batches was asked to mix them; the device decodes them");
  if (!encoded && (work_.form == BatchForm::normalized || work_.transform || mixes())) raw_.resize(batch_elements);
  if (work_.form == BatchForm::normalized && (work_.transform || encoded || mixes())) scratch_.resize(batch_elements);
  if (mixes() && (work_.transform || encoded)) unmixed_.resize(batch_elements);
}

void BatchLoader::convert(int64_t batch_index, const std::vector<int64_t>& indices, int first, int step, HostBatch& batch) {
  const auto& shape = reader_.meta().shape;
  const auto per_sample = static_cast<size_t>(shape.elements());
  const kernels::PixelShape one{1, shape.channels, int64_t{shape.height} * shape.width};
  for (size_t s = static_cast<size_t>(first); s < indices.size(); s += static_cast<size_t>(step)) {
    const uint8_t* sample = raw_.data() + s * per_sample;
    if (work_.transform) {
      uint8_t* out = converted(batch, s);
      work_.transform(batch_index, indices[s], std::span(sample, per_sample), std::span(out, per_sample));
      sample = out;
    }
    if (normalizes_each_sample())
      kernels::cpu::normalize_pixels(one, table_.data(), sample, batch.images.data() + s * per_sample);
  }
}

// Claims the batch's samples one at a time (photos differ in size, so a fixed share per thread would leave threads
// idle at the batch's end), reads each one's bytes and decodes them into the batch (pixels) or into scratch_ and
// normalises from there. `spent` gathers this thread's seconds reading and decoding.
void BatchLoader::decode_claimed(int64_t batch_index, const std::vector<int64_t>& indices, std::atomic<size_t>& next,
                                 HostBatch& batch, ThreadSeconds& spent) {
  using Clock = std::chrono::steady_clock;
  const auto& shape = reader_.meta().shape;
  const auto per_sample = static_cast<size_t>(shape.elements());
  const kernels::PixelShape one{1, shape.channels, int64_t{shape.height} * shape.width};
  thread_local std::vector<uint8_t> bytes;
  for (size_t s; (s = next.fetch_add(1)) < indices.size();) {
    const auto start = Clock::now();
    bytes.clear();
    const io::ShardReader::EncodedSample sample = reader_.read_encoded_sample(indices[s], bytes);
    const auto read = Clock::now();
    uint8_t* out = converted(batch, s);
    try {
      work_.decode(batch_index, indices[s], bytes, sample.height, sample.width, std::span(out, per_sample));
    } catch (const DataError& e) {
      throw DataError(fmt::format("{} does not decode ({}); re-run `ringtrain prepare images` with --overwrite to "
                                  "rewrite the split",
                                  reader_.sample_place(indices[s]), e.what()));
    }
    if (normalizes_each_sample())
      kernels::cpu::normalize_pixels(one, table_.data(), out, batch.images.data() + s * per_sample);
    spent.read += std::chrono::duration<double>(read - start).count();
    spent.convert += std::chrono::duration<double>(Clock::now() - read).count();
  }
}

// The device decodes (BatchForm::jpegs): claims samples as decode_claimed does, chooses each one's crop and keeps its
// bytes (checked against its CRC), or its crop's region JPEG (data/device_crop.h), in the batch.
void BatchLoader::keep_claimed(int64_t batch_index, const std::vector<int64_t>& indices, std::atomic<size_t>& next,
                               HostBatch& batch, ThreadSeconds& spent) {
  const auto start = std::chrono::steady_clock::now();
  thread_local std::vector<uint8_t> read;
  for (size_t s; (s = next.fetch_add(1)) < indices.size();) {
    read.clear();
    const io::ShardReader::EncodedSample sample = reader_.read_encoded_sample(indices[s], read);
    const PhotoCrop crop = work_.choose_crop(batch_index, indices[s], sample.height, sample.width);
    batch.crops[s] = device_crop(read, crop, sample.height, sample.width, reader_.meta().shape, work_.device_regions,
                                 batch.jpegs[s]);
  }
  spent.read += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BatchLoader::on_threads(const std::function<void(int)>& convert_share) {
  std::mutex failure_mutex;
  std::exception_ptr failure;
  const auto guarded = [&](int t) {
    try {
      convert_share(t);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (int t = 1; t < work_.threads; ++t) helpers.emplace_back(guarded, t);
    guarded(0);
  }
  if (failure) std::rethrow_exception(failure);
}

void BatchLoader::make(int64_t i, std::vector<int64_t>& indices, HostBatch& batch) {
  using Clock = std::chrono::steady_clock;
  plan_(i, indices);
  const int count = static_cast<int>(indices.size());
  const std::span<int32_t> labels(batch.labels.data(), static_cast<size_t>(count));
  ThreadSeconds spent;  // wall seconds on the loader's threads, as if one thread had done all
  if (reader_.meta().storage == io::SampleStorage::jpeg) {
    reader_.read_labels(indices, labels);
    std::atomic<size_t> next{0};
    std::mutex sum_mutex;
    on_threads([&](int) {
      ThreadSeconds mine;
      if (work_.form == BatchForm::jpegs)
        keep_claimed(i, indices, next, batch, mine);
      else
        decode_claimed(i, indices, next, batch, mine);
      std::lock_guard lock(sum_mutex);
      spent.read += mine.read / work_.threads;
      spent.convert += mine.convert / work_.threads;
    });
  } else {
    const auto start = Clock::now();
    reader_.read(indices, read_target(batch, count), labels);
    const auto read = Clock::now();
    if (normalizes_each_sample() || work_.transform)
      on_threads([&](int t) { convert(i, indices, t, work_.threads, batch); });
    spent = {std::chrono::duration<double>(read - start).count(),
             std::chrono::duration<double>(Clock::now() - read).count()};
  }
  if (mixes()) {
    const auto start = Clock::now();
    const bool converted_apart = work_.transform || reader_.meta().storage == io::SampleStorage::jpeg;
    mix(i, indices, converted_apart ? unmixed_.data() : raw_.data(), batch);
    spent.convert += std::chrono::duration<double>(Clock::now() - start).count();
  }
  if (work_.form == BatchForm::jpegs) batch.samples.assign(indices.begin(), indices.end());
  batch.index = i;
  batch.count = count;
  std::lock_guard lock(times_mutex_);
  times_.read_s += spent.read;
  times_.convert_s += spent.convert;
  ++times_.batches;
  times_.samples += count;
}

LoaderTimes BatchLoader::times() const {
  std::lock_guard lock(times_mutex_);
  return times_;
}

std::span<uint8_t> BatchLoader::read_target(HostBatch& batch, int count) {
  const auto bytes = static_cast<size_t>(count * reader_.meta().shape.elements());
  if (work_.form == BatchForm::pixels && !work_.transform && !mixes()) return std::span(batch.pixels.data(), bytes);
  return std::span(raw_.data(), bytes);
}

uint8_t* BatchLoader::converted(HostBatch& batch, size_t s) {
  uint8_t* const slots = mixes() ? unmixed_.data() : work_.form == BatchForm::pixels ? batch.pixels.data() : scratch_.data();
  return slots + s * static_cast<size_t>(reader_.meta().shape.elements());
}

// The pairs' draws on this thread (one per pair, in order), then each sample mixed on the threads: both members of a
// pair read `unmixed`, so no sample is overwritten before its partner has read it.
void BatchLoader::mix(int64_t batch_index, const std::vector<int64_t>& indices, const uint8_t* unmixed, HostBatch& batch) {
  const auto& meta = reader_.meta();
  const auto per_sample = static_cast<size_t>(meta.shape.elements());
  const auto classes = static_cast<size_t>(meta.num_classes);
  const int count = static_cast<int>(indices.size());
  const std::vector<PairMix> pairs =
      batch_mixes(count, [&](int s) { return work_.choose_mix(batch_index, indices[static_cast<size_t>(s)]); });
  const kernels::PixelShape one{1, meta.shape.channels, int64_t{meta.shape.height} * meta.shape.width};
  on_threads([&](int t) {
    for (int s = t; s < count; s += work_.threads) {
      const auto own = static_cast<size_t>(s), partner = static_cast<size_t>(mix_partner(s, count));
      uint8_t* out = (work_.form == BatchForm::pixels ? batch.pixels.data() : scratch_.data()) + own * per_sample;
      mix_pixels(pairs[own], meta.shape, std::span(unmixed + own * per_sample, per_sample),
                 std::span(unmixed + partner * per_sample, per_sample), std::span(out, per_sample));
      if (work_.form == BatchForm::normalized)
        kernels::cpu::normalize_pixels(one, table_.data(), out, batch.images.data() + own * per_sample);
      mixed_target(pairs[own].lam, batch.labels[own], batch.labels[partner],
                   std::span(batch.targets.data() + own * classes, classes));
    }
  });
}

}  // namespace ringtrain::train
