// Owns the NCCL communicator's life (bootstrap over MPI, bounded waits, abort on failure) and the bucketed
// gradient all-reduce on the communication stream.
#include "backend/cuda/nccl_reducer.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <deque>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/nccl_communicator.h"
#include "common/error.h"
#include "common/process_label.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_check.h"
#include "model/step_capturer.h"
#include "util/clock.h"

namespace ringtrain::backend {
namespace {

// "4.00 KiB", "25.00 MiB": the size of `floats` fp32 values, for messages.
std::string size_text(int64_t floats) {
  const double bytes = static_cast<double>(floats) * sizeof(float);
  return bytes < (1 << 20) ? fmt::format("{:.2f} KiB", bytes / (1 << 10)) : fmt::format("{:.2f} MiB", bytes / (1 << 20));
}

struct Launch {
  int64_t begin = 0, count = 0;
  CudaEvent ready, done;  // on the compute stream when the bucket is final; on the comm stream when reduced
  // A graphed round's (gpu.cuda_graphs): external records beside ready and done, which every replay records. In a
  // capture, ready and done are only the graph's edges between the streams, which no replay records for the host.
  CudaEvent ready_timer, done_timer;
  cudaEvent_t ready_mark() const { return ready_timer ? ready_timer.get() : ready.get(); }
  cudaEvent_t done_mark() const { return done_timer ? done_timer.get() : done.get(); }
};

// One step's reductions: queued by launch(), closed by wait_all(), waited for on the host by settle(). A round's
// events are reused only once it has settled, so a round still in flight keeps its own.
struct Round {
  std::vector<Launch> launches;
  size_t launched = 0;
  CudaEvent compute_end, comm_end;  // compute's and communication's position when the round was closed
  // gpu.cuda_graphs: the StepRunner slot whose graph holds this round (-1: an eager round), and the external
  // records beside compute_end and comm_end (Launch's timers).
  int graph_slot = -1;
  CudaEvent compute_timer, comm_timer;
  cudaEvent_t compute_mark() const { return compute_timer ? compute_timer.get() : compute_end.get(); }
  cudaEvent_t comm_mark() const { return comm_timer ? comm_timer.get() : comm_end.get(); }
};

constexpr int kIdBytes = 256;  // "host|pci bus id" per rank, for the shared-GPU check

}  // namespace

std::string emulated_host_id(const std::string& host, int rank) { return fmt::format("{}/rank{}", host, rank); }

struct NcclGradientReducer::Impl {
  CudaBackend& backend;
  cudaStream_t compute = nullptr;
  double timeout_s = 300;
  int rank = 0, size = 1;
  CudaStream stream;
  ncclComm_t nccl = nullptr;
  Round open;                  // the step whose buckets launch() is queueing
  std::deque<Round> in_flight;  // closed by wait_all(), not yet settled, oldest first
  std::vector<Round> spare;     // settled rounds whose events are reused
  CudaEvent order;              // compute -> comm ordering for broadcast
  double exposed_s = 0;
  std::vector<dist::BucketSpan> spans;  // the last settled round's buckets
  config::WireFormat wire = config::WireFormat::fp32;
  model::DeviceBuffer wire_buffer;  // bf16 copies of the gradients, at their offsets in the flat buffer
  // gpu.cuda_graphs: each StepRunner slot's round, captured into its graph and replayed with it; home here while
  // not in flight (its compute_end set), so a slot's events are reused only once its last replay settled.
  std::vector<Round> graph_rounds;
  std::optional<CommunicatorAbort> abort_hook;  // set once the communicator exists

  // Where a bucket's bf16 copy goes. Buckets are cut from the end of the flat buffer, so the first one launched
  // reaches its end: the buffer is made then, once, as large as every later bucket needs.
  uint16_t* wire_copy(const dist::Bucket& bucket) {
    const auto end = static_cast<size_t>(bucket.begin + bucket.count);
    if (!wire_buffer) wire_buffer = backend.allocate(end * sizeof(uint16_t));
    if (end * sizeof(uint16_t) > wire_buffer.bytes())
      throw Error(ExitCode::internal, "a gradient bucket reaches past the first one launched");
    return wire_buffer.as<uint16_t>() + bucket.begin;
  }

