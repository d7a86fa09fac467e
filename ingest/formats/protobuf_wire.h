// Reading protobuf messages in place: the OTLP and Loki push decoders walk the wire format
// (https://protobuf.dev/programming-guides/encoding/) with the library's own wire parsers instead
// of parsing into generated classes, so that lines and labels are views into the received bytes
// and a record costs no allocation. Tags and varints go through libprotobuf's parse_context.h
// (ReadTag, VarintParse, ReadSize: what its generated parsers use), not a CodedInputStream per
// message: a stream's construction and out-of-line reads were half of the OTLP decoder's time
// (bench/README, "OTLP protobuf with the library's inline parsers").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/parse_context.h>
#include <google/protobuf/wire_format_lite.h>

namespace faultline {

// A message in place: its bytes (at most INT_MAX), and how many bytes after them in the same
// buffer (the fields of the message around it) may be read. The library's parsers read up to 10
// bytes ahead, so only a buffer's last 10 bytes are parsed from a padded copy (a copy for every
// short nested message was a quarter of the OTLP decoder's time). 16 bytes, so that it is passed
// in registers.
struct WireBytes {
  // A buffer of its own (at most INT_MAX bytes: callers check): nothing past its end is read.
  static WireBytes whole(std::string_view buffer) {
    return {buffer.data(), static_cast<uint32_t>(buffer.size()), 0};
  }
  std::string_view view() const { return {data, size}; }

  const char* data = nullptr;
  uint32_t size = 0;
  uint32_t slack = 0;  // readable bytes after the message, counted up to 16
};

// The fields of one message, in wire order. A length-delimited field comes out as a view into the
// message's bytes; a sub-message is read by another WireReader over messageValue(). Of a singular
// field that occurs twice, callers take the last, where a parser would merge the two (writers
// that follow the spec send each once).
class WireReader {
 public:
  using WireFormatLite = google::protobuf::internal::WireFormatLite;
  static constexpr auto kVarint = WireFormatLite::WIRETYPE_VARINT;
  static constexpr auto kFixed64 = WireFormatLite::WIRETYPE_FIXED64;
  static constexpr auto kBytes = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

  explicit WireReader(WireBytes message)
      : p_(message.data), end_(p_ + message.size), buffer_end_(end_ + message.slack) {}

  // Reads the next field: false at the end of the message, or on malformed wire (a bad tag or
  // varint, a length past the end, field number 0; then ok() is false). Groups are skipped whole.
  // Inlined into each caller's loop: about 10% fewer instructions per OTLP record than one shared
  // copy (callgrind of BM_KafkaDecode/2).
  [[gnu::always_inline]] bool next() {
    if (p_ == end_) {
      return false;
    }
    uint32_t tag = 0;
    bool read = parse(
        &tag, [](const char* p, uint32_t* v) { return google::protobuf::internal::ReadTag(p, v); });
    number_ = WireFormatLite::GetTagFieldNumber(tag);
    type_ = WireFormatLite::GetTagWireType(tag);
    read = read && number_ != 0;
    switch (type_) {
      case WireFormatLite::WIRETYPE_VARINT:
        read = read && varint(&number_value_);
        break;
      case WireFormatLite::WIRETYPE_FIXED64:
        read = read && fixed<uint64_t>();
        break;
      case WireFormatLite::WIRETYPE_FIXED32:
        read = read && fixed<uint32_t>();
        break;
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        // ReadSize, as the library's generated parsers read lengths: a length of 2^31 or more
        // is refused, where a 32-bit varint parse would cut 2^32 + 2 to 2.
        uint32_t size = 0;
        read = read && parse(&size, [](const char* p, uint32_t* v) {
                 *v = google::protobuf::internal::ReadSize(&p);
                 return p;
               });
        read = read && size <= static_cast<size_t>(end_ - p_);
        if (read) {
          bytes_value_ = std::string_view(p_, size);
          p_ += size;
        }
        break;
      }
      case WireFormatLite::WIRETYPE_START_GROUP: {  // deprecated; no OTLP or Loki message has one
        google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(p_),
                                                  static_cast<int>(end_ - p_));
        read = read && WireFormatLite::SkipField(&in, tag);
        p_ += in.CurrentPosition();
        break;
      }
      default:
        read = false;
    }
    ok_ = read;
    return read;
  }
  bool ok() const { return ok_; }

  // The field just read: its number, and whether it has the wire type `type`.
  uint32_t number() const { return number_; }
  bool is(WireFormatLite::WireType type) const { return type_ == type; }
  uint64_t numberValue() const { return number_value_; }  // varint, fixed64 or fixed32
  std::string_view bytesValue() const { return bytes_value_; }
  // A length-delimited field read as a message.
  WireBytes messageValue() const {
    const char* end = bytes_value_.data() + bytes_value_.size();
    return {bytes_value_.data(), static_cast<uint32_t>(bytes_value_.size()),
            static_cast<uint32_t>(std::min<ptrdiff_t>(buffer_end_ - end, 16))};
  }

 private:
  // The library's parsers read without a bound (its input streams keep 16 spare bytes past the
  // end): ReadTag up to 5 bytes, VarintParse up to 10. So when fewer than 10 bytes of the buffer
  // are left, they are parsed from a zero-padded copy. A varint cut off by the message's end runs
  // into the padding or the bytes after the message, and is refused for its length.
  template <class T, class Parser>
  bool parse(T* value, Parser parser) {
    const auto left = static_cast<size_t>(end_ - p_);
    const auto readable = static_cast<size_t>(buffer_end_ - p_);
    char tail[10] = {};
    const char* from = p_;
    if (readable < sizeof tail) {
      std::memcpy(tail, p_, readable);
      from = tail;
    }
    const char* to = parser(from, value);
    if (to == nullptr || static_cast<size_t>(to - from) > left) {
      return false;
    }
    p_ += to - from;
    return true;
  }
  template <class T>
  bool varint(T* value) {
    return parse(value,
                 [](const char* p, T* v) { return google::protobuf::internal::VarintParse(p, v); });
  }
  template <class T>
  bool fixed() {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) {
      return false;
    }
    number_value_ = google::protobuf::internal::UnalignedLoad<T>(p_);
    p_ += sizeof(T);
    return true;
  }

  const char* p_;
  const char* end_;
  const char* buffer_end_;
  uint32_t number_ = 0;
  WireFormatLite::WireType type_ = WireFormatLite::WIRETYPE_VARINT;
  uint64_t number_value_ = 0;
  std::string_view bytes_value_;
  bool ok_ = true;
};

// Calls f(WireBytes) for each length-delimited field `number` of `message` (a repeated
// sub-message), in wire order. Returns false on malformed wire or as soon as f returns false.
template <class F>
bool forEachField(WireBytes message, uint32_t number, F&& f) {
  WireReader r(message);
  while (r.next()) {
    if (r.number() == number && r.is(WireReader::kBytes) && !f(r.messageValue())) {
      return false;
    }
  }
  return r.ok();
}

}  // namespace faultline
