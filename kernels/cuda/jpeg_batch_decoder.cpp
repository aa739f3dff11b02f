// Owns the nvJPEG side of jpeg_batch_decoder.h: the library's objects (created once, released in reverse), the
// per-sample plan read from each JPEG's header on the host, the batched and one-by-one decodes into this object's
// device buffer, the host decoder's pixels copied into it, and the crop kernel's launch over the whole batch.
#include "kernels/cuda/jpeg_batch_decoder.h"

#include <cuda_runtime_api.h>
#include <library_types.h>
#include <nvjpeg.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "kernels/cuda/crop_resample.h"
#include "kernels/cuda/cuda_check.h"

namespace ringtrain::kernels::cuda {
namespace {

template <class T, nvjpegStatus_t (*Destroy)(T)>
struct Release {
  void operator()(T object) const noexcept { (void)Destroy(object); }
};
template <class T, nvjpegStatus_t (*Destroy)(T)>
using Owned = std::unique_ptr<std::remove_pointer_t<T>, Release<T, Destroy>>;

using Handle = Owned<nvjpegHandle_t, nvjpegDestroy>;
using State = Owned<nvjpegJpegState_t, nvjpegJpegStateDestroy>;
using Decoder = Owned<nvjpegJpegDecoder_t, nvjpegDecoderDestroy>;
using PinnedBuffer = Owned<nvjpegBufferPinned_t, nvjpegBufferPinnedDestroy>;
using DeviceBuffer = Owned<nvjpegBufferDevice_t, nvjpegBufferDeviceDestroy>;
using JpegStream = Owned<nvjpegJpegStream_t, nvjpegJpegStreamDestroy>;
using Params = Owned<nvjpegDecodeParams_t, nvjpegDecodeParamsDestroy>;

// Creates an nvJPEG object through `create(&raw)`, checked, owned.
template <class O, class Create>
O make(Create create, const char* what) {
  typename O::pointer raw = nullptr;
  const nvjpegStatus_t status = create(&raw);
  if (status != NVJPEG_STATUS_SUCCESS) nvjpeg_failed(status, what, __FILE__, __LINE__);
  return O(raw);
}

// Device memory grown to the largest size asked for and kept. Growing waits for the stream first: the old memory
// may still be read by work in flight.
class DeviceBytes {
 public:
  DeviceBytes() = default;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() {
    if (data_) (void)cudaFree(data_);
  }
  void* reserve(std::size_t bytes, cudaStream_t stream) {
    if (bytes <= size_) return data_;
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (data_) CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    const std::size_t grown = std::max(bytes, size_ + size_ / 2);  // fewer regrowths as batches vary
    size_ = 0;
    CUDA_CHECK(cudaMalloc(&data_, grown));
    size_ = grown;
    return data_;
  }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

enum class Route { batched, one_by_one, host };

struct Planned {
  Route route = Route::batched;
  int rows = 0, columns = 0;
  std::size_t pitch = 0;   // bytes from row to row of the decoded image
  std::size_t offset = 0;  // of the decoded image in the device buffer
  int host_slot = -1;      // Route::host: its pixels
};

// The statuses that say something of the JPEG itself; any other is a failure of the library or of our use of it.
bool data_error(nvjpegStatus_t status) {
  return status == NVJPEG_STATUS_BAD_JPEG || status == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
         status == NVJPEG_STATUS_INCOMPLETE_BITSTREAM;
}

void refuse_sample(int index, nvjpegStatus_t status, const char* call, const char* file, int line) {
  if (status == NVJPEG_STATUS_SUCCESS) return;
  if (data_error(status)) throw UndecodableJpeg(index, "nvJPEG refused it: " + nvjpeg_status_text(status));
  nvjpeg_failed(status, call, file, line);
}

std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

nvjpegOutputFormat_t output_format(int channels) { return channels == 3 ? NVJPEG_OUTPUT_RGBI : NVJPEG_OUTPUT_Y; }

}  // namespace

struct JpegBatchDecoder::Impl {
  Impl(Stream stream, JpegDecoderOptions options);
  // Nothing of this object's may still be in use on the device when its memory and nvJPEG's objects go.
  ~Impl() { (void)cudaStreamSynchronize(stream); }

