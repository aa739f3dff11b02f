// Owns MPI start-up and shutdown, node-local rank discovery, and cross-rank agreement on setup errors.
#include "dist/world.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <utility>
#include <vector>

#include "common/process_label.h"
#include "dist/collective_watch.h"
#include "dist/end_job.h"
#include "dist/mpi_check.h"
#include "dist/open_mpi_defaults.h"
#include "dist/rank_cores.h"

namespace ringtrain::dist {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error code {}", code);
  return std::string(text, static_cast<size_t>(length));
}

World::World(int* argc, char*** argv) {
  apply_open_mpi_defaults();
  int provided = 0, initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  // A process that initialised MPI itself (a test's main) also finalizes it.
  owns_mpi_ = initialized == 0;
  // MULTIPLE: the watchdog thread sends heartbeats while the main thread is inside collectives.
  if (owns_mpi_) MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_comm_));
  MPI_CHECK(MPI_Comm_rank(local_comm_, &local_rank_));
  MPI_CHECK(MPI_Comm_size(local_comm_, &local_size_));
  cores_ = cores_of_this_rank(local_comm_);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &length));
  host_.assign(name, static_cast<size_t>(length));
  set_process_label(rank_, size_, host_);
}

World::~World() {
  // Destructors must not throw; a failing finalize at exit is reported and ignored.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // by the process that initialised MPI, which freed everything with it
  if (local_comm_ != MPI_COMM_NULL) MPI_Comm_free(&local_comm_);
  if (owns_mpi_ && MPI_Finalize() != MPI_SUCCESS) std::fprintf(stderr, "warning: MPI_Finalize failed\n");
}

namespace {

std::string broadcast_text(MPI_Comm comm, std::string text, int root) {
  long long length = static_cast<long long>(text.size());
  MPI_CHECK(MPI_Bcast(&length, 1, MPI_LONG_LONG, root, comm));
  text.resize(static_cast<size_t>(length));
  if (length > 0) MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comm));
  return text;
}

// Who met the error, when not every rank did: the speaking rank's label and the failing ranks (world ranks).
std::string failure_origin(MPI_Comm comm, int speaker, bool failed) {
  int size = 0, rank = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const int mine = !failed ? -1 : process_rank() >= 0 ? process_rank() : rank;
  std::vector<int> world_ranks(static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, world_ranks.data(), 1, MPI_INT, comm));
  const std::string speaker_label = broadcast_text(comm, process_label(), speaker);
  std::erase(world_ranks, -1);
  if (static_cast<int>(world_ranks.size()) == size) return {};
  constexpr size_t listed = 16;
  std::string ranks;
  for (size_t i = 0; i < std::min(listed, world_ranks.size()); ++i) ranks += fmt::format("{}{}", i ? ", " : "", world_ranks[i]);
  if (world_ranks.size() > listed) ranks += ", ...";
  return fmt::format("{}; {} of {} ranks failed: {}", speaker_label, world_ranks.size(), size, ranks);
}

}  // namespace

void agree_on_errors(MPI_Comm comm, const std::function<void()>& step) {
  int code = 0;
  std::string message;
  try {
    step();
  } catch (const AgreedError&) {
    throw;  // every rank of the job throws it here already (a nested agreement): nothing left to agree on
  } catch (const Error& e) {
    code = static_cast<int>(e.code());
    message = e.what();
  } catch (const std::exception& e) {
    code = static_cast<int>(ExitCode::internal);
    message = e.what();
  }
  const CollectiveWait wait("agreement that a set-up step succeeded on every rank");
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  // Lowest failing rank speaks for all: its message and code are what every rank reports.
  const bool failed_here = code != 0;
  const int my_candidate = failed_here ? rank : INT_MAX;
  int speaker = INT_MAX;
  MPI_CHECK(MPI_Allreduce(&my_candidate, &speaker, 1, MPI_INT, MPI_MIN, comm));
  if (speaker == INT_MAX) return;
  MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, speaker, comm));
  message = broadcast_text(comm, std::move(message), speaker);
  std::string origin = failure_origin(comm, speaker, failed_here);
  throw AgreedError(static_cast<ExitCode>(code), message, std::move(origin));
}

void World::abort(ExitCode code) const { end_job(static_cast<int>(code), /*use_mpi=*/true); }

void World::barrier() const {
  const CollectiveWait wait("barrier");
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

void World::broadcast(void* data, int bytes, int root) const {
  const CollectiveWait wait("broadcast");
  MPI_CHECK(MPI_Bcast(data, bytes, MPI_BYTE, root, MPI_COMM_WORLD));
}

void World::broadcast_floats(float* data, long long count, int root) const {
  const CollectiveWait wait("broadcast of arrays");
  for (long long offset = 0; offset < count; offset += INT_MAX / 2) {
    const int chunk = static_cast<int>(std::min<long long>(count - offset, INT_MAX / 2));
    MPI_CHECK(MPI_Bcast(data + offset, chunk, MPI_FLOAT, root, MPI_COMM_WORLD));
  }
}

long long World::min_across(long long value) const {
  const CollectiveWait wait("minimum over the ranks");
  long long result = 0;
  MPI_CHECK(MPI_Allreduce(&value, &result, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD));
  return result;
}

long long World::max_across(long long value) const {
  const CollectiveWait wait("maximum over the ranks");
  long long result = 0;
  MPI_CHECK(MPI_Allreduce(&value, &result, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD));
  return result;
}

double World::sum_across(double value) const {
  const CollectiveWait wait("sum over the ranks");
  double result = 0;
  MPI_CHECK(MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return result;
}

void World::sum_across(int64_t* values, int count) const {
  const CollectiveWait wait("sum over the ranks");
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
}

void World::sum_across(double* values, int count) const {
  const CollectiveWait wait("sum over the ranks");
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

std::string World::broadcast_string(const std::string& value, int root) const {
  const CollectiveWait wait("broadcast");
  return broadcast_text(MPI_COMM_WORLD, value, root);
}

}  // namespace ringtrain::dist
