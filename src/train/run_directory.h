// Owns a run's claim on its run.dir, held by rank 0's process for the life of the run:
// - the lock: `<run.dir>/.ringtrain.lock`, an flock(2) held open, so a second run on the same folder (a fresh
//   start, or a --resume while the first still trains) is refused naming the holder's host and pid. The lock
//   lives on rank 0's node: on NFS, Linux emulates flock with byte-range locks that the server shares across
//   nodes; on Lustre it is shared only when mounted with `-o flock` (with `-o localflock` it covers rank 0's
//   node only). Where the file system refuses locks altogether, the run says so and goes on unguarded.
// - the identity: `<run.dir>/run.json` holds a run id made at a fresh start; every checkpoint carries it, and
//   --resume refuses a checkpoint of another run.
// - replacing: run.overwrite = true moves the earlier run's files into `<run.dir>/replaced-<its id>/` before
//   anything new is written (delete that folder to reclaim its space).
#pragma once
#include <filesystem>
#include <string>

#include "config/job_config.h"

namespace ringtrain::train {

// The files a run writes into run.dir (besides checkpoints/): what "an earlier run" is made of.
bool is_run_file(const std::string& name);

class RunDirectory {
 public:
  // Read-only, before anything is validated or written: throws JobFileError when run.dir cannot be reached,
  // is not a folder, or holds an earlier run that neither --resume nor run.overwrite lets this run use.
  static void check_usable(const config::JobConfig& job, bool resume);
  // The run id run.dir's run.json holds, or "" when it has none (a run of an older ringtrain); read-only.
  static std::string recorded_run_id(const std::filesystem::path& dir);

  // Claims run.dir: creates it (and checkpoints/), takes the lock, then for a fresh start moves an earlier run
  // aside and writes run.json with a new run id; for --resume keeps the recorded id. Throws JobFileError.
  RunDirectory(const config::JobConfig& job, bool resume);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::string& run_id() const { return run_id_; }
  // Where the earlier run's files went, or empty: for the run header.
  const std::filesystem::path& moved_aside() const { return moved_aside_; }
  // Why run.dir could not be locked ("" when it is): the file system refused locks.
  const std::string& unlocked_because() const { return unlocked_because_; }

 private:
  [[noreturn]] void unusable_here(const std::string& why) const;  // JobFileError naming run.dir, with the way out
  void lock();
  void move_earlier_run_aside();
  void remove_checkpoint_temporaries() const;
  void write_identity(const config::JobConfig& job);

  std::filesystem::path dir_;
  bool resume_ = false;
  int lock_fd_ = -1;
  int lock_attempts_ = 0;  // lock(): files lost to a run ending between our open and our lock
  std::string run_id_;
  std::filesystem::path moved_aside_;
  std::string unlocked_because_;
};

}  // namespace ringtrain::train
