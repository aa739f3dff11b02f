// Owns the CUDA backend's JPEG slots (model::JpegSlots) and decode_jpegs over two of them: a JPEG batch decoded by
// nvJPEG (kernels/cuda/jpeg_batch_decoder.h) on a stream of its own, so that the next batch decodes while the
// compute stream still runs this step. Each slot's decode waits for the compute work that read the slot before (its
// `released` event), and the compute stream waits for the decode (its `decoded` event) before anything queued after
// use(). The decode may run on a thread of its own (data/decode_ahead.h): it makes the backend's device current
// there, and nvJPEG's objects and the decode stream are this object's alone. CMYK/YCCK photos, which nvJPEG does
// not convert as libjpeg does, are decoded on the host (io/image_decode.h) and cropped on the device.
#include <array>
#include <vector>

#include "backend/cuda/cuda_backend_state.h"
#include "common/error.h"

#ifdef RINGTRAIN_HAVE_NVJPEG
#include "common/process_label.h"
#include "common/stderr_print.h"
#include "io/image_decode.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/jpeg_batch_decoder.h"
#endif

namespace ringtrain::backend {

#ifdef RINGTRAIN_HAVE_NVJPEG

namespace {

void host_decode(std::span<const uint8_t> jpeg, int channels, kernels::cuda::HostPixels& out) {
  io::DecodedImage image = io::convert_channels(io::decode_image_bytes({}, jpeg, channels), channels);
  out.pixels = std::move(image.pixels);
  out.rows = image.height;
  out.columns = image.width;
  out.channels = image.channels;
}

}  // namespace

class CudaJpegSlots final : public model::JpegSlots {
 public:
  CudaJpegSlots(int slots, cudaStream_t compute, int device)
      : compute_(compute), device_(device), slots_(static_cast<std::size_t>(slots)) {}
  // Neither stream may still touch the slots' memory or nvJPEG's when they go.
  ~CudaJpegSlots() override {
    (void)cudaStreamSynchronize(stream_.get());
    (void)cudaStreamSynchronize(compute_);
  }
  CudaJpegSlots(const CudaJpegSlots&) = delete;
  CudaJpegSlots& operator=(const CudaJpegSlots&) = delete;

  void decode(int slot, std::span<const kernels::JpegCrop> samples, const model::Shape& sample) override;
  const uint8_t* use(int slot) override;
  void release(int slot) override;

 private:
  // A batch in flight: its bytes (nvJPEG reads them until its stream is done), its crops and its samples.
  struct Slot {
    std::vector<uint8_t> bytes;
    std::vector<kernels::JpegCrop> crops;
    DeviceMemory samples;
    CudaEvent decoded = make_event(false);   // on the decode stream: the samples are made
    CudaEvent released = make_event(false);  // on the compute stream: what read the samples last has run
    bool release_recorded = false;
  };
  Slot& at(int slot) { return slots_.at(static_cast<std::size_t>(slot)); }
  static void keep_bytes(Slot& slot, std::span<const kernels::JpegCrop> samples);

