// Fuzzes zstdBody and snappyBody (ingest/push/inflate.h), the push server's zstd and snappy
// (block or framed) decoding. The first byte picks the decoder; the rest is the body. zstd is
// compared with libzstd's streaming decoder, the snappy block format with snappy::Uncompress;
// framed snappy has no reference here and is held to the bound alone. Then the body is compressed
// and must decode to itself. Never more than the limit is held.
#include <cstdint>
#include <string>
#include <string_view>

#include <snappy.h>
#include <zstd.h>

#include "ingest/push/inflate.h"

namespace {

constexpr size_t kMax = 256 << 10;  // small, so that the output buffer's growth is exercised

using faultline::InflateResult;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

// libzstd's streaming reading of `in`, frames in sequence, nothing after; output past kMax is not
// kept. kOk with *out, kTooLarge or kCorrupt.
InflateResult zstdReference(std::string_view in, std::string* out) {
  ZSTD_DCtx* d = ZSTD_createDCtx();
  ZSTD_inBuffer src{in.data(), in.size(), 0};
  char buf[16384];
  InflateResult result = InflateResult::kCorrupt;
  size_t r = 1;
  for (;;) {
    ZSTD_outBuffer dst{buf, sizeof buf, 0};
    r = ZSTD_decompressStream(d, &dst, &src);
    if (ZSTD_isError(r)) {
      break;
    }
    out->append(buf, dst.pos);
    if (out->size() > kMax) {
      result = InflateResult::kTooLarge;
      break;
    }
    if (src.pos == src.size && dst.pos < dst.size) {  // all read, all flushed
      result = r == 0 && !in.empty() ? InflateResult::kOk : InflateResult::kCorrupt;
      break;
    }
  }
  ZSTD_freeDCtx(d);
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const bool zstd = (data[0] & 1) == 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string out;
  const InflateResult got =
      zstd ? faultline::zstdBody(in, kMax, 64, &out) : faultline::snappyBody(in, kMax, 64, &out);
  check(out.capacity() <= kMax + 64 + 32);  // held no more than the limit
  std::string expected;
  if (zstd) {
    // Where both read the body, the same bytes; what the reference finds over the limit must be
    // refused. libzstd's one-call decoder (zstdBody's) and its streaming one disagree on some
    // invalid frames, either way: a block larger than the frame's window (RFC 8878 3.1.1.2.4), an
    // empty compressed block.
    const InflateResult want = zstdReference(in, &expected);
    check(want != InflateResult::kOk || got != InflateResult::kOk || out == expected);
    check(want != InflateResult::kTooLarge || got != InflateResult::kOk);
  } else if (in.substr(0, 10) != std::string_view("\xff\x06\x00\x00sNaPpY", 10)) {
    size_t n = 0;
    const bool block = snappy::GetUncompressedLength(in.data(), in.size(), &n) &&
                       (n > kMax || snappy::Uncompress(in.data(), in.size(), &expected));
    check(block == (got != InflateResult::kCorrupt));
    check(got != InflateResult::kOk || out == expected);
  }
  // The body, compressed, decodes to itself.
  std::string packed;
  if (zstd) {
    packed.resize(ZSTD_compressBound(in.size()));
    packed.resize(ZSTD_compress(packed.data(), packed.size(), in.data(), in.size(), 1));
    check(faultline::zstdBody(packed, kMax, 0, &out) == InflateResult::kOk && out == in);
  } else {
    snappy::Compress(in.data(), in.size(), &packed);
    check(faultline::snappyBody(packed, kMax, 0, &out) == InflateResult::kOk && out == in);
  }
  return 0;
}
