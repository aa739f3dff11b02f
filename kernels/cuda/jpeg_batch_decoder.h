// Owns decoding a batch of JPEGs on the GPU with nvJPEG and cropping each to its sample there: host bytes in, planar
// uint8 samples (count x C x H x W) out, in a device buffer of the caller's. The decoded images live in device memory
// this object owns (grown as batches need, reused from batch to batch); one kernel (kernels/cuda/crop_resample.h)
// then makes every sample with the bits the CPU twin gives on the same pixels.
//
// Routes, per sample: nvJPEG's batched decoder, on the GPU's hardware JPEG engine where it has one (A100, H100, H200)
// and takes the JPEG (baseline, not 4:1:0 or 4:1:1), else on its CUDA backend (GPU-assisted Huffman); JPEGs the
// batched decoder does not take (progressive ones on the hardware engine) one by one through nvJPEG's decoupled API,
// still on the GPU; CMYK/YCCK JPEGs, whose conversion nvJPEG does not do as libjpeg does (Adobe's inverted inks),
// through a host decoder the caller may pass. Knows nothing of files: a refused sample is named by its index in the
// batch, and the caller names the shard and sample.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/cpu/crop_resample.h"
#include "kernels/jpeg_crop.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::kernels::cuda {

// The largest image decoded, as io::kMaxImagePixels on the CPU: 2^28 pixels.
inline constexpr uint64_t kMaxJpegPixels = uint64_t{1} << 28;

// Interleaved pixels a host decoder made: rows x columns x channels.
struct HostPixels {
  std::vector<uint8_t> pixels;
  int rows = 0, columns = 0, channels = 0;
};
// Decodes a whole JPEG to `channels` channels; throws (DataError) when it cannot.
using HostJpegDecode = std::function<void(std::span<const uint8_t> jpeg, int channels, HostPixels& out)>;

struct JpegDecoderOptions {
  bool allow_hardware = true;  // false: the CUDA backend even on a GPU with a JPEG engine (tests, comparisons)
  // CMYK/YCCK JPEGs and those nvJPEG refuses (unsupported, or judged corrupt where libjpeg may still decode them);
  // empty: those are refused
  HostJpegDecode host_decode;
};

// How the last batch's samples were decoded.
struct JpegRoutes {
  int batched = 0;     // nvJPEG's batched decoder
  int one_by_one = 0;  // nvJPEG's decoupled API, an image at a time
  int host = 0;        // the host decoder
  int retried = 0;     // of `batched`: decoded again one by one after the batched call failed
};

class JpegBatchDecoder {
 public:
  // Decodes on `stream` (of the current device). Throws ringtrain::Error (library) when nvJPEG cannot start.
  explicit JpegBatchDecoder(Stream stream, JpegDecoderOptions options = {});
  ~JpegBatchDecoder();
  JpegBatchDecoder(const JpegBatchDecoder&) = delete;
  JpegBatchDecoder& operator=(const JpegBatchDecoder&) = delete;

  // out (device): samples.size() x extent.channels x extent.height x extent.width, extent.channels 1 (luma) or 3
  // (RGB), enqueued on the stream. Waits for the stream's earlier work first (nvJPEG's buffers are reused); the
  // JPEG bytes must stay as they are until the stream has done this batch. Throws UndecodableJpeg naming the first
  // sample that cannot be decoded (corrupt, not a JPEG, a size other than the caller's, over kMaxJpegPixels).
  void decode(std::span<const JpegCrop> samples, const cpu::SampleExtent& extent, uint8_t* out);

  // "hardware" or "CUDA (GPU hybrid)", with why the hardware engine is not used where it is not.
  const std::string& backend() const;
  bool hardware() const;
  const JpegRoutes& last_routes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// nvJPEG's version, from the library loaded ("13.0.4").
std::string nvjpeg_version();

}  // namespace ringtrain::kernels::cuda