  Round new_round() {
    if (!spare.empty()) {
      Round r = std::move(spare.back());
      spare.pop_back();
      r.launched = 0;
      return r;
    }
    return Round{{}, 0, make_event(true), make_event(true), -1, {}, {}};
  }
  bool busy() const { return open.launched > 0 || !in_flight.empty(); }
  // The slot's round, at home (made at its first capture); an internal error while its last step is in flight.
  Round& graph_round(int slot) {
    if (slot < 0 || slot >= model::kStepCaptureSlots)
      throw Error(ExitCode::internal, fmt::format("gradient reductions for step graph slot {}", slot));
    if (graph_rounds.empty()) graph_rounds.resize(static_cast<size_t>(model::kStepCaptureSlots));
    Round& r = graph_rounds[static_cast<size_t>(slot)];
    if (r.graph_slot < 0) {
      r = Round{{}, 0, make_event(true), make_event(true), slot, make_event(true), make_event(true)};
    } else if (!r.compute_end) {
      throw Error(ExitCode::internal, fmt::format("step graph slot {} reused while its last step's gradient "
                                                  "reductions were in flight",
                                                  slot));
    }
    return r;
  }

  explicit Impl(CudaBackend& b) : backend(b) {}

  // The step graphs go first: NCCL's end of a communicator waits until no graph holds work of it.
  void abort() noexcept {
    backend.drop_step_graphs();
    if (nccl) (void)ncclCommAbort(nccl);
    nccl = nullptr;
  }
  [[noreturn]] void fault(const std::string& message) {
    abort_every_communicator();  // this one's among them
    throw FaultError(message);
  }
  // A call on the non-blocking communicator, waited for while in progress (nccl_communicator.h).
  void settle(ncclResult_t result, const char* call, const char* file, int line, const std::string& what) {
    settle_call(nccl, result, call, file, line, what, timeout_s);
  }

  // Throws FaultError (after aborting) when NCCL reports an asynchronous error; `describe` names the work.
  template <class Describe>
  void check_async(Describe describe) {
    if (!nccl) return;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(nccl, &state);
    const ncclResult_t result = asked != ncclSuccess ? asked : state;
    if (result != ncclSuccess && result != ncclInProgress)
      fault(fmt::format("NCCL failed during {} on {}: {}; the communicator was aborted", describe(), process_label(),
                        nccl_words(result)));
  }

  static std::string unfinished(const Round& r) {
    for (size_t i = 0; i < r.launched; ++i)
      if (cudaEventQuery(r.launches[i].done_mark()) != cudaSuccess)
        return fmt::format("the all-reduce of gradient bucket {} of {} of a step (floats [{}, {}), {})", i, r.launched,
                           r.launches[i].begin, r.launches[i].begin + r.launches[i].count,
                           size_text(r.launches[i].count));
    return fmt::format("the {} gradient all-reduces of a step", r.launched);
  }
  std::string unfinished() const {
    for (const Round& r : in_flight)
      if (cudaEventQuery(r.comm_mark()) != cudaSuccess) return unfinished(r);
    return unfinished(open);
  }

  // The host waits for `event` (and `also`, if given), checking NCCL's error state and the deadline as it goes.
  template <class Describe>
  void wait_for(cudaEvent_t event, cudaEvent_t also, Describe describe) {
    wait_for_events_within({event, also}, timeout_s, describe, [&] { check_async(describe); });
  }
};

#define RT_NCCL_SETTLE(call, what) impl_->settle((call), #call, __FILE__, __LINE__, (what))

NcclGradientReducer::NcclGradientReducer(MPI_Comm comm, CudaBackend& backend, double collective_timeout_s,
                                         config::WireFormat wire)
    : impl_(std::make_unique<Impl>(backend)) {
  Impl& s = *impl_;
  s.wire = wire;
  s.compute = backend.stream();
  s.timeout_s = collective_timeout_s;
  RT_MPI_CALL(MPI_Comm_rank(comm, &s.rank));
  RT_MPI_CALL(MPI_Comm_size(comm, &s.size));

  if (backend.shares_device() && std::getenv("NCCL_HOSTID") == nullptr)
    ::setenv("NCCL_HOSTID", emulated_host_id(backend.host(), s.rank).c_str(), 1);
  // NCCL cannot put two ranks of one host on one GPU; find out here, on every rank alike, and say which ranks and
  // GPU (unless the GPU is shared on purpose, each rank a host of its own to NCCL).
  char mine[kIdBytes] = {};
  const std::string id = (backend.shares_device() ? std::string(std::getenv("NCCL_HOSTID")) : backend.host()) + "|" +
                         backend.pci_bus_id();
  std::strncpy(mine, id.c_str(), kIdBytes - 1);
  std::vector<char> all(static_cast<size_t>(kIdBytes) * static_cast<size_t>(s.size));
  RT_MPI_CALL(MPI_Allgather(mine, kIdBytes, MPI_CHAR, all.data(), kIdBytes, MPI_CHAR, comm));
  for (int i = 0; i < s.size; ++i)
    for (int j = i + 1; j < s.size; ++j) {
      const char* a = all.data() + static_cast<size_t>(i) * kIdBytes;
      if (std::strncmp(a, all.data() + static_cast<size_t>(j) * kIdBytes, kIdBytes) == 0)
        throw JobFileError(fmt::format("ranks {} and {} would share GPU {} (host|PCI bus); NCCL needs one GPU per "
                                       "rank: start at most one rank per GPU on each node, or set run.device = \"cpu\"",
                                       i, j, a));
    }

  const ncclUniqueId unique_id = shared_unique_id(comm);
  s.stream = make_stream();
  s.order = make_event(false);
  // The backend already made its device current (cudaSetDevice comes before every other CUDA call).
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so initialisation and every call can be waited on with a deadline
  ncclComm_t c = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&c, s.size, unique_id, s.rank, &config);
  s.nccl = c;
  // Initialisation gets at least kNcclInitTimeoutS even under a short collective timeout.
  const double collective_timeout = s.timeout_s;
  s.timeout_s = std::max(s.timeout_s, kNcclInitTimeoutS);
  s.abort_hook.emplace([&s] { s.abort(); });
  RT_NCCL_SETTLE(started, fmt::format("NCCL initialisation of {} ranks", s.size));
  s.timeout_s = collective_timeout;
}

