// Owns the node-shared copy of the parameters: its windows, the slices, the sum and the barriers.
#include "dist/node_shared_reducer.h"

#include <fmt/format.h>

#include <cstring>
#include <exception>

#include "common/error.h"
#include "common/host_memory.h"
#include "dist/collective_watch.h"
#include "dist/mpi_check.h"
#include "dist/shared_window_checks.h"
#include "dist/world.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/node_sum.h"
#include "util/clock.h"

namespace ringtrain::dist {
namespace {

constexpr std::size_t kAlignment = 64;  // whole cache lines, as the CPU backend's own buffers
constexpr const char* kNonblockingInstead =
    "or use dist.reducer = \"nonblocking\" (each rank its own copy in its own memory)";

// Every group the same size, or every rank throws the same error.
void require_equal_groups(MPI_Comm world, int group_size) {
  int smallest = 0, largest = 0;
  MPI_CHECK(MPI_Allreduce(&group_size, &smallest, 1, MPI_INT, MPI_MIN, world));
  MPI_CHECK(MPI_Allreduce(&group_size, &largest, 1, MPI_INT, MPI_MAX, world));
  if (smallest != largest)
    throw JobFileError(fmt::format("dist.reducer = \"shared\" needs as many ranks on every node, but this job has "
                                   "nodes with {} and with {}; place the ranks evenly (mpirun --map-by ppr:N:node, "
                                   "srun --ntasks-per-node=N) or use dist.reducer = \"nonblocking\"",
                                   smallest, largest));
}

// dist.node_ranks splits each host's ranks into groups of that many, so it must divide them; every rank throws alike.
void require_dividing_node_ranks(MPI_Comm world, int node_ranks, int host_ranks) {
  int misfit = node_ranks > 0 && (host_ranks % node_ranks != 0) ? host_ranks : 0, worst = 0;
  MPI_CHECK(MPI_Allreduce(&misfit, &worst, 1, MPI_INT, MPI_MAX, world));
  if (worst > 0)
    throw JobFileError(fmt::format("'dist.node_ranks' = {} must divide the ranks of every host, but one has {}; set "
                                   "it to a divisor of the ranks per host (0: all of a host's ranks share one copy)",
                                   node_ranks, worst));
}

// Rank `r`'s slice of `count` parameters among `ranks`: on decay-mask words, as even as that allows; the last
// rank's ends at the last parameter.
model::ParamSlice slice_of(int64_t count, int r, int ranks) {
  const auto edge = [&](int k) {
    if (k == ranks) return count;
    return count * k / ranks / model::kSliceAlignment * model::kSliceAlignment;
  };
  return {edge(r), edge(r + 1) - edge(r)};
}

// The reducer was set up for `held` parameters; a call for another count is a bug in its caller.
void require_parameters(int64_t held, int64_t asked, const char* what) {
  if (asked != held)
    throw Error(ExitCode::internal, fmt::format("the node-shared reducer holds {} parameters, but {} for {} were "
                                                "asked for", held, what, asked));
}

}  // namespace

NodeSharedReducer::NodeSharedReducer(MPI_Comm world, int node_ranks, WireFormat wire) : world_(world) {
  const CollectiveWait wait("splitting the ranks into nodes for the shared parameter copy");
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_Comm host = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host));
  int host_rank = 0, host_ranks = 0;
  MPI_CHECK(MPI_Comm_rank(host, &host_rank));
  MPI_CHECK(MPI_Comm_size(host, &host_ranks));
  try {
    require_dividing_node_ranks(world, node_ranks, host_ranks);
  } catch (...) {
    MPI_Comm_free(&host);
    throw;
  }
  MPI_CHECK(MPI_Comm_split(host, node_ranks > 0 ? host_rank / node_ranks : 0, rank, &node_));
  MPI_CHECK(MPI_Comm_free(&host));
  MPI_CHECK(MPI_Comm_rank(node_, &node_rank_));
  MPI_CHECK(MPI_Comm_size(node_, &node_size_));
  require_equal_groups(world, node_size_);
  MPI_CHECK(MPI_Comm_split(world, node_rank_, rank, &across_));
  MPI_CHECK(MPI_Comm_size(across_, &nodes_));
  if (nodes_ > 1) across_nodes_ = std::make_unique<MpiGradientReducer>(across_, wire);
}