  void create_handle();
  void create_objects();
  void check_batch(std::size_t count, const cpu::SampleExtent& extent) const;
  void plan_sample(int index, const JpegCrop& sample);
  void plan_host(int index, const JpegCrop& sample, const std::string& why);
  void decode_on_host(int index, const JpegCrop& sample, HostPixels& pixels) const;
  void check_size(int index, const JpegCrop& sample, int rows, int columns) const;
  bool batchable(nvjpegJpegStream_t parsed) const;
  std::size_t lay_out();
  nvjpegImage_t destination(int index) const;
  void decode_batched(std::span<const JpegCrop> samples);
  void decode_one_by_one(std::span<const JpegCrop> samples);
  void decode_one(int index, const JpegCrop& sample);
  void upload(int index, const HostPixels& pixels);
  void decode_and_upload_on_host(int index, const JpegCrop& sample);  // what nvJPEG refuses as not supported
  void crop(std::span<const JpegCrop> samples, const cpu::SampleExtent& extent, uint8_t* out);

  cudaStream_t stream;
  JpegDecoderOptions options;
  Handle handle;  // declared first: released last, after every object made from it
  std::string backend;
  bool hardware = false;
  State batched_state;
  Decoder decoupled;  // nvJPEG's default backend, one image at a time: every JPEG nvJPEG decodes
  State decoupled_state;
  PinnedBuffer pinned[2];  // alternate images: one's host phase fills a buffer while the other's copy may read its own
  JpegStream parsed[2];
  JpegStream header;  // the next batch's headers, read while the device may still copy from `parsed`
  DeviceBuffer device_buffer;
  Params params;
  int next = 0;  // the pinned buffer and parsed stream of the next one-by-one image