NcclGradientReducer::~NcclGradientReducer() {
  Impl& s = *impl_;
  if (!s.nccl) return;
  // While unwinding from an error, or with reductions never waited for, peers may be gone: never wait on them.
  if (std::uncaught_exceptions() > 0 || s.busy()) {
    s.abort();
    return;
  }
  impl_->backend.drop_step_graphs();  // NCCL's end of a communicator waits until no graph holds work of it
  close_communicator(s.nccl);
  s.nccl = nullptr;
}

void NcclGradientReducer::launch(float* grads, const dist::Bucket& bucket) {
  Impl& s = *impl_;
  if (!s.nccl) throw Error(ExitCode::internal, "gradient all-reduce after the NCCL communicator was aborted");
  if (!s.open.compute_end) s.open = s.new_round();
  Round& r = s.open;
  // Timing events: they also date each bucket's reduction for the trace (spans).
  if (r.launched == r.launches.size()) r.launches.push_back({0, 0, make_event(true), make_event(true), {}, {}});
  Launch& l = r.launches[r.launched];
  const bool graphed = r.graph_slot >= 0;
  if (graphed && !l.ready_timer) {
    l.ready_timer = make_event(true);
    l.done_timer = make_event(true);
  }
  l.begin = bucket.begin;
  l.count = bucket.count;
  // The bucket's gradients are final once the compute stream reaches this point; the all-reduce starts there,
  // while backward goes on with earlier layers.
  // A graphed round's timer goes first: in a capture, the record of `ready` is the fork, and only nodes before it
  // order the all-reduce, so a timer recorded after it would be unordered with the span it starts.
  if (graphed) record_replayed(l.ready_timer, s.compute);
  CUDA_CHECK(cudaEventRecord(l.ready, s.compute));
  CUDA_CHECK(cudaStreamWaitEvent(s.stream, l.ready, 0));
  float* p = grads + bucket.begin;
  const std::string what =
      fmt::format("queueing the all-reduce of gradient bucket {} ({})", r.launched, size_text(bucket.count));
  if (s.wire == config::WireFormat::bf16) {
    uint16_t* w = s.wire_copy(bucket);
    kernels::cuda::float_to_bf16(bucket.count, p, w, s.stream);
    RT_NCCL_SETTLE(ncclAllReduce(w, w, static_cast<size_t>(bucket.count), ncclBfloat16, ncclSum, s.nccl, s.stream),
                   what);
    kernels::cuda::bf16_to_float(bucket.count, w, p, s.stream);
  } else {
    RT_NCCL_SETTLE(ncclAllReduce(p, p, static_cast<size_t>(bucket.count), ncclFloat, ncclSum, s.nccl, s.stream), what);
  }
  CUDA_CHECK(cudaEventRecord(l.done, s.stream));
  if (graphed) record_replayed(l.done_timer, s.stream);
  ++r.launched;
}

void NcclGradientReducer::progress() {
  impl_->check_async([&] { return impl_->unfinished(); });
}

