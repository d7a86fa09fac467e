#include "ingest/push/inflate.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include <boost/crc.hpp>
#include <libdeflate.h>
#include <snappy.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_decompressBound (exported by libzstd 1.5)
#include <zstd.h>
#include <zstd_errors.h>

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

struct ZstdDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// The framing format's stream identifier chunk (snappy's framing_format.txt, 4.1).
constexpr std::string_view kSnappyStreamIdentifier("\xff\x06\x00\x00sNaPpY", 10);
constexpr size_t kSnappyMaxChunkBytes = 65536;  // uncompressed, per data chunk (4.2, 4.3)

// The little-endian 32-bit number at the start of `s` (at least 4 bytes).
uint32_t le32(std::string_view s) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) {
    v |= uint32_t{static_cast<uint8_t>(s[i])} << (8 * i);
  }
  return v;
}

// The CRC-32C (Castagnoli) of `data`, masked as the framing format stores it (section 3).
uint32_t maskedCrc32c(const char* data, size_t size) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, size);
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8;
}

// Calls f(type, payload) for each chunk of the framed stream `in` (the identifier chunk
// included); false if a chunk's header or length runs past the end, or f returns false.
template <typename F>
bool forEachSnappyChunk(std::string_view in, F f) {
  size_t pos = 0;
  while (pos < in.size()) {
    if (in.size() - pos < 4) {
      return false;
    }
    const auto type = static_cast<uint8_t>(in[pos]);
    const size_t length = le32(in.substr(pos, 4)) >> 8;  // 24-bit little-endian length
    pos += 4;
    if (length > in.size() - pos || !f(type, in.substr(pos, length))) {
      return false;
    }
    pos += length;
  }
  return true;
}

InflateResult snappyFramed(std::string_view in, size_t max_bytes, size_t padding,
                           std::string* out) {
  // First the decompressed size, from the chunks' headers, so that the output is allocated
  // once, exactly, and never past max_bytes.
  size_t total = 0;
  bool too_large = false;
  const bool well_formed = forEachSnappyChunk(in, [&](uint8_t type, std::string_view payload) {
    size_t n = 0;
    if (type == 0xff) {
      return payload == kSnappyStreamIdentifier.substr(4);
    }
    if (type == 0x00 || type == 0x01) {
      if (payload.size() < 4) {
        return false;
      }
      payload.remove_prefix(4);  // the CRC
      n = payload.size();
      if (type == 0x00 && !snappy::GetUncompressedLength(payload.data(), payload.size(), &n)) {
        return false;
      }
      if (n > kSnappyMaxChunkBytes) {
        return false;
      }
    } else if (type < 0x80) {
      return false;  // reserved unskippable (4.5); 0x80-0xfe are skipped
    }
    total += n;
    too_large = too_large || total > max_bytes;
    return true;
  });
  if (too_large) {
    return InflateResult::kTooLarge;
  }
  if (!well_formed) {
    return InflateResult::kCorrupt;
  }
  *out = std::string(total + padding, '\0');
  size_t written = 0;
  const bool ok = forEachSnappyChunk(in, [&](uint8_t type, std::string_view payload) {
    if (type != 0x00 && type != 0x01) {
      return true;
    }
    const uint32_t crc = le32(payload);
    payload.remove_prefix(4);
    char* to = out->data() + written;
    size_t n = payload.size();
    if (type == 0x00) {
      if (!snappy::GetUncompressedLength(payload.data(), payload.size(), &n) ||
          !snappy::RawUncompress(payload.data(), payload.size(), to)) {
        return false;
      }
    } else {
      std::memcpy(to, payload.data(), n);
    }
    written += n;
    return maskedCrc32c(to, n) == crc;
  });
  out->resize(written);  // keeps the capacity
  return ok ? InflateResult::kOk : InflateResult::kCorrupt;
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
    capacity = le32(in.substr(in.size() - 4));  // ISIZE
  }
  capacity = std::min(std::max<size_t>(capacity, 4096), max_bytes);
  const std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> d(
      libdeflate_alloc_decompressor());
  if (!d) {
    throw std::bad_alloc();
  }
  for (;;) {
    std::string().swap(*out);  // the last try's buffer goes first: max_bytes is the bound
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

InflateResult zstdBody(std::string_view in, size_t max_bytes, size_t padding, std::string* out) {
  // The frames' sizes, exact where their headers state them, else a bound from their blocks
  // (each at most 128 KiB): the OTel collector's streaming encoder states no size for a body over
  // one block, and a guess decoded such a body three times over. Taken as a first guess (the
  // buffer grows past it, as for a gzip trailer's): a legacy frame (zstd before v0.8) may state
  // less than it holds.
  const unsigned long long bound = ZSTD_decompressBound(in.data(), in.size());
  size_t capacity = bound == ZSTD_CONTENTSIZE_ERROR
                        ? in.size() * 4
                        : static_cast<size_t>(std::min<unsigned long long>(bound, max_bytes));
  capacity = std::min(std::max<size_t>(capacity, 4096), max_bytes);
  const std::unique_ptr<ZSTD_DCtx, ZstdDeleter> d(ZSTD_createDCtx());
  if (!d) {
    throw std::bad_alloc();
  }
  for (;;) {
    std::string().swap(*out);  // the last try's buffer goes first: max_bytes is the bound
    *out = std::string(capacity + padding, '\0');  // exactly: resize() would grow it twofold
    // One call decodes every frame straight into the output: no window buffer (zstd.h,
    // ZSTD_decompressDCtx), whatever window a frame's header asks for.
    const size_t r = ZSTD_decompressDCtx(d.get(), out->data(), capacity, in.data(), in.size());
    if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall) {
      if (capacity >= max_bytes) {
        return InflateResult::kTooLarge;
      }
      capacity = std::min(capacity * 4, max_bytes);
      continue;
    }
    if (ZSTD_isError(r)) {
      return InflateResult::kCorrupt;
    }
    out->resize(r);  // keeps the capacity
    return InflateResult::kOk;
  }
}

InflateResult snappyBody(std::string_view in, size_t max_bytes, size_t padding, std::string* out) {
  if (in.substr(0, kSnappyStreamIdentifier.size()) == kSnappyStreamIdentifier) {
    return snappyFramed(in, max_bytes, padding, out);
  }
  size_t n = 0;
  if (!snappy::GetUncompressedLength(in.data(), in.size(), &n)) {
    return InflateResult::kCorrupt;
  }
  if (n > max_bytes) {
    return InflateResult::kTooLarge;
  }
  *out = std::string(n + padding, '\0');
  if (!snappy::RawUncompress(in.data(), in.size(), out->data())) {
    return InflateResult::kCorrupt;
  }
  out->resize(n);
  return InflateResult::kOk;
}

}  // namespace faultline