  DeviceBytes images, sources;
  uint8_t* decoded = nullptr;  // this batch's images, in `images`
  int channels = 3;
  std::vector<Planned> plan;
  std::vector<HostPixels> host_pixels;  // Route::host samples' pixels, by slot (kept: their capacity is reused)
  int host_count = 0;
  HostPixels scratch;  // a one-by-one sample nvJPEG turned down late, decoded on the host
  std::vector<const unsigned char*> batch_data;
  std::vector<std::size_t> batch_lengths;
  std::vector<nvjpegImage_t> batch_out;
  std::vector<int> batch_index;
  std::vector<CropSource> crop_sources;
  JpegRoutes routes;
};

JpegBatchDecoder::Impl::Impl(Stream s, JpegDecoderOptions o) : stream(s), options(std::move(o)) {
  create_handle();
  create_objects();
}

// The hardware engine where allowed and present, else the CUDA backend; each first with chroma upsampled by
// interpolation, as libjpeg's "fancy" upsampling (the CPU path's) does, then without where that flag is refused.
void JpegBatchDecoder::Impl::create_handle() {
  struct Try {
    nvjpegBackend_t backend;
    unsigned flags;
    const char* name;
  };
  const unsigned interpolate = NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;
  const Try tries[] = {{NVJPEG_BACKEND_HARDWARE, interpolate, "hardware, chroma interpolated"},
                       {NVJPEG_BACKEND_HARDWARE, NVJPEG_FLAGS_DEFAULT, "hardware"},
                       {NVJPEG_BACKEND_GPU_HYBRID, interpolate, "CUDA (GPU hybrid), chroma interpolated"},
                       {NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_FLAGS_DEFAULT, "CUDA (GPU hybrid)"}};
  std::string no_hardware = options.allow_hardware ? "" : "; hardware engine not asked for";
  for (const Try& t : tries) {
    const bool is_hardware = t.backend == NVJPEG_BACKEND_HARDWARE;
    if (is_hardware && !options.allow_hardware) continue;
    nvjpegHandle_t raw = nullptr;
    const nvjpegStatus_t status = nvjpegCreateEx(t.backend, nullptr, nullptr, t.flags, &raw);
    if (status == NVJPEG_STATUS_SUCCESS) {
      handle.reset(raw);
      hardware = is_hardware;
      backend = std::string(t.name) + (is_hardware ? "" : no_hardware);
      return;
    }
    if (is_hardware) no_hardware = "; hardware engine: " + nvjpeg_status_text(status);
  }
  handle = make<Handle>([](nvjpegHandle_t* h) { return nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr,
                                                                       NVJPEG_FLAGS_DEFAULT, h); },
                        "nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT)");
  backend = "default" + no_hardware;
}

void JpegBatchDecoder::Impl::create_objects() {
  nvjpegHandle_t h = handle.get();
  batched_state = make<State>([h](nvjpegJpegState_t* s) { return nvjpegJpegStateCreate(h, s); },
                              "nvjpegJpegStateCreate");
  decoupled = make<Decoder>([h](nvjpegJpegDecoder_t* d) { return nvjpegDecoderCreate(h, NVJPEG_BACKEND_DEFAULT, d); },
                            "nvjpegDecoderCreate");
  nvjpegJpegDecoder_t d = decoupled.get();
  decoupled_state = make<State>([h, d](nvjpegJpegState_t* s) { return nvjpegDecoderStateCreate(h, d, s); },
                                "nvjpegDecoderStateCreate");
  for (int i = 0; i < 2; ++i) {
    pinned[i] = make<PinnedBuffer>([h](nvjpegBufferPinned_t* b) { return nvjpegBufferPinnedCreate(h, nullptr, b); },
                                   "nvjpegBufferPinnedCreate");
    parsed[i] = make<JpegStream>([h](nvjpegJpegStream_t* p) { return nvjpegJpegStreamCreate(h, p); },
                                 "nvjpegJpegStreamCreate");
  }
  header = make<JpegStream>([h](nvjpegJpegStream_t* p) { return nvjpegJpegStreamCreate(h, p); },
                            "nvjpegJpegStreamCreate");
  device_buffer = make<DeviceBuffer>([h](nvjpegBufferDevice_t* b) { return nvjpegBufferDeviceCreate(h, nullptr, b); },
                                     "nvjpegBufferDeviceCreate");
  params = make<Params>([h](nvjpegDecodeParams_t* p) { return nvjpegDecodeParamsCreate(h, p); },
                        "nvjpegDecodeParamsCreate");
  NVJPEG_CHECK(nvjpegStateAttachDeviceBuffer(decoupled_state.get(), device_buffer.get()));
}

void JpegBatchDecoder::Impl::check_batch(std::size_t count, const cpu::SampleExtent& extent) const {
  if (extent.channels != 1 && extent.channels != 3)
    throw Error(ExitCode::internal, "JpegBatchDecoder: samples of " + std::to_string(extent.channels) +
                                        " channels asked for; it makes 1 (luma) or 3 (RGB)");
  if (count > static_cast<std::size_t>(kMaxCropBatch))
    throw Error(ExitCode::internal, "JpegBatchDecoder: " + std::to_string(count) + " samples in one batch, over " +
                                        std::to_string(kMaxCropBatch));
}

void JpegBatchDecoder::Impl::check_size(int index, const JpegCrop& sample, int rows, int columns) const {
  if (rows <= 0 || columns <= 0) throw UndecodableJpeg(index, "its header says it has no pixels");
  if ((sample.height || sample.width) && (rows != sample.height || columns != sample.width))
    throw UndecodableJpeg(index, "its header says " + std::to_string(rows) + "x" + std::to_string(columns) +
                                     " pixels, where " + std::to_string(sample.height) + "x" +
                                     std::to_string(sample.width) + " were expected");
  if (static_cast<uint64_t>(rows) * static_cast<uint64_t>(columns) > kMaxJpegPixels)
    throw UndecodableJpeg(index, std::to_string(rows) + "x" + std::to_string(columns) + " pixels, over the " +
                                     std::to_string(kMaxJpegPixels) + " decoded");
}

// The batched decoder on the hardware engine takes what nvjpegDecodeBatchedSupported says it takes; on the CUDA
// backend, sequential (baseline) JPEGs, leaving progressive ones to the one-by-one path, which decodes any.
bool JpegBatchDecoder::Impl::batchable(nvjpegJpegStream_t stream_parsed) const {
  if (hardware) {
    int supported = -1;  // 0 means supported
    return nvjpegDecodeBatchedSupported(handle.get(), stream_parsed, &supported) == NVJPEG_STATUS_SUCCESS &&
           supported == 0;
  }
  nvjpegJpegEncoding_t encoding = NVJPEG_ENCODING_UNKNOWN;
  return nvjpegJpegStreamGetJpegEncoding(stream_parsed, &encoding) == NVJPEG_STATUS_SUCCESS &&
         (encoding == NVJPEG_ENCODING_BASELINE_DCT || encoding == NVJPEG_ENCODING_EXTENDED_SEQUENTIAL_DCT_HUFFMAN);
}

// The header alone, on the host: the image's size, its components and so its route.
void JpegBatchDecoder::Impl::plan_sample(int index, const JpegCrop& sample) {
  if (sample.jpeg.empty()) throw UndecodableJpeg(index, "no bytes");
  nvjpegJpegStream_t read = header.get();
  const nvjpegStatus_t status = nvjpegJpegStreamParseHeader(handle.get(), sample.jpeg.data(), sample.jpeg.size(), read);
  if (data_error(status) && options.host_decode)
    return plan_host(index, sample, "nvJPEG refused its header: " + nvjpeg_status_text(status));
  refuse_sample(index, status, "nvjpegJpegStreamParseHeader", __FILE__, __LINE__);
  unsigned width = 0, height = 0, components = 0;
  NVJPEG_CHECK(nvjpegJpegStreamGetFrameDimensions(read, &width, &height));
  NVJPEG_CHECK(nvjpegJpegStreamGetComponentsNum(read, &components));
  if (components != 1 && components != 3)
    return plan_host(index, sample, std::to_string(components) + " components (CMYK/YCCK): nvJPEG does not convert "
                                        "them as libjpeg does");
  Planned& p = plan[static_cast<std::size_t>(index)];
  p.rows = static_cast<int>(height);
  p.columns = static_cast<int>(width);
  check_size(index, sample, p.rows, p.columns);
  p.route = batchable(read) ? Route::batched : Route::one_by_one;
}

void JpegBatchDecoder::Impl::decode_on_host(int index, const JpegCrop& sample, HostPixels& pixels) const {
  try {
    options.host_decode(sample.jpeg, channels, pixels);
  } catch (const std::exception& e) {
    throw UndecodableJpeg(index, std::string("the host decoder refused it: ") + e.what());
  }
  const auto bytes = static_cast<std::size_t>(pixels.rows) * static_cast<std::size_t>(pixels.columns) *
                     static_cast<std::size_t>(channels);
  if (pixels.channels != channels || pixels.pixels.size() != bytes)
    throw Error(ExitCode::internal, "JpegBatchDecoder: the host decoder made " + std::to_string(pixels.pixels.size()) +
                                        " bytes of " + std::to_string(pixels.channels) + " channels for sample " +
                                        std::to_string(index) + ", not " + std::to_string(bytes));
  check_size(index, sample, pixels.rows, pixels.columns);
}

// Decoded now, on the host: its size is known only then, and the layout of the batch needs it.
void JpegBatchDecoder::Impl::plan_host(int index, const JpegCrop& sample, const std::string& why) {
  if (!options.host_decode) throw UndecodableJpeg(index, why + ", and no host decoder was given");
  if (host_count == static_cast<int>(host_pixels.size())) host_pixels.emplace_back();
  Planned& p = plan[static_cast<std::size_t>(index)];
  p.route = Route::host;
  p.host_slot = host_count++;
  HostPixels& pixels = host_pixels[static_cast<std::size_t>(p.host_slot)];
  decode_on_host(index, sample, pixels);
  p.rows = pixels.rows;
  p.columns = pixels.columns;
}

// Each image's place in the device buffer, 256-byte aligned, its rows 64-byte aligned (whatever alignment nvJPEG's
// engines prefer, this should meet it; the crop reads any pitch); the bytes needed.
std::size_t JpegBatchDecoder::Impl::lay_out() {
  std::size_t total = 0;
  for (Planned& p : plan) {
    p.pitch = round_up(static_cast<std::size_t>(p.columns) * static_cast<std::size_t>(channels), 64);
    p.offset = total;
    total += round_up(p.pitch * static_cast<std::size_t>(p.rows), 256);
  }
  return total;
}

// Interleaved output (RGBI or Y) in the image's place.
nvjpegImage_t JpegBatchDecoder::Impl::destination(int index) const {
  const Planned& p = plan[static_cast<std::size_t>(index)];
  nvjpegImage_t image{};
  image.channel[0] = decoded + p.offset;
  image.pitch[0] = p.pitch;
  return image;
}

void JpegBatchDecoder::Impl::decode_batched(std::span<const JpegCrop> samples) {
  batch_data.clear();
  batch_lengths.clear();
  batch_out.clear();
  batch_index.clear();
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (plan[i].route != Route::batched) continue;
    batch_data.push_back(samples[i].jpeg.data());
    batch_lengths.push_back(samples[i].jpeg.size());
    batch_out.push_back(destination(static_cast<int>(i)));
    batch_index.push_back(static_cast<int>(i));
  }
  routes.batched = static_cast<int>(batch_index.size());
  if (batch_index.empty()) return;
  nvjpegStatus_t status = nvjpegDecodeBatchedInitialize(handle.get(), batched_state.get(), routes.batched, 1,
                                                        output_format(channels));
  if (status == NVJPEG_STATUS_SUCCESS)
    status = nvjpegDecodeBatched(handle.get(), batched_state.get(), batch_data.data(), batch_lengths.data(),
                                 batch_out.data(), stream);
  if (status == NVJPEG_STATUS_SUCCESS) return;
  // The batched call says only that the batch failed, and not always as a data error: A100's hardware decoder has
  // answered INVALID_PARAMETER, EXECUTION_FAILED or INTERNAL_ERROR for particular images that the hybrid decoder
  // then decodes (NVIDIA DALI issues 3113, 3159, 3160). So its samples go one by one, which makes those that decode
  // and names the first that does not; the retry is counted (JpegRoutes::retried), and the backend says so once.
  routes.retried = routes.batched;
  for (const int i : batch_index) decode_one(i, samples[static_cast<std::size_t>(i)]);
}

