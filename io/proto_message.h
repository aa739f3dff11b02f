// Owns encoding one protocol-buffer message by hand (varints, length-delimited fields, 32-bit floats): the ONNX
// file is a handful of message kinds, which do not justify a protobuf dependency and its generated code.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ringtrain::io {

class ProtoMessage {
 public:
  ProtoMessage& varint(int field, uint64_t value) {
    key(field, 0);
    put_varint(value);
    return *this;
  }
  ProtoMessage& bytes(int field, std::string_view value) {
    key(field, 2);
    put_varint(value.size());
    bytes_.append(value);
    return *this;
  }
  ProtoMessage& message(int field, const ProtoMessage& value) { return bytes(field, value.bytes_); }
  ProtoMessage& float32(int field, float value) {
    key(field, 5);
    char raw[4];
    std::memcpy(raw, &value, 4);  // little-endian on every machine ringtrain builds for
    bytes_.append(raw, 4);
    return *this;
  }
  const std::string& encoded() const { return bytes_; }

 private:
  void key(int field, int wire_type) { put_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type)); }
  void put_varint(uint64_t v) {
    for (; v >= 0x80; v >>= 7) bytes_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    bytes_.push_back(static_cast<char>(v));
  }
  std::string bytes_;
};

}  // namespace ringtrain::io
