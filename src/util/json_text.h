// Owns turning a JSON value into text for ringtrain's records and outputs. Class names come from folder names and
// files, and paths from the file system: bytes that need not be UTF-8, which JSON text must be. They are written
// with U+FFFD in place of each invalid byte rather than failing the run at its first record.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace ringtrain::util {

// `indent` as nlohmann::json::dump's: -1 one line, n >= 0 that many spaces a level.
inline std::string json_text(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}
inline std::string json_text(const nlohmann::ordered_json& value, int indent = -1) {
  return value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace ringtrain::util