void JpegBatchDecoder::Impl::decode_one_by_one(std::span<const JpegCrop> samples) {
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (plan[i].route == Route::one_by_one) {
      decode_one(static_cast<int>(i), samples[i]);
      ++routes.one_by_one;
    }
}

// nvJPEG's decoupled decode of one image: parse and Huffman-decode on the host into a pinned buffer, copy, finish on
// the device. The wait before the copy keeps it from overwriting the device buffer the previous image still reads.
void JpegBatchDecoder::Impl::decode_one(int index, const JpegCrop& sample) {
  nvjpegJpegStream_t stream_parsed = parsed[next].get();
  const nvjpegStatus_t status = nvjpegJpegStreamParse(handle.get(), sample.jpeg.data(), sample.jpeg.size(), 0, 0,
                                                      stream_parsed);
  if (data_error(status) && options.host_decode) return decode_and_upload_on_host(index, sample);
  refuse_sample(index, status, "nvjpegJpegStreamParse", __FILE__, __LINE__);
  NVJPEG_CHECK(nvjpegDecodeParamsSetOutputFormat(params.get(), output_format(channels)));
  NVJPEG_CHECK(nvjpegStateAttachPinnedBuffer(decoupled_state.get(), pinned[next].get()));
  // The parse may pass what the host phase then finds it cannot decode: the CPU twin takes that image too.
  const nvjpegStatus_t host = nvjpegDecodeJpegHost(handle.get(), decoupled.get(), decoupled_state.get(), params.get(),
                                                   stream_parsed);
  if (data_error(host) && options.host_decode) return decode_and_upload_on_host(index, sample);
  refuse_sample(index, host, "nvjpegDecodeJpegHost", __FILE__, __LINE__);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const nvjpegStatus_t transfer = nvjpegDecodeJpegTransferToDevice(handle.get(), decoupled.get(),
                                                                   decoupled_state.get(), stream_parsed, stream);
  if (data_error(transfer) && options.host_decode) return decode_and_upload_on_host(index, sample);
  refuse_sample(index, transfer, "nvjpegDecodeJpegTransferToDevice", __FILE__, __LINE__);
  nvjpegImage_t out = destination(index);
  const nvjpegStatus_t device = nvjpegDecodeJpegDevice(handle.get(), decoupled.get(), decoupled_state.get(), &out,
                                                       stream);
  if (data_error(device) && options.host_decode) return decode_and_upload_on_host(index, sample);
  refuse_sample(index, device, "nvjpegDecodeJpegDevice", __FILE__, __LINE__);
  next = 1 - next;
}

