// Owns data parallelism through memory the ranks of a node share (dist.reducer = "shared", CPU path): one copy of
// the parameters and of the optimizer's state per node, and each rank's gradients where the node's other ranks
// read them. After backward each rank sums its slice of the gradients over the node's ranks straight from their
// memory (no message, no copy), all-reduces that slice with the ranks that hold the same slice on the other
// nodes, and updates that slice of the parameters; a node barrier then makes the updated copy every rank's.
// Against an all-reduce into every rank's own copy, each rank moves about a node's share of the bytes and runs
// the optimizer over its slice only.
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

  // model::ParameterMemory: collective over the node's ranks.
  float* parameters(int64_t count) override;
  float* gradients(int64_t count) override;
  std::vector<float*> optimizer_state(int arrays, int64_t count) override;
  std::size_t shared_bytes() const override { return shared_bytes_; }
  int sharing_ranks() const override { return node_size_; }

  model::ParameterMemory* parameter_memory() override { return this; }
  void launch(float*, const Bucket&) override {}  // nothing can start before every rank of the node is done
  void progress() override {}
  void wait_all() override;
  model::ParamSlice update_slice(int64_t params) const override;
  void updated() override;
  double sum_over_slices(double mine) override;
  std::vector<StepSpans> settle(int) override { return std::exchange(unsettled_, {}); }
  const char* name() const override { return "node-shared memory"; }
  std::vector<BucketSpan> last_spans() const override { return finished_; }

  int nodes() const { return nodes_; }

 private:
  // A shared window of `count` zero-filled floats on every node rank (every_rank) or on node rank 0 alone;
  // returns each owner's part, in node-rank order.
  std::vector<float*> allocate(int64_t count, bool every_rank);
  void node_barrier();  // with the memory synchronisation MPI's shared windows ask for

  MPI_Comm node_ = MPI_COMM_NULL, across_ = MPI_COMM_NULL;
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
