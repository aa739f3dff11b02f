// Owns data parallelism through memory the ranks of a node share (dist.reducer = "shared", CPU path): one copy of
// the parameters and of the optimizer's state per node, and each rank's gradients where the node's other ranks
// read them. After backward each rank sums its slice of the gradients over the node's ranks straight from their
// memory (no message, no copy), all-reduces that slice with the ranks that hold the same slice on the other
// nodes, and updates that slice of the parameters; a node barrier then makes the updated copy every rank's.
// Against an all-reduce into every rank's own copy, each rank moves about a node's share of the bytes and runs
// the optimizer over its slice only. Each rank is the first to touch its slice of every window (its own part of
// the gradients' one), so on a node of several sockets the pages it updates every step are on its own socket.
#pragma once
#include <mpi.h>

#include <memory>
#include <utility>
#include <vector>

#include "dist/gradient_reducer.h"
#include "dist/mpi_gradient_reducer.h"
#include "dist/wire_format.h"

namespace ringtrain::dist {

class NodeSharedReducer final : public GradientReducer, public model::ParameterMemory {
 public:
  // Collective over `world`. `node_ranks` > 0 groups that many ranks of a node per shared copy (emulated nodes,
  // for tests); 0 shares among all of a node's ranks. Every group must be of the same size (JobFileError).
  // `wire` is what the slice's all-reduce between nodes sends.
  NodeSharedReducer(MPI_Comm world, int node_ranks, WireFormat wire);
  ~NodeSharedReducer() override;
  NodeSharedReducer(const NodeSharedReducer&) = delete;
  NodeSharedReducer& operator=(const NodeSharedReducer&) = delete;

  // model::ParameterMemory. The three allocations are collective over the world: every rank of the world first
  // agrees (dist::agree_on_errors) that set-up got this far, so a rank whose set-up failed before, and waits in
  // World::all_succeed's agreement, makes every rank throw its error here instead of leaving its node's other
  // ranks waiting for it in the window's collective; and again on the window's outcome.
  float* parameters(int64_t count) override;
  float* gradients(int64_t count) override;
  std::vector<float*> optimizer_state(int arrays, int64_t count) override;
  void publish() override { node_barrier(); }
  std::size_t shared_bytes() const override { return shared_bytes_; }
  int sharing_ranks() const override { return node_size_; }
  bool first_sharer() const override { return node_rank_ == 0; }

  model::ParameterMemory* parameter_memory() override { return this; }
  void launch(float*, const Bucket&) override {}  // nothing can start before every rank of the node is done
  void progress() override {}
  void wait_all() override;
  model::ParamSlice update_slice(int64_t params) const override;
  void updated() override;
  double sum_over_slices(double mine) override;
  std::vector<StepSpans> settle(int) override;
  const char* name() const override { return "node-shared memory"; }
  std::vector<BucketSpan> last_spans() const override { return finished_; }

  int nodes() const { return nodes_; }
  // The wait_all calls whose spans this reducer, and the one between nodes inside it, hold for settle() (tests:
  // what memory grows by each step that nothing settles).
  std::size_t held_steps() const;

 private:
  // A shared window of `count` floats for every node rank (every_rank) or for node rank 0 alone, agreed on by the
  // world's ranks before and after (see parameters()); returns each owner's part, in node-rank order, untouched.
  std::vector<float*> open_window(int64_t count, bool every_rank);
  void check_room(double window_bytes) const;  // agreed before a window's collective
  void check_window(int rc, MPI_Aint bytes, double window_bytes, MPI_Win window);  // and after it
  // Zeroes this rank's slice of each of the `arrays` arrays `stride` floats apart from `first`: the first touch
  // of those pages, which places them on this rank's socket.
  void zero_slice(float* first, int arrays, int64_t stride) const;
  void node_barrier();  // with the memory synchronisation MPI's shared windows ask for

  MPI_Comm world_ = MPI_COMM_NULL, node_ = MPI_COMM_NULL, across_ = MPI_COMM_NULL;
  int node_rank_ = 0, node_size_ = 1, nodes_ = 1;
  std::vector<MPI_Win> windows_;
  std::vector<float*> node_grads_;  // each node rank's gradients, in node-rank order
  model::ParamSlice slice_;
  int64_t params_ = -1;
  std::size_t shared_bytes_ = 0;
  std::unique_ptr<MpiGradientReducer> across_nodes_;  // the slice's all-reduce between nodes; null on one node
  std::vector<BucketSpan> finished_;
  std::vector<StepSpans> unsettled_;
};

}  // namespace ringtrain::dist
