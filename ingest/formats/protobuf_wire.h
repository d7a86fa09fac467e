// Reading protobuf messages in place: the OTLP and Loki push decoders walk the wire format
// (https://protobuf.dev/programming-guides/encoding/) with the library's CodedInputStream instead
// of parsing into generated classes, so that lines and labels are views into the received bytes
// and a record costs no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

namespace faultline {

// The fields of one message held in `bytes` (at most INT_MAX bytes, CodedInputStream's limit),
// in wire order. A length-delimited field comes out as a view into `bytes`; a sub-message is read
// by another WireReader over that view. Of a singular field that occurs twice, callers take the
// last, where a parser would merge the two (writers that follow the spec send each once).
class WireReader {
 public:
  using WireFormatLite = google::protobuf::internal::WireFormatLite;
  static constexpr auto kVarint = WireFormatLite::WIRETYPE_VARINT;
  static constexpr auto kFixed64 = WireFormatLite::WIRETYPE_FIXED64;
  static constexpr auto kBytes = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

  explicit WireReader(std::string_view bytes)
      : bytes_(bytes),
        in_(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size())) {}

  // Reads the next field: false at the end of the message, or on malformed wire (a bad tag or
  // varint, a length past the end, field number 0; then ok() is false). Groups are skipped whole.
  bool next() {
    if (static_cast<size_t>(in_.CurrentPosition()) == bytes_.size()) {
      return false;
    }
    const uint32_t tag = in_.ReadTag();
    number_ = WireFormatLite::GetTagFieldNumber(tag);
    type_ = WireFormatLite::GetTagWireType(tag);
    bool read = number_ != 0;
    switch (type_) {
      case WireFormatLite::WIRETYPE_VARINT:
        read = read && in_.ReadVarint64(&number_value_);
        break;
      case WireFormatLite::WIRETYPE_FIXED64:
        read = read && in_.ReadLittleEndian64(&number_value_);
        break;
      case WireFormatLite::WIRETYPE_FIXED32: {
        uint32_t v = 0;
        read = read && in_.ReadLittleEndian32(&v);
        number_value_ = v;
        break;
      }
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t size = 0;
        read = read && in_.ReadVarint32(&size);
        const auto at = static_cast<size_t>(in_.CurrentPosition());
        read = read && size <= bytes_.size() - at;
        if (read) {
          bytes_value_ = bytes_.substr(at, size);
          in_.Skip(static_cast<int>(size));
        }
        break;
      }
      case WireFormatLite::WIRETYPE_START_GROUP:
        read = read && WireFormatLite::SkipField(&in_, tag);
        break;
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
  std::string_view bytes_;
  google::protobuf::io::CodedInputStream in_;
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
