// Owns appending to metrics.jsonl without losing a record, and trimming it on resume; see metrics_log.h.
#include "train/metrics_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "common/stderr_print.h"
#include "util/json_text.h"

namespace ringtrain::train {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void unwritable(const fs::path& file, const std::string& why) {
  throw JobFileError(fmt::format("'{}' cannot be written: {}; free space on its file system or pick another "
                                 "run.dir with --set run.dir=...",
                                 file.string(), why));
}

int open_for_append(const fs::path& file, int extra_flags) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | extra_flags, 0644);
  if (fd < 0) unwritable(file, std::strerror(errno));
  return fd;
}

// The lines to keep: job records, and epoch records of the epochs the checkpoint holds; a line that is not a
// JSON object (a torn last line) goes too.
bool keep(const std::string& line, int64_t epochs_done) {
  const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return false;
  if (record.value("kind", std::string()) != "epoch") return true;
  return record.contains("epoch") && record["epoch"].is_number_integer() && record["epoch"].get<int64_t>() <= epochs_done;
}

}  // namespace

MetricsLog::MetricsLog(fs::path file, int fd) : file_(std::move(file)), fd_(fd) {}

MetricsLog::MetricsLog(MetricsLog&& other) noexcept
    : file_(std::move(other.file_)),
      fd_(std::exchange(other.fd_, -1)),
      held_(std::move(other.held_)),
      last_failure_(std::move(other.last_failure_)),
      dropped_(other.dropped_) {}

MetricsLog::~MetricsLog() {
  // A run that ends by an error with records still held (its disk full): one last try, else they go to stderr.
  if (!held_.empty() && !write_held()) {
    stderr_print("ringtrain: {} record(s) could not be written to '{}' ({}); append these lines to it:\n",
               held_.size(), file_.string(), last_failure_);
    for (const std::string& line : held_) stderr_print("{}", line);
    std::fflush(stderr);
  }
  if (fd_ >= 0) ::close(fd_);
}

MetricsLog MetricsLog::start(const fs::path& file) { return MetricsLog(file, open_for_append(file, O_TRUNC)); }

MetricsLog MetricsLog::resume(const fs::path& file, int64_t epochs_done) {
  std::error_code ec;
  // A folder or FIFO in its place is refused before (RunDirectory::check_usable); whatever it is, no size is no text.
  const uintmax_t size = fs::is_regular_file(file, ec) ? fs::file_size(file, ec) : 0;
  std::string text(ec ? 0 : static_cast<size_t>(size), '\0');
  std::ifstream in(file, std::ios::binary);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  std::istringstream lines(text);
  std::string kept;
  int64_t dropped = 0;
  for (std::string line; std::getline(lines, line);)
    if (keep(line, epochs_done))
      kept += line + "\n";
    else
      ++dropped;
  // Rewritten only when something goes (or the last line lacks its newline), through a temporary file.
  if (kept != text) {
    const fs::path tmp = file.string() + ".tmp";
    const int fd = open_for_append(tmp, O_TRUNC);
    const bool written = ::write(fd, kept.data(), kept.size()) == static_cast<ssize_t>(kept.size()) && ::fsync(fd) == 0;
    const int error = errno;
    ::close(fd);
    if (!written) {
      fs::remove(tmp, ec);
      unwritable(file, std::strerror(error));
    }
    fs::rename(tmp, file, ec);
    if (ec) unwritable(file, ec.message());
  }
  MetricsLog log(file, open_for_append(file, 0));
  log.dropped_ = dropped;
  return log;
}

void MetricsLog::append(const nlohmann::ordered_json& record) {
  held_.push_back(util::json_text(record) + "\n");
  const bool was_failing = !last_failure_.empty();
  const size_t before = held_.size();
  if (write_held()) {
    if (was_failing)
      stderr_print("ringtrain: '{}' is writable again: {} held record(s) written\n", file_.string(), before);
    return;
  }
  if (!was_failing)
    stderr_print("ringtrain: cannot append to '{}' ({}); the record is held in memory and written with the next "
                       "one, or at the end of the run\n",
               file_.string(), last_failure_);
  std::fflush(stderr);
}

bool MetricsLog::write_held() {
  if (fd_ < 0) return held_.empty();
  while (!held_.empty()) {
    const std::string& line = held_.front();
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    // A short write is followed by another, which then reports why (a full disk) or finishes the line.
    size_t done = 0;
    ssize_t n = 0;
    while (done < line.size() && (n = ::write(fd_, line.data() + done, line.size() - done)) > 0) done += static_cast<size_t>(n);
    // fdatasync: a full NFS or Lustre server reports the lack of space only when the data is flushed.
    if (done == line.size() && ::fdatasync(fd_) == 0) {
      held_.pop_front();
      continue;
    }
    last_failure_ = std::strerror(n == 0 ? ENOSPC : errno);
    if (end >= 0 && ::ftruncate(fd_, end) != 0) last_failure_ += "; a partial line may remain";
    return false;
  }
  last_failure_.clear();
  return true;
}

void MetricsLog::finish() {
  if (write_held()) return;
  std::string records;
  for (const std::string& line : held_) records += "  " + line;
  throw JobFileError(fmt::format("'{}' cannot be written ({}): {} record(s) of this run are not in it; free space "
                                 "on its file system and append these lines to it:\n{}",
                                 file_.string(), last_failure_, held_.size(), records));
}

}  // namespace ringtrain::train