NodeSharedReducer::~NodeSharedReducer() {
  // The frees are collective: while an exception unwinds, the other ranks may never come (this rank failed alone
  // and is about to end the job), so the windows are left to the end of the process.
  if (std::uncaught_exceptions() > 0) return;
  const CollectiveWait wait("freeing the node's shared parameter memory");
  for (MPI_Win& w : windows_) {
    MPI_Win_unlock_all(w);
    MPI_Win_free(&w);
  }
  across_nodes_.reset();
  if (across_ != MPI_COMM_NULL) MPI_Comm_free(&across_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

std::vector<float*> NodeSharedReducer::open_window(int64_t count, bool every_rank) {
  const bool owner = every_rank || node_rank_ == 0;
  const auto bytes = static_cast<MPI_Aint>(owner ? sizeof(float) * static_cast<std::size_t>(count) + kAlignment : 0);
  const double window_bytes = static_cast<double>(bytes) * (every_rank ? node_size_ : 1);
  check_room(window_bytes);
  MPI_Info info = MPI_INFO_NULL;
  MPI_CHECK(MPI_Info_create(&info));
  MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));  // each rank's part on its own pages
  void* base = nullptr;
  MPI_Win window = MPI_WIN_NULL;
  const int rc = MPI_Win_allocate_shared(bytes, 1, info, node_, &base, &window);
  MPI_Info_free(&info);
  check_window(rc, bytes, window_bytes, window);
  windows_.push_back(window);
  // Errors in the window's calls come back to MPI_CHECK, as the communicators' do (dist/world.cpp).
  MPI_CHECK(MPI_Win_set_errhandler(window, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window));
  std::vector<float*> parts;
  for (int r = 0; r < (every_rank ? node_size_ : 1); ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    void* part = nullptr;
    MPI_CHECK(MPI_Win_shared_query(window, r, &size, &unit, &part));
    // The same offset in every process: the window's pages are mapped at page-aligned addresses.
    const auto address = reinterpret_cast<std::uintptr_t>(part);
    parts.push_back(reinterpret_cast<float*>((address + kAlignment - 1) / kAlignment * kAlignment));
  }
  shared_bytes_ += sizeof(float) * static_cast<std::size_t>(count) * parts.size();
  return parts;
}

// The world's ranks agree before the node's meet in the window's collective (see node_shared_reducer.h). Node rank 0
// creates the window's backing file: where that fails inside MPI, Open MPI returns the error to it alone and the
// node's other ranks wait inside the collective for good, so it checks the room first.
void NodeSharedReducer::check_room(double window_bytes) const {
  agree_on_errors(world_, [&] {
    if (node_rank_ != 0) return;
    if (const std::string why = why_no_room_for_window(window_bytes); !why.empty())
      throw JobFileError(fmt::format("dist.reducer = \"shared\": the node's shared copy cannot be placed: {}; give "
                                     "it room, or point OMPI_MCA_osc_sm_backing_directory where there is, {}",
                                     why, kNonblockingInstead));
  });
}

// The window's outcome, and (once, on the first window) its memory model, agreed on by the world's ranks: the
// same error on every rank wherever one of them failed.
void NodeSharedReducer::check_window(int rc, MPI_Aint bytes, double window_bytes, MPI_Win window) {
  const bool first = windows_.empty();
  agree_on_errors(world_, [&] {
    if (rc != MPI_SUCCESS)
      throw JobFileError(fmt::format(
          "dist.reducer = \"shared\": MPI_Win_allocate_shared ({} for this rank's part, {} for the window; {} "
          "rank{} share the node's) failed: {}; the shared copy lives where Open MPI keeps shared windows "
          "(OMPI_MCA_osc_sm_backing_directory, /dev/shm unless set): give it room, {}",
          byte_size_text(static_cast<double>(bytes)), byte_size_text(window_bytes), node_size_,
          node_size_ == 1 ? "" : "s", mpi_error_string(rc), kNonblockingInstead));
    if (!first) return;
    if (const std::string why = why_not_unified(window); !why.empty())
      throw JobFileError(fmt::format("dist.reducer = \"shared\" reads and writes the node's copy as plain memory, "
                                     "but {}; {}",
                                     why, kNonblockingInstead));
  });
}

