// Owns run.dir's lock, identity and the moving aside of an earlier run; see run_directory.h.
#include "train/run_directory.h"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/path_probe.h"
#include "util/json_text.h"

namespace ringtrain::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLockFile = ".ringtrain.lock";
constexpr const char* kIdentityFile = "run.json";
const char* const kPickAnother = "pick a writable folder with --set run.dir=...";
// A resume needs this folder, whose checkpoints it continues from: another folder would hold none.
const char* const kMakeUsable =
    "make it usable by the user that runs ringtrain (chmod, chown, or run as the user that wrote it), then --resume "
    "again: its checkpoints are what the run continues from";

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("?");
}

std::string utc_now() { return fmt::format("{:%Y%m%dT%H%M%SZ}", fmt::gmtime(std::time(nullptr))); }

// Sortable by start time, unique by its random tail.
std::string new_run_id() {
  std::random_device entropy;
  return fmt::format("{}-{:08x}", utc_now(), entropy());
}

[[noreturn]] void unusable(const fs::path& dir, const std::string& why, bool resume) {
  throw JobFileError(fmt::format("run.dir '{}' {}; {}", dir.string(), why, resume ? kMakeUsable : kPickAnother));
}

[[noreturn]] void refuse_to_replace(const fs::path& dir) {
  throw JobFileError(fmt::format("run.dir '{}' already holds a run (metrics.jsonl); choose another with "
                                 "--set run.dir=..., or --set run.overwrite=true to replace it (its files are "
                                 "moved into run.dir/replaced-<id>/)",
                                 dir.string()));
}

[[noreturn]] void in_use(const fs::path& dir, const std::string& holder) {
  throw JobFileError(fmt::format("run.dir '{}' is in use by another run ({}); wait for it to end, or give this "
                                 "run its own folder with --set run.dir=...",
                                 dir.string(), holder.empty() ? "its holder did not say who it is" : holder));
}

// What the lock file says of the run holding it, from a file descriptor on it.
std::string holder_text(int fd) {
  std::string holder(512, '\0');
  const ssize_t got = ::pread(fd, holder.data(), holder.size(), 0);
  holder.resize(got > 0 ? static_cast<size_t>(got) : 0);
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder;
}

// What the lock file says of the running job holding the folder's lock, if one does: a shared lock tried for an
// instant and let go. A lock file left by a run that was killed is held by no one.
std::optional<std::string> running_job_holding(const fs::path& dir) {
  const int fd = ::open((dir / kLockFile).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK)
    holder = holder_text(fd);
  else
    (void)::flock(fd, LOCK_UN);
  ::close(fd);
  return holder;
}

}  // namespace

bool is_run_file(const std::string& name) {
  static const char* const exact[] = {"metrics.jsonl", "job.resolved.toml", "versions.json", kIdentityFile, "gpu.jsonl"};
  for (const char* e : exact)
    if (name == e) return true;
  return name.starts_with("events.out.tfevents.") || (name.starts_with("trace-rank") && name.ends_with(".json")) ||
         (name.starts_with("gpu-rank") && name.ends_with(".jsonl"));
}

void RunDirectory::check_usable(const config::JobConfig& job, bool resume) {
  const fs::path dir = job.run.dir;
  // A run writes and moves files in its folder: not among a file system root's own.
  if (const fs::path whole = fs::absolute(dir).lexically_normal(); whole == whole.root_path())
    unusable(dir, "is the file system's root; a run needs a folder of its own", resume);
  const PathProbe probe = probe_path(dir);
  if (probe.kind == PathProbe::Kind::missing) return;
  if (probe.kind != PathProbe::Kind::directory)
    unusable(dir, probe.kind == PathProbe::Kind::regular ? "is a file, not a folder" : probe.describe(), resume);
  // A folder a job is training in is refused as such first: the advice for a finished run (run.overwrite) or for a
  // run without checkpoints (start without --resume) would point at files in use.
  if (const auto holder = running_job_holding(dir)) in_use(dir, *holder);
  const PathProbe metrics = probe_path(dir / "metrics.jsonl");
  if (metrics.kind == PathProbe::Kind::unreachable) unusable(dir, "cannot be read: " + metrics.reason, resume);
  if (metrics.exists() && metrics.kind != PathProbe::Kind::regular)
    throw JobFileError(fmt::format("run.dir '{}' holds a metrics.jsonl that {}, where a run keeps its records in a file; "
                                   "move it out of the way, then run again",
                                   dir.string(), metrics.describe()));
  if (!resume && metrics.exists() && !job.run.overwrite) refuse_to_replace(dir);
}

std::string RunDirectory::recorded_run_id(const fs::path& dir) {
  const PathProbe probe = probe_path(dir / kIdentityFile);
  if (probe.kind != PathProbe::Kind::regular || probe.size > (1 << 16)) return "";
  std::ifstream in(dir / kIdentityFile);
  const auto identity = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return identity.is_object() && identity.contains("run_id") && identity["run_id"].is_string()
             ? identity["run_id"].get<std::string>()
             : std::string();
}