void JpegBatchDecoder::Impl::decode_and_upload_on_host(int index, const JpegCrop& sample) {
  decode_on_host(index, sample, scratch);
  upload(index, scratch);
}

// From pageable memory: the copy has left `pixels` when the call returns, so the buffer may be reused at once.
void JpegBatchDecoder::Impl::upload(int index, const HostPixels& pixels) {
  const Planned& p = plan[static_cast<std::size_t>(index)];
  const std::size_t row = static_cast<std::size_t>(p.columns) * static_cast<std::size_t>(channels);
  CUDA_CHECK(cudaMemcpy2DAsync(decoded + p.offset, p.pitch, pixels.pixels.data(), row, row,
                               static_cast<std::size_t>(p.rows), cudaMemcpyHostToDevice, stream));
}

void JpegBatchDecoder::Impl::crop(std::span<const JpegCrop> samples, const cpu::SampleExtent& extent, uint8_t* out) {
  crop_sources.resize(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Planned& p = plan[i];
    const InterleavedImage image{decoded + p.offset, p.rows, p.columns, channels, static_cast<int64_t>(p.pitch)};
    const int box = box_factor(samples[i].window, p.rows, p.columns, extent.height, extent.width);
    crop_sources[i] = {image, samples[i].window, samples[i].flip, box};
  }
  const std::size_t bytes = crop_sources.size() * sizeof(CropSource);
  auto* device = static_cast<CropSource*>(sources.reserve(bytes, stream));
  CUDA_CHECK(cudaMemcpyAsync(device, crop_sources.data(), bytes, cudaMemcpyHostToDevice, stream));
  crop_resample(device, static_cast<int>(samples.size()), extent, out, stream);
}

