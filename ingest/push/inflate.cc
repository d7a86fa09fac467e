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

bool isGzip(std::string_view in) {
  return in.size() >= 2 && static_cast<uint8_t>(in[0]) == 0x1f &&
         static_cast<uint8_t>(in[1]) == 0x8b;
}

// Decompresses the stream(s) of `in` into out[0, capacity): kOk with *size, kTooLarge when the
// output does not fit (the caller grows it), kCorrupt.
InflateResult inflateInto(libdeflate_decompressor* d, std::string_view in, bool gzip, char* out,
                          size_t capacity, size_t* size) {
  size_t used = 0;
  size_t written = 0;
  do {  // gzip members one after another; zlib is one stream
    size_t in_bytes = 0;
    size_t out_bytes = 0;
    const auto r =
        gzip ? libdeflate_gzip_decompress_ex(d, in.data() + used, in.size() - used, out + written,
                                             capacity - written, &in_bytes, &out_bytes)
             : libdeflate_zlib_decompress_ex(d, in.data() + used, in.size() - used, out + written,
                                             capacity - written, &in_bytes, &out_bytes);
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
    const InflateResult r = inflateInto(d.get(), in, gzip, out->data(), capacity, &size);
    if (r == InflateResult::kTooLarge && capacity < max_bytes) {
      capacity = std::min(capacity * 4, max_bytes);
      continue;
    }
    out->resize(size);  // keeps the capacity
    return r;
  }
}

}  // namespace faultline
