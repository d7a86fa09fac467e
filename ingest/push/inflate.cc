#include "ingest/push/inflate.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>

#include <libdeflate.h>

namespace faultline {
namespace {

struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

enum class Container { kGzip, kZlib, kRaw };

bool isGzip(std::string_view in) {
  return in.size() >= 2 && static_cast<uint8_t>(in[0]) == 0x1f &&
         static_cast<uint8_t>(in[1]) == 0x8b;
}

// A zlib header (RFC 1950 2.2): CM 8 (deflate), a window of at most 32 KiB, no preset dictionary,
// and FCHECK making the two bytes a multiple of 31.
bool isZlib(std::string_view in) {
  if (in.size() < 2) {
    return false;
  }
  const auto cmf = static_cast<uint8_t>(in[0]);
  const auto flg = static_cast<uint8_t>(in[1]);
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && (flg & 0x20) == 0 && (cmf * 256 + flg) % 31 == 0;
}

// Decompresses the stream(s) of `in` into out[0, capacity): kOk with *size, kTooLarge when the
// output does not fit (the caller grows it), kCorrupt.
InflateResult inflateInto(libdeflate_decompressor* d, std::string_view in, Container container,
                          char* out, size_t capacity, size_t* size) {
  size_t used = 0;
  size_t written = 0;
  const bool gzip = container == Container::kGzip;
  do {  // gzip members one after another; zlib and raw deflate are one stream
    size_t in_bytes = 0;
    size_t out_bytes = 0;
    const char* from = in.data() + used;
    const size_t from_size = in.size() - used;
    const size_t room = capacity - written;
    libdeflate_result r = LIBDEFLATE_BAD_DATA;
    switch (container) {
      case Container::kGzip:
        r = libdeflate_gzip_decompress_ex(d, from, from_size, out + written, room, &in_bytes,
                                          &out_bytes);
        break;
      case Container::kZlib:
        r = libdeflate_zlib_decompress_ex(d, from, from_size, out + written, room, &in_bytes,
                                          &out_bytes);
        break;
      case Container::kRaw:
        r = libdeflate_deflate_decompress_ex(d, from, from_size, out + written, room, &in_bytes,
                                             &out_bytes);
        break;
    }
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
      return InflateResult::kTooLarge;
    }
    if (r != LIBDEFLATE_SUCCESS) {
      return InflateResult::kCorrupt;
    }
    used += in_bytes;
    written += out_bytes;
  } while (gzip && used < in.size() && isGzip(in.substr(used)));
  *size = written;
  return used == in.size() ? InflateResult::kOk : InflateResult::kCorrupt;
}

}  // namespace

InflateResult inflateBody(std::string_view in, size_t max_bytes, size_t padding, std::string* out) {
  const bool gzip = isGzip(in);
  // HTTP's `deflate` is zlib format (RFC 9110 8.4.1.2), but Loki reads it as raw deflate (Go's
  // compress/flate), so clients written against Loki send that.
  Container container = gzip ? Container::kGzip : isZlib(in) ? Container::kZlib : Container::kRaw;
  // A gzip trailer states the last member's size modulo 2^32: right for one member under 4 GiB,
  // and a first guess otherwise.
  size_t capacity = in.size() * 4;
  if (gzip && in.size() >= 18) {
    uint32_t isize = 0;
    for (size_t i = 0; i < 4; ++i) {
      isize |= uint32_t{static_cast<uint8_t>(in[in.size() - 4 + i])} << (8 * i);  // little endian
    }
    capacity = isize;
  }
  capacity = std::min(std::max<size_t>(capacity, 4096), max_bytes);
  const std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> d(
      libdeflate_alloc_decompressor());
  if (!d) {
    throw std::bad_alloc();
  }
  for (;;) {
    *out = std::string(capacity + padding, '\0');  // exactly: resize() would grow it twofold
    size_t size = 0;
    const InflateResult r = inflateInto(d.get(), in, container, out->data(), capacity, &size);
    if (r == InflateResult::kTooLarge && capacity < max_bytes) {
      capacity = std::min(capacity * 4, max_bytes);
      continue;
    }
    if (r == InflateResult::kCorrupt && container == Container::kZlib) {
      container = Container::kRaw;  // raw deflate whose first two bytes pass for a zlib header
      continue;
    }
    out->resize(size);  // keeps the capacity
    return r;
  }
}

}  // namespace faultline