JpegBatchDecoder::JpegBatchDecoder(Stream stream, JpegDecoderOptions options)
    : impl_(std::make_unique<Impl>(stream, std::move(options))) {}

JpegBatchDecoder::~JpegBatchDecoder() = default;

void JpegBatchDecoder::decode(std::span<const JpegCrop> samples, const cpu::SampleExtent& extent, uint8_t* out) {
  Impl& m = *impl_;
  m.check_batch(samples.size(), extent);
  m.channels = extent.channels;
  m.routes = {};
  m.host_count = 0;
  m.plan.assign(samples.size(), Planned{});
  for (std::size_t i = 0; i < samples.size(); ++i) m.plan_sample(static_cast<int>(i), samples[i]);
  m.routes.host = m.host_count;
  // The headers were read while the device finished the last batch; nvJPEG's states and our buffers serve that
  // batch until it is done.
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  m.decoded = static_cast<uint8_t*>(m.images.reserve(m.lay_out(), m.stream));
  try {
    m.decode_batched(samples);
    m.decode_one_by_one(samples);
  } catch (...) {
    // The batched decode queued before a later sample failed may still read the caller's JPEG bytes, which the
    // caller's next batch may overwrite as soon as this returns: that work ends first.
    (void)cudaStreamSynchronize(m.stream);
    throw;
  }
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (m.plan[i].route == Route::host)
      m.upload(static_cast<int>(i), m.host_pixels[static_cast<std::size_t>(m.plan[i].host_slot)]);
  if (!samples.empty()) m.crop(samples, extent, out);
}

const std::string& JpegBatchDecoder::backend() const { return impl_->backend; }
bool JpegBatchDecoder::hardware() const { return impl_->hardware; }
const JpegRoutes& JpegBatchDecoder::last_routes() const { return impl_->routes; }

std::string nvjpeg_version() {
  int major = 0, minor = 0, patch = 0;
  if (nvjpegGetProperty(MAJOR_VERSION, &major) != NVJPEG_STATUS_SUCCESS ||
      nvjpegGetProperty(MINOR_VERSION, &minor) != NVJPEG_STATUS_SUCCESS ||
      nvjpegGetProperty(PATCH_LEVEL, &patch) != NVJPEG_STATUS_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace ringtrain::kernels::cuda
