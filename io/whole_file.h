// Owns writing a small output file (an ONNX model, evaluate's JSON, run.dir's records) whole or not at all: it is
// written under `<path>.<pid>.tmp` (a name no user file and no other process has), flushed, synced and renamed, and a failure (a full disk, a folder in the way)
// removes the temporary, so neither a half-written file nor a stray `.tmp` is left, and an earlier file at the
// path stays as it was.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace ringtrain::io {

// "" once `bytes` are at `path`; otherwise the system's reason ("No space left on device", "is a folder"), for the
// caller to name its flag or key and the fix.
std::string write_whole_file(const std::filesystem::path& path, std::string_view bytes) noexcept;

// A name beside `path` that no user file and no other process has: `<path>.<pid>.tmp`.
std::filesystem::path temporary_beside(const std::filesystem::path& path);

// Whether `a` and `b` name one file (links and relative names included); false where either does not exist.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) noexcept;

}  // namespace ringtrain::io
