// Owns the TFRecord framing and the hand-encoded Event protobuf.
#include "obs/tensorboard_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/crc32c.h"
#include "common/stderr_print.h"

namespace ringtrain::obs {
namespace {

static_assert(std::endian::native == std::endian::little, "protobuf and TFRecord fixed-width fields are little-endian");

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <class T>
void fixed(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

// A length-delimited field (wire type 2).
void bytes_field(std::string& out, int field, const std::string& payload) {
  varint(out, static_cast<uint64_t>(field) << 3 | 2);
  varint(out, payload.size());
  out += payload;
}

double wall_time_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Event fields: 1 wall_time (double), 2 step (int64), 3 file_version (string), 5 summary (Summary), 7 session_log.
std::string event_head(int64_t step) {
  std::string e;
  varint(e, 1 << 3 | 1);
  fixed(e, wall_time_s());
  varint(e, 2 << 3 | 0);
  varint(e, static_cast<uint64_t>(step));
  return e;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir, int64_t purge_from) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  file_ = dir / fmt::format("events.out.tfevents.{}.{}.{}", static_cast<int64_t>(wall_time_s()), host, ::getpid());
  out_.open(file_, std::ios::binary | std::ios::trunc);
  if (!out_)
    throw JobFileError(fmt::format("cannot create the TensorBoard file {}: {}; check that run.dir is writable, or set "
                                   "run.tensorboard = false",
                                   file_.string(), std::strerror(errno)));
  std::string e = event_head(0);
  bytes_field(e, 3, "brain.Event:2");
  record(e, 0);
  if (purge_from >= 0) {
    std::string session_log;  // SessionLog: 1 status (enum; START = 1)
    varint(session_log, 1 << 3 | 0);
    varint(session_log, 1);
    std::string start = event_head(purge_from);
    bytes_field(start, 7, session_log);  // Event field 7: session_log
    record(start, purge_from);
  }
}

void TensorBoardWriter::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;  // Summary.Value: 1 tag (string), 2 simple_value (float)
    bytes_field(v, 1, tag);
    varint(v, 2 << 3 | 5);
    fixed(v, static_cast<float>(value));
    bytes_field(summary, 1, v);
  }
  std::string e = event_head(step);
  bytes_field(e, 5, summary);
  record(e, step);
}

// TFRecord: uint64 length, masked CRC of the length, the data, masked CRC of the data.
void TensorBoardWriter::record(const std::string& event, int64_t step) {
  if (stopped_) return;
  std::string framed;
  fixed(framed, static_cast<uint64_t>(event.size()));
  fixed(framed, masked_crc32c(framed.data(), 8));
  framed += event;
  fixed(framed, masked_crc32c(event.data(), event.size()));
  out_.write(framed.data(), static_cast<std::streamsize>(framed.size()));
  if (out_.flush()) {
    written_ += static_cast<std::streamoff>(framed.size());
    return;
  }
  const int error = errno;
  stopped_ = true;
  out_.close();
  std::error_code ec;
  std::filesystem::resize_file(file_, static_cast<uintmax_t>(written_), ec);  // no torn record for TensorBoard
  stderr_print("ringtrain: cannot write the TensorBoard file {} ({}); its curves stop at step {}, and "
                     "metrics.jsonl keeps every record\n",
             file_.string(), std::strerror(error), step);
  std::fflush(stderr);
}

}  // namespace ringtrain::obs
