// Fuzzes inflateBody (ingest/push/inflate.h), the push server's gzip and deflate (zlib or raw)
// decoding, against zlib's inflate as the reference: a body zlib reads whole within the limit must
// give the same bytes, and one zlib finds over the limit or refuses must be refused; never more
// than the limit is held.
#include <cstdint>
#include <string>
#include <string_view>

#include <zlib.h>

#include "ingest/push/inflate.h"

namespace {

constexpr size_t kMax = 256 << 10;  // small, so that the output buffer's growth is exercised

// kHeaderCrc: zlib refused a gzip header's optional CRC16 (FHCRC, RFC 1952 2.3.1), which
// libdeflate skips unchecked, as Python's gzip module does; the member's CRC32 is still checked.
// kRawCorrupt: zlib refused a raw deflate stream; libdeflate reads some of those (a code-length
// repeat with no previous length, found by this target), and raw deflate has no checksum to
// refuse them after, as zlib's and gzip's do.
enum class Reference { kOk, kTooLarge, kCorrupt, kHeaderCrc, kRawCorrupt };

// zlib's reading of `in` as gzip members in sequence (window_bits 31), one zlib stream (15) or
// one raw deflate stream (-15), nothing after; output beyond kMax is not kept.
Reference readAs(std::string_view in, int window_bits, std::string* out) {
  const bool gzip = window_bits > 15;
  z_stream z{};
  if (inflateInit2(&z, window_bits) != Z_OK) {
    __builtin_trap();
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  Reference result = Reference::kCorrupt;
  char buf[16384];
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    const int r = inflate(&z, Z_NO_FLUSH);
    out->append(buf, sizeof buf - z.avail_out);
    if (out->size() > kMax) {
      result = Reference::kTooLarge;
      break;
    }
    if (r == Z_STREAM_END) {
      const bool next_member =
          gzip && z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b;
      if (next_member && inflateReset(&z) == Z_OK) {
        continue;
      }
      result = z.avail_in == 0 ? Reference::kOk : Reference::kCorrupt;
      break;
    }
    if (r == Z_DATA_ERROR && z.msg != nullptr && std::string_view(z.msg) == "header crc mismatch") {
      result = Reference::kHeaderCrc;
      break;
    }
    if (r != Z_OK || (z.avail_in == 0 && z.avail_out != 0)) {
      break;  // an error, or the input ended inside a stream
    }
  }
  inflateEnd(&z);
  return result;
}

// inflateBody's rules: gzip when the magic bytes lead, else zlib, else (a body zlib refuses, as
// Loki reads `deflate`) raw deflate.
Reference reference(std::string_view in, std::string* out) {
  if (in.size() >= 2 && static_cast<uint8_t>(in[0]) == 0x1f &&
      static_cast<uint8_t>(in[1]) == 0x8b) {
    return readAs(in, 15 + 16, out);
  }
  const Reference zlib = readAs(in, 15, out);
  if (zlib != Reference::kCorrupt) {
    return zlib;
  }
  out->clear();
  const Reference raw = readAs(in, -15, out);
  return raw == Reference::kCorrupt ? Reference::kRawCorrupt : raw;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string expected;
  const Reference want = reference(in, &expected);
  std::string out;
  const faultline::InflateResult got = faultline::inflateBody(in, kMax, 64, &out);
  if (out.capacity() > kMax + 64 + 32) {
    __builtin_trap();  // held more than the limit
  }
  switch (want) {
    case Reference::kOk:
      if (got != faultline::InflateResult::kOk || out != expected) {
        __builtin_trap();
      }
      break;
    // Refused, as too large or as corrupt: libdeflate may meet corrupt data before running out of
    // room, and it reads a truncated stream as if zeros followed (its end checked only then),
    // which can fill the room first.
    case Reference::kTooLarge:
    case Reference::kCorrupt:
      if (got == faultline::InflateResult::kOk) {
        __builtin_trap();
      }
      break;
    case Reference::kHeaderCrc:  // either answer; the bound above still holds
    case Reference::kRawCorrupt:
      break;
  }
  return 0;
}
