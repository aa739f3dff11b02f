// Owns decoding one protocol-buffer message by hand, the reading twin of proto_message.h: the fields of a byte
// range one at a time (varints, 32- and 64-bit words, length-delimited bytes), every length and varint checked
// against the range, so a damaged or hostile file ends in a ProtoError, never a read past its end.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ringtrain::io {

struct ProtoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ProtoField {
  int number = 0;
  int wire_type = 0;      // 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit
  uint64_t value = 0;     // varint, 64-bit and 32-bit fields
  std::string_view bytes; // length-delimited fields (strings, messages, packed numbers)
  float float32() const {
    float f;
    const auto bits = static_cast<uint32_t>(value);
    std::memcpy(&f, &bits, 4);  // little-endian, as the writer assumes
    return f;
  }
};

class ProtoReader {
 public:
  explicit ProtoReader(std::string_view message) : at_(message.data()), end_(message.data() + message.size()) {}
  bool done() const { return at_ == end_; }
  // The next field; ProtoError where the bytes end inside it or its wire type is none of the four above.
  ProtoField next() {
    const uint64_t key = varint();
    ProtoField f;
    f.number = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    switch (f.wire_type) {
      case 0: f.value = varint(); break;
      case 1: f.value = word(8); break;
      case 5: f.value = word(4); break;
      case 2: {
        const uint64_t length = varint();
        if (length > static_cast<uint64_t>(end_ - at_)) throw ProtoError("a field's length runs past the message's end");
        f.bytes = std::string_view(at_, static_cast<size_t>(length));
        at_ += length;
        break;
      }
      default: throw ProtoError("a field of wire type " + std::to_string(f.wire_type) + ", which ONNX files never hold");
    }
    return f;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ == end_) throw ProtoError("the message ends inside a number");
      const auto byte = static_cast<uint8_t>(*at_++);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    throw ProtoError("a number longer than ten bytes");
  }

 private:
  uint64_t word(int bytes) {
    if (end_ - at_ < bytes) throw ProtoError("the message ends inside a fixed-size number");
    uint64_t v = 0;
    std::memcpy(&v, at_, static_cast<size_t>(bytes));
    at_ += bytes;
    return v;
  }
  const char* at_;
  const char* end_;
};

}  // namespace ringtrain::io