  cudaStream_t compute_;
  int device_;
  CudaStream stream_ = make_stream();
  kernels::cuda::JpegBatchDecoder decoder_{stream_.get(), {true, host_decode}};
  std::vector<Slot> slots_;
  bool retry_noted_ = false;
};

// A batch nvJPEG refused batched went one image at a time: slower, and otherwise without a trace. Said once a run.
void note_retried(const kernels::cuda::JpegBatchDecoder& decoder, bool& noted) {
  const kernels::cuda::JpegRoutes& routes = decoder.last_routes();
  if (routes.retried == 0 || noted) return;
  noted = true;
  stderr_print("ringtrain: note: nvJPEG ({}) refused a batch of {} JPEGs decoded together on {}; they went one by "
               "one, which is slower; later batches are tried together again\n",
               decoder.backend(), routes.retried, process_label());
}

// The bytes copied into the slot: the caller may reuse its own at once. The slot's previous batch was decoded
// before the decoder's last call returned (it waits for its stream first), so its bytes are free.
void CudaJpegSlots::keep_bytes(Slot& slot, std::span<const kernels::JpegCrop> samples) {
  std::size_t total = 0;
  for (const auto& s : samples) total += s.jpeg.size();
  slot.bytes.resize(total);
  slot.crops.assign(samples.begin(), samples.end());
  std::size_t at = 0;
  for (auto& crop : slot.crops) {
    std::copy(crop.jpeg.begin(), crop.jpeg.end(), slot.bytes.begin() + static_cast<std::ptrdiff_t>(at));
    crop.jpeg = std::span<const uint8_t>(slot.bytes.data() + at, crop.jpeg.size());
    at += crop.jpeg.size();
  }
}

// The wait for the release comes first: growing the samples' memory waits for the decode stream, and so for the
// compute work that read them.
void CudaJpegSlots::decode(int index, std::span<const kernels::JpegCrop> samples, const model::Shape& sample) {
  CUDA_CHECK(cudaSetDevice(device_));  // the current device is per thread, and this may be a new one
  const UncountedDeviceAllocations uncounted;  // no captured step reads the samples (cuda_handles.h)
  Slot& slot = at(index);
  if (slot.release_recorded) CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), slot.released.get(), 0));
  keep_bytes(slot, samples);
  const kernels::cpu::SampleExtent extent{sample.c, sample.h, sample.w};
  slot.samples.ensure(samples.size() * static_cast<std::size_t>(sample.c) * sample.h * sample.w, stream_.get());
  decoder_.decode(slot.crops, extent, static_cast<uint8_t*>(slot.samples.get()));
  note_retried(decoder_, retry_noted_);
  CUDA_CHECK(cudaEventRecord(slot.decoded.get(), stream_.get()));
}

const uint8_t* CudaJpegSlots::use(int index) {
  Slot& slot = at(index);
  CUDA_CHECK(cudaStreamWaitEvent(compute_, slot.decoded.get(), 0));
  return static_cast<const uint8_t*>(slot.samples.get());
}

void CudaJpegSlots::release(int index) {
  Slot& slot = at(index);
  CUDA_CHECK(cudaEventRecord(slot.released.get(), compute_));
  slot.release_recorded = true;
}

// decode_jpegs' slots (model::kJpegSlotsInTurn), used in turn on the step's thread.
struct CudaJpegDecode {
  CudaJpegSlots slots;
  int next = 0;
};

std::unique_ptr<model::JpegSlots> CudaBackend::make_jpeg_slots(int slots) {
  return std::make_unique<CudaJpegSlots>(slots, state_->stream.get(), device_);
}

const uint8_t* CudaBackend::decode_jpegs(std::span<const kernels::JpegCrop> samples, const model::Shape& sample) {
  if (!state_->jpeg)
    state_->jpeg.reset(new CudaJpegDecode{{model::kJpegSlotsInTurn, state_->stream.get(), device_}});
  return model::decode_in_turn(state_->jpeg->slots, state_->jpeg->next, samples, sample);
}

void JpegDecodeDeleter::operator()(CudaJpegDecode* decode) const { delete decode; }

#else

struct CudaJpegDecode {};
void JpegDecodeDeleter::operator()(CudaJpegDecode* decode) const { delete decode; }

std::unique_ptr<model::JpegSlots> CudaBackend::make_jpeg_slots(int) {
  throw Error(ExitCode::job_file,
              "data.decode = gpu: this ringtrain was built without nvJPEG (install it with scripts/install_deps.sh "
              "and configure with -DRINGTRAIN_NVJPEG=ON), so the GPU cannot decode JPEGs; set data.decode = cpu");
}

const uint8_t* CudaBackend::decode_jpegs(std::span<const kernels::JpegCrop>, const model::Shape&) {
  make_jpeg_slots(2);  // throws: no nvJPEG in this build
  return nullptr;
}

#endif

}  // namespace ringtrain::backend
