// Owns the CUDA backend's decode_jpegs: a JPEG batch decoded by nvJPEG (kernels/cuda/jpeg_batch_decoder.h) on a
// stream of its own, so that the next batch decodes while the compute stream still runs this step. Two slots of
// samples are used in turn; each slot's decode waits for the compute work that read the slot before (an event),
// and the compute stream waits for the decode before anything queued after the call. CMYK/YCCK photos, which nvJPEG
// does not convert as libjpeg does, are decoded on the host (io/image_decode.h) and cropped on the device.
#include <array>
#include <vector>

#include "backend/cuda/cuda_backend_state.h"
#include "common/error.h"

#ifdef RINGTRAIN_HAVE_NVJPEG
#include "io/image_decode.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/jpeg_batch_decoder.h"
#endif

namespace ringtrain::backend {

#ifdef RINGTRAIN_HAVE_NVJPEG

namespace {

void host_decode(std::span<const uint8_t> jpeg, int channels, kernels::cuda::HostPixels& out) {
  io::DecodedImage image = io::convert_channels(io::decode_image_bytes("the JPEG", jpeg), channels);
  out.pixels = std::move(image.pixels);
  out.rows = image.height;
  out.columns = image.width;
  out.channels = image.channels;
}

}  // namespace

struct CudaJpegDecode {
  // A batch in flight: its bytes (nvJPEG reads them until its stream is done), its crops and its samples.
  struct Slot {
    std::vector<uint8_t> bytes;
    std::vector<kernels::JpegCrop> crops;
    DeviceMemory samples;
    CudaEvent decoded = make_event(false);   // on the decode stream: the samples are made
    CudaEvent released = make_event(false);  // on the compute stream: what read the samples last has run
    bool release_recorded = false;
  };

  CudaStream stream = make_stream();
  kernels::cuda::JpegBatchDecoder decoder{stream.get(), {true, host_decode}};
  std::array<Slot, 2> slots;
  int next = 0;

  const uint8_t* decode(std::span<const kernels::JpegCrop> samples, const model::Shape& sample, cudaStream_t compute);

 private:
  void keep_bytes(Slot& slot, std::span<const kernels::JpegCrop> samples);
};

// The bytes copied into the slot: the caller may reuse its own at once. The slot's previous batch was decoded
// before the decoder's last call returned (it waits for its stream first), so its bytes are free.
void CudaJpegDecode::keep_bytes(Slot& slot, std::span<const kernels::JpegCrop> samples) {
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

const uint8_t* CudaJpegDecode::decode(std::span<const kernels::JpegCrop> samples, const model::Shape& sample,
                                      cudaStream_t compute) {
  Slot& slot = slots[static_cast<std::size_t>(next)];
  Slot& other = slots[static_cast<std::size_t>(1 - next)];
  next = 1 - next;
  // Everything queued on the compute stream so far includes every reader of the samples the last call handed out.
  CUDA_CHECK(cudaEventRecord(other.released.get(), compute));
  other.release_recorded = true;
  if (slot.release_recorded) CUDA_CHECK(cudaStreamWaitEvent(stream.get(), slot.released.get(), 0));
  keep_bytes(slot, samples);
  const kernels::cpu::SampleExtent extent{sample.c, sample.h, sample.w};
  slot.samples.ensure(samples.size() * static_cast<std::size_t>(sample.c) * sample.h * sample.w, stream.get());
  decoder.decode(slot.crops, extent, static_cast<uint8_t*>(slot.samples.get()));
  CUDA_CHECK(cudaEventRecord(slot.decoded.get(), stream.get()));
  CUDA_CHECK(cudaStreamWaitEvent(compute, slot.decoded.get(), 0));
  return static_cast<const uint8_t*>(slot.samples.get());
}

const uint8_t* CudaBackend::decode_jpegs(std::span<const kernels::JpegCrop> samples, const model::Shape& sample) {
  if (!state_->jpeg) state_->jpeg.reset(new CudaJpegDecode());
  return state_->jpeg->decode(samples, sample, state_->stream.get());
}

void JpegDecodeDeleter::operator()(CudaJpegDecode* decode) const { delete decode; }

#else

struct CudaJpegDecode {};
void JpegDecodeDeleter::operator()(CudaJpegDecode* decode) const { delete decode; }

const uint8_t* CudaBackend::decode_jpegs(std::span<const kernels::JpegCrop>, const model::Shape&) {
  throw Error(ExitCode::job_file,
              "data.decode = gpu: this ringtrain was built without nvJPEG (install it with scripts/install_deps.sh "
              "and configure with -DRINGTRAIN_NVJPEG=ON), so the GPU cannot decode JPEGs; set data.decode = cpu");
}

#endif

}  // namespace ringtrain::backend