void NodeSharedReducer::zero_slice(float* first, int arrays, int64_t stride) const {
  for (int a = 0; a < arrays; ++a)
    std::memset(first + a * stride + slice_.begin, 0, sizeof(float) * static_cast<std::size_t>(slice_.count));
}

float* NodeSharedReducer::parameters(int64_t count) {
  params_ = count;
  slice_ = slice_of(count, node_rank_, node_size_);
  float* copy = open_window(count, false).front();
  zero_slice(copy, 1, 0);
  node_barrier();
  return copy;
}

float* NodeSharedReducer::gradients(int64_t count) {
  require_parameters(params_, count, "gradients");
  node_grads_ = open_window(count, true);
  float* mine = node_grads_[static_cast<std::size_t>(node_rank_)];
  std::memset(mine, 0, sizeof(float) * static_cast<std::size_t>(count));
  node_barrier();
  return mine;
}

std::vector<float*> NodeSharedReducer::optimizer_state(int arrays, int64_t count) {
  require_parameters(params_, count, "optimizer state");
  const int64_t stride = (count + 15) / 16 * 16;  // each array on whole cache lines, as open_window's own
  float* all = open_window(stride * arrays, false).front();
  zero_slice(all, arrays, stride);
  node_barrier();
  std::vector<float*> each;
  for (int a = 0; a < arrays; ++a) each.push_back(all + a * stride);
  return each;
}

void NodeSharedReducer::node_barrier() {
  const CollectiveWait wait("barrier of the node's ranks on the shared parameter copy");
  for (MPI_Win w : windows_) MPI_CHECK(MPI_Win_sync(w));
  MPI_CHECK(MPI_Barrier(node_));
  for (MPI_Win w : windows_) MPI_CHECK(MPI_Win_sync(w));
}

void NodeSharedReducer::wait_all() {
  if (node_grads_.empty())
    throw Error(ExitCode::internal, "the node-shared reducer reduced before the network placed its gradients in it");
  const double begin = util::now_s();
  node_barrier();  // every rank's gradients are final
  kernels::cpu::sum_slice_and_clear(node_grads_, static_cast<std::size_t>(node_rank_), slice_.begin, slice_.count,
                                    kernels::cpu::compute_threads());
  if (across_nodes_) {
    across_nodes_->launch(node_grads_[static_cast<std::size_t>(node_rank_)], {slice_.begin, slice_.count});
    across_nodes_->wait_all();
  }
  finished_ = {BucketSpan{0, slice_.count, begin, util::now_s()}};
  unsettled_.push_back(finished_);
}

// The slice's all-reduce between nodes keeps the spans it saw for a settle of its own; this reducer reports the
// step's one span itself, so they are let go here rather than held for the whole run.
std::vector<StepSpans> NodeSharedReducer::settle(int) {
  if (across_nodes_) (void)across_nodes_->settle(0);
  return std::exchange(unsettled_, {});
}

std::size_t NodeSharedReducer::held_steps() const {
  return unsettled_.size() + (across_nodes_ ? across_nodes_->held_steps() : 0);
}

model::ParamSlice NodeSharedReducer::update_slice(int64_t params) const {
  require_parameters(params_, params, "an update");
  return slice_;
}

void NodeSharedReducer::updated() { node_barrier(); }

// Gathered and added in node-rank order on every rank, rather than MPI_SUM, whose order MPI leaves open: every rank
// must find the same global norm and so clip alike. The slices of a node cover every parameter, and each node
// holds the same sums after the all-reduce between nodes.
double NodeSharedReducer::sum_over_slices(double mine) {
  std::vector<double> each(static_cast<std::size_t>(node_size_));
  const CollectiveWait wait("sum of the node's gradient slices");
  MPI_CHECK(MPI_Allgather(&mine, 1, MPI_DOUBLE, each.data(), 1, MPI_DOUBLE, node_));
  double sum = 0;
  for (const double v : each) sum += v;
  return sum;
}

}  // namespace ringtrain::dist