RunDirectory::RunDirectory(const config::JobConfig& job, bool resume) : dir_(job.run.dir), resume_(resume) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) unusable_here("cannot be created: " + ec.message());
  lock();
  // Asked again under the lock: a run that ended since check_usable looked is a run all the same.
  if (!resume && !job.run.overwrite && probe_path(dir_ / "metrics.jsonl").exists()) refuse_to_replace(dir_);
  if (!resume) move_earlier_run_aside();
  run_id_ = resume ? recorded_run_id(dir_) : std::string();
  if (run_id_.empty()) write_identity(job);  // a fresh start, or resuming a run that predates run.json
  fs::create_directories(dir_ / "checkpoints", ec);
  if (ec) unusable_here(fmt::format("cannot hold '{}': {}", (dir_ / "checkpoints").string(), ec.message()));
  // Found now rather than at the first checkpoint, after the training before it.
  if (::access((dir_ / "checkpoints").c_str(), W_OK | X_OK) != 0)
    unusable_here(fmt::format("cannot take checkpoints: '{}' is not writable ({})", (dir_ / "checkpoints").string(),
                              std::strerror(errno)));
  remove_checkpoint_temporaries();
}

// A checkpoint's write killed before its rename leaves ckpt-s*.h5.tmp, a whole checkpoint's size, that no later write
// may share a name with; under the run's lock no other job is writing one.
void RunDirectory::remove_checkpoint_temporaries() const {
  std::error_code ec;
  for (fs::directory_iterator it(dir_ / "checkpoints", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code ignored;
    if (name.starts_with("ckpt-s") && name.ends_with(".h5.tmp")) fs::remove(it->path(), ignored);
  }
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ < 0) return;
  // Unlinked while still held: a later run never finds a lock file some process still holds.
  std::error_code ignored;
  fs::remove(dir_ / kLockFile, ignored);
  ::close(lock_fd_);
}

void RunDirectory::unusable_here(const std::string& why) const { unusable(dir_, why, resume_); }

void RunDirectory::lock() {
  const fs::path file = dir_ / kLockFile;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) unusable_here(fmt::format("is not writable ({}: {})", kLockFile, std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error != EWOULDBLOCK) {  // ENOLCK, EOPNOTSUPP, ...: this file system keeps no locks
      unlocked_because_ = std::strerror(error);
      ::close(fd);
      return;
    }
    const std::string holder = holder_text(fd);
    ::close(fd);
    in_use(dir_, holder);
  }
  // The run before this one unlinks the file while still holding it (~RunDirectory): a lock won on a file no
  // longer at the path guards nothing, since a third run can create and lock a new one. Then lock the new one.
  struct stat held {}, named {};
  errno = 0;  // what follows sets it only where a call fails
  if (::fstat(fd, &held) != 0 || ::stat(file.c_str(), &named) != 0 || held.st_ino != named.st_ino ||
      held.st_dev != named.st_dev) {
    const int error = errno;
    ::close(fd);
    if (error != 0 && error != ENOENT)
      unusable_here(fmt::format("is not usable ({}: {})", kLockFile, std::strerror(error)));
    if (++lock_attempts_ > 100) unusable_here(fmt::format("keeps losing its lock file {}", kLockFile));
    return lock();
  }
  lock_fd_ = fd;
  const std::string holder = fmt::format("host {}, pid {}, since {}\n", host_name(), ::getpid(), utc_now());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size()))
    unusable_here(fmt::format("is not writable ({}: {})", kLockFile, std::strerror(errno)));
}

void RunDirectory::move_earlier_run_aside() {
  std::vector<fs::path> earlier;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool checkpoints = name == "checkpoints" && !fs::is_empty(it->path(), ec);
    if (is_run_file(name) || checkpoints) earlier.push_back(it->path());
  }
  if (ec) unusable_here("cannot be read: " + ec.message());
  if (earlier.empty()) return;
  // The checkpoints first and run.json last: a move cut short by a kill leaves no checkpoint a --resume would take
  // for the replaced run, and the run's id in place, so the next start moves the rest into the same folder.
  std::stable_partition(earlier.begin(), earlier.end(), [](const fs::path& f) { return f.filename() == "checkpoints"; });
  std::stable_partition(earlier.begin(), earlier.end(), [](const fs::path& f) { return f.filename() != kIdentityFile; });
  const std::string id = recorded_run_id(dir_);
  const auto holds_none_of_these = [&](const fs::path& folder) {
    return std::none_of(earlier.begin(), earlier.end(),
                        [&](const fs::path& f) { return fs::exists(folder / f.filename(), ec); });
  };
  fs::path target = dir_ / ("replaced-" + (id.empty() ? utc_now() : id));
  for (int n = 2; fs::exists(target, ec) && (id.empty() || !holds_none_of_these(target)); ++n)
    target = dir_ / fmt::format("replaced-{}-{}", id.empty() ? utc_now() : id, n);
  fs::create_directories(target, ec);
  if (ec) unusable_here(fmt::format("cannot hold '{}' for the earlier run's files: {}", target.string(), ec.message()));
  for (const fs::path& file : earlier) {
    fs::rename(file, target / file.filename(), ec);
    if (ec)
      unusable_here(fmt::format("cannot move the earlier run's '{}' into '{}': {}", file.filename().string(),
                                 target.string(), ec.message()));
  }
  moved_aside_ = target;
}

void RunDirectory::write_identity(const config::JobConfig& job) {
  run_id_ = new_run_id();
  const nlohmann::ordered_json identity{
      {"run_id", run_id_}, {"started", utc_now()}, {"host", host_name()}, {"job", job.source.string()}};
  const fs::path file = dir_ / kIdentityFile, tmp = dir_ / (std::string(kIdentityFile) + ".tmp");
  {
    std::ofstream out(tmp);
    out << util::json_text(identity, 2) << "\n";
    if (!out.flush()) unusable_here(fmt::format("is not writable ({}: {})", tmp.string(), std::strerror(errno)));
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) unusable_here(fmt::format("is not writable ({}: {})", file.string(), ec.message()));
}

}  // namespace ringtrain::train
