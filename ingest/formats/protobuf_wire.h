// Reading protobuf messages in place: the OTLP and Loki push decoders walk the wire format
// (https://protobuf.dev/programming-guides/encoding/) with the library's own wire parsers instead
// of parsing into generated classes, so that lines and labels are views into the received bytes
// and a record costs no allocation. Tags and varints go through libprotobuf's parse_context.h
// (ReadTag, VarintParse: what its generated parsers use), not a CodedInputStream per message: a
// stream's construction and out-of-line reads were half of the OTLP decoder's time (bench/README,
// "OTLP protobuf with the library's inline parsers").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/parse_context.h>
#include <google/protobuf/wire_format_lite.h>

namespace faultline {

// The fields of one message held in `bytes` (at most INT_MAX bytes), in wire order. A
// length-delimited field comes out as a view into `bytes`; a sub-message is read by another
// WireReader over that view. Of a singular field that occurs twice, callers take the last, where
// a parser would merge the two (writers that follow the spec send each once).
class WireReader {
 public:
  using WireFormatLite = google::protobuf::internal::WireFormatLite;
  static constexpr auto kVarint = WireFormatLite::WIRETYPE_VARINT;
  static constexpr auto kFixed64 = WireFormatLite::WIRETYPE_FIXED64;
  static constexpr auto kBytes = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

  explicit WireReader(std::string_view bytes)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

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
        uint32_t size = 0;
        read = read && varint(&size);
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

 private:
  // The library's parsers read without a bound (its input streams keep 16 spare bytes past the
  // end): ReadTag up to 5 bytes, VarintParse up to 10. So when fewer than 10 bytes are left, they
  // are parsed from a zero-padded copy: a varint cut off by the end then ends in the padding and
  // is refused for its length.
  template <class T, class Parser>
  bool parse(T* value, Parser parser) {
    const auto left = static_cast<size_t>(end_ - p_);
    char tail[10] = {};
    const char* from = p_;
    if (left < sizeof tail) {
      std::memcpy(tail, p_, left);
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
  uint32_t number_ = 0;
  WireFormatLite::WireType type_ = WireFormatLite::WIRETYPE_VARINT;
  uint64_t number_value_ = 0;
  std::string_view bytes_value_;
  bool ok_ = true;
};

// Calls f(bytes) for each length-delimited field `number` of `message` (a repeated sub-message),
// in wire order. Returns false on malformed wire or as soon as f returns false.
template <class F>
bool forEachField(std::string_view message, uint32_t number, F&& f) {
  WireReader r(message);
  while (r.next()) {
    if (r.number() == number && r.is(WireReader::kBytes) && !f(r.bytesValue())) {
      return false;
    }
  }
  return r.ok();
}

}  // namespace faultline