void NcclGradientReducer::wait_all() {
  Impl& s = *impl_;
  if (!s.open.compute_end) s.open = s.new_round();  // a step that reduced nothing still has its round
  Round& r = s.open;
  // The timers before the plain records: in a capture, comm_end is the join of the communication stream, and a
  // node recorded on that stream after it would be left out of the join (cudaErrorStreamCaptureUnjoined).
  if (r.graph_slot >= 0) {
    record_replayed(r.compute_timer, s.compute);
    record_replayed(r.comm_timer, s.stream);
  }
  CUDA_CHECK(cudaEventRecord(r.compute_end, s.compute));
  CUDA_CHECK(cudaEventRecord(r.comm_end, s.stream));
  // Device-side order: everything queued on the compute stream from now on (the update) reads summed gradients.
  // The host does not wait here; settle() does, with a deadline.
  CUDA_CHECK(cudaStreamWaitEvent(s.compute, r.comm_end, 0));
  s.in_flight.push_back(std::move(r));
  s.open = Round{};
}

std::vector<dist::StepSpans> NcclGradientReducer::settle(int steps_in_flight) {
  Impl& s = *impl_;
  std::vector<dist::StepSpans> settled;
  while (static_cast<int>(s.in_flight.size()) > std::max(steps_in_flight, 0)) {
    Round& r = s.in_flight.front();
    s.wait_for(r.comm_mark(), r.compute_mark(), [&] { return Impl::unfinished(r); });
    // Device times are measured back from comm_end: on the host clock to within the polling interval when the
    // host waited for it here, later than true by however long ago it completed otherwise.
    const double host_end = util::now_s();
    s.spans.clear();
    for (size_t i = 0; i < r.launched; ++i) {
      float ready_ms = 0, done_ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ready_ms, r.launches[i].ready_mark(), r.comm_mark()));
      CUDA_CHECK(cudaEventElapsedTime(&done_ms, r.launches[i].done_mark(), r.comm_mark()));
      s.spans.push_back({static_cast<int>(i), r.launches[i].count, host_end - static_cast<double>(ready_ms) / 1e3,
                         host_end - static_cast<double>(done_ms) / 1e3});
    }
    settled.push_back(s.spans);
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, r.compute_mark(), r.comm_mark()));
    s.exposed_s = std::max(0.0, static_cast<double>(ms) / 1e3);
    if (r.graph_slot >= 0)
      s.graph_rounds.at(static_cast<size_t>(r.graph_slot)) = std::move(r);
    else
      s.spare.push_back(std::move(r));
    s.in_flight.pop_front();
  }
  return settled;
}

// The slot's round becomes the open one: launch() and wait_all() record into the capture as into any step, with
// external timers beside the events that only order the streams there.
void NcclGradientReducer::capture_step(int slot) {
  Impl& s = *impl_;
  if (s.open.launched > 0)
    throw Error(ExitCode::internal, "a step captured while the last one's gradient reductions were still open");
  Round& home = s.graph_round(slot);
  home.launched = 0;
  s.open = std::move(home);
}

void NcclGradientReducer::replayed_step(int slot) {
  Impl& s = *impl_;
  if (s.open.launched > 0)
    throw Error(ExitCode::internal, "a step replayed while the last one's gradient reductions were still open");
  s.in_flight.push_back(std::move(s.graph_round(slot)));
}

void NcclGradientReducer::broadcast_params(float* params, int64_t count) {
  Impl& s = *impl_;
  if (!s.nccl) throw Error(ExitCode::internal, "broadcast after the NCCL communicator was aborted");
  if (count <= 0) return;
  const std::string what = fmt::format("the broadcast of {} floats ({}) from rank 0", count, size_text(count));
  CUDA_CHECK(cudaEventRecord(s.order, s.compute));
  CUDA_CHECK(cudaStreamWaitEvent(s.stream, s.order, 0));
  RT_NCCL_SETTLE(ncclBroadcast(params, params, static_cast<size_t>(count), ncclFloat, 0, s.nccl, s.stream), what);
  CudaEvent broadcast_end = make_event(false);
  CUDA_CHECK(cudaEventRecord(broadcast_end, s.stream));
  s.wait_for(broadcast_end, nullptr, [&] { return what; });
  CUDA_CHECK(cudaStreamWaitEvent(s.compute, broadcast_end, 0));
}

double NcclGradientReducer::last_exposed_s() const { return impl_->exposed_s; }
std::vector<dist::BucketSpan> NcclGradientReducer::last_spans() const { return impl_->spans; }
kernels::cuda::Stream NcclGradientReducer::comm_stream() const { return impl_->stream.get(); }
int NcclGradientReducer::ranks() const { return impl_->size; }

}  // namespace ringtrain::backend
