// inflateBody, zstdBody and snappyBody (ingest/push/inflate.h): gzip, zlib, zstd and snappy
// bodies as HTTP clients send them, and the bodies they must refuse without holding more than the
// limit.
#include "ingest/push/inflate.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <snappy.h>
#include <zstd.h>

#include "tests/tools/zlib_compress.h"

namespace faultline {
namespace {

// `raw` in gzip format, or in zlib format.
std::string compress(const std::string& raw, bool gzip) {
  return zlibCompress(raw, gzip ? 15 + 16 : 15);
}

std::string text(size_t bytes) {
  std::string s;
  for (size_t i = 0; s.size() < bytes; ++i) {
    s += "NVRM: Xid (PCI:0000:3b:00): 79, pid=" + std::to_string(i) + ", GPU has fallen off\n";
  }
  s.resize(bytes);
  return s;
}

TEST(InflateBody, GzipAndZlibWithRoomForThePadding) {
  const std::string raw = text(300000);
  for (const bool gzip : {true, false}) {
    std::string out;
    ASSERT_EQ(inflateBody(compress(raw, gzip), 1 << 20, 64, &out), InflateResult::kOk) << gzip;
    EXPECT_EQ(out, raw);
    EXPECT_GE(out.capacity(), out.size() + 64);
  }
}

TEST(InflateBody, GzipMembersInSequenceAreOneBody) {
  const std::string a = text(5000);
  const std::string b = text(70000);
  std::string out;
  ASSERT_EQ(inflateBody(compress(a, true) + compress(b, true), 1 << 20, 0, &out),
            InflateResult::kOk);
  EXPECT_EQ(out, a + b);
}

TEST(InflateBody, OverTheLimitIsRefusedAtTheLimit) {
  const std::string zeros(10'000'000, '\0');  // about 10 KB compressed
  for (const bool gzip : {true, false}) {
    std::string out;
    EXPECT_EQ(inflateBody(compress(zeros, gzip), 1'000'000, 64, &out), InflateResult::kTooLarge);
    EXPECT_LE(out.capacity(), 1'000'000U + 64 + 32) << "never more than the limit is held";
    // Exactly at the limit is accepted.
    EXPECT_EQ(inflateBody(compress(zeros, gzip), zeros.size(), 0, &out), InflateResult::kOk);
    EXPECT_EQ(out.size(), zeros.size());
  }
}

TEST(InflateBody, AGzipTrailerIsCheckedNotTrusted) {
  const std::string raw = text(200000);
  std::string gz = compress(raw, true);
  // ISIZE says 100 bytes: the buffer grows past it, and libdeflate's check of ISIZE against
  // what it inflated refuses the body.
  gz[gz.size() - 4] = 100;
  gz[gz.size() - 3] = gz[gz.size() - 2] = gz[gz.size() - 1] = 0;
  std::string out;
  EXPECT_EQ(inflateBody(gz, 1 << 20, 0, &out), InflateResult::kCorrupt);
  // A body under the limit whose trailer claims more than the limit is inflated in a buffer no
  // larger than the limit.
  gz = compress(raw, true);
  gz[gz.size() - 1] = '\x7f';
  EXPECT_EQ(inflateBody(gz, 1 << 20, 0, &out), InflateResult::kCorrupt);
  EXPECT_LE(out.capacity(), (1U << 20) + 32);
}

TEST(InflateBody, AGzipHeaderCrcIsSkipped) {
  const std::string raw = text(1000);
  const std::string gz = compress(raw, true);
  // The same member with FHCRC set and a CRC16 that is wrong after the 10-byte header: the
  // member's CRC32 still guards the body.
  std::string with_crc = gz.substr(0, 10) + "\x12\x34" + gz.substr(10);
  with_crc[3] = static_cast<char>(with_crc[3] | 0x02);
  std::string out;
  ASSERT_EQ(inflateBody(with_crc, 1 << 20, 0, &out), InflateResult::kOk);
  EXPECT_EQ(out, raw);
  with_crc[with_crc.size() - 8] ^= 1;  // the CRC32
  EXPECT_EQ(inflateBody(with_crc, 1 << 20, 0, &out), InflateResult::kCorrupt);
}

TEST(InflateBody, CorruptTruncatedAndTrailingBytesAreRefused) {
  const std::string raw = text(50000);
  std::string out;
  EXPECT_EQ(inflateBody("not gzip at all", 1 << 20, 0, &out), InflateResult::kCorrupt);
  EXPECT_EQ(inflateBody("", 1 << 20, 0, &out), InflateResult::kCorrupt);
  for (const bool gzip : {true, false}) {
    const std::string c = compress(raw, gzip);
    EXPECT_EQ(inflateBody(c.substr(0, c.size() - 1), 1 << 20, 0, &out), InflateResult::kCorrupt);
    EXPECT_EQ(inflateBody(c.substr(0, c.size() / 2), 1 << 20, 0, &out), InflateResult::kCorrupt);
    EXPECT_EQ(inflateBody(c + "x", 1 << 20, 0, &out), InflateResult::kCorrupt);
    std::string flipped = c;
    flipped[c.size() / 2] ^= 0x40;
    EXPECT_EQ(inflateBody(flipped, 1 << 20, 0, &out), InflateResult::kCorrupt);
  }
}

// `raw` as zstd frames: one per piece, each stating its content size or not (a streaming
// writer, as the collector's klauspost encoder, does not know it), with a checksum.
std::string zstd(const std::vector<std::string>& pieces, bool content_size = true) {
  std::string out;
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  for (const std::string& raw : pieces) {
    std::string frame(ZSTD_compressBound(raw.size()), '\0');
    const size_t n = ZSTD_compress2(c, frame.data(), frame.size(), raw.data(), raw.size());
    EXPECT_FALSE(ZSTD_isError(n));
    out += frame.substr(0, n);
  }
  ZSTD_freeCCtx(c);
  return out;
}

TEST(ZstdBody, FramesInSequenceWithOrWithoutTheirSize) {
  const std::string a = text(300000);
  const std::string b = text(5000);
  for (const bool content_size : {true, false}) {
    std::string out;
    ASSERT_EQ(zstdBody(zstd({a}, content_size), 1 << 20, 64, &out), InflateResult::kOk);
    EXPECT_EQ(out, a);
    EXPECT_GE(out.capacity(), out.size() + 64);
    // A body as compressible as OTLP JSON (25 to 1) is sized from the frame's header, or its
    // blocks' bound (128 KiB each): one pass, not a guess grown fourfold until the body fits.
    std::string json;
    while (json.size() < 300000) {
      json += R"({"key":"MESSAGE","value":{"stringValue":"NVRM: Xid 79"}},)";
    }
    ASSERT_EQ(zstdBody(zstd({json}, content_size), 1 << 20, 64, &out), InflateResult::kOk);
    EXPECT_EQ(out, json);
    EXPECT_LE(out.capacity(), out.size() + (128 << 10) + 64 + 32) << content_size;
    ASSERT_EQ(zstdBody(zstd({b, a}, content_size), 1 << 20, 64, &out), InflateResult::kOk);
    EXPECT_EQ(out, b + a);
  }
  // A skippable frame (RFC 8878 3.1.2: magic 0x184D2A5?, a 4-byte size, then that many bytes).
  std::string out;
  const std::string skippable("\x50\x2a\x4d\x18\x03\x00\x00\x00xyz", 11);
  ASSERT_EQ(zstdBody(skippable + zstd({b}), 1 << 20, 0, &out), InflateResult::kOk);
  EXPECT_EQ(out, b);
}

TEST(ZstdBody, OverTheLimitIsRefusedAtTheLimit) {
  const std::string zeros(10'000'000, '\0');
  for (const bool content_size : {true, false}) {
    std::string out;
    EXPECT_EQ(zstdBody(zstd({zeros}, content_size), 1'000'000, 64, &out), InflateResult::kTooLarge);
    EXPECT_LE(out.capacity(), 1'000'000U + 64 + 32) << "never more than the limit is held";
    EXPECT_EQ(zstdBody(zstd({zeros}, content_size), zeros.size(), 0, &out), InflateResult::kOk);
    EXPECT_EQ(out.size(), zeros.size());
  }
}

TEST(ZstdBody, CorruptTruncatedAndTrailingBytesAreRefused) {
  const std::string c = zstd({text(50000)});
  std::string out;
  EXPECT_EQ(zstdBody("not zstd at all", 1 << 20, 0, &out), InflateResult::kCorrupt);
  EXPECT_EQ(zstdBody(c.substr(0, c.size() - 1), 1 << 20, 0, &out), InflateResult::kCorrupt);
  EXPECT_EQ(zstdBody(c.substr(0, c.size() / 2), 1 << 20, 0, &out), InflateResult::kCorrupt);
  EXPECT_EQ(zstdBody(c + "x", 1 << 20, 0, &out), InflateResult::kCorrupt);
  std::string flipped = c;
  flipped[c.size() - 2] ^= 0x40;  // the checksum
  EXPECT_EQ(zstdBody(flipped, 1 << 20, 0, &out), InflateResult::kCorrupt);
}

TEST(SnappyBody, BlockFormat) {
  const std::string raw = text(200000);
  std::string block;
  snappy::Compress(raw.data(), raw.size(), &block);
  std::string out;
  ASSERT_EQ(snappyBody(block, 1 << 20, 64, &out), InflateResult::kOk);
  EXPECT_EQ(out, raw);
  EXPECT_GE(out.capacity(), out.size() + 64);
  EXPECT_EQ(snappyBody(block, 100000, 0, &out), InflateResult::kTooLarge);
  EXPECT_EQ(snappyBody(block.substr(0, block.size() - 1), 1 << 20, 0, &out),
            InflateResult::kCorrupt);
  // The 10,000,000 its length header states is refused before anything is allocated.
  EXPECT_EQ(snappyBody("\x80\xad\xe2\x04garbage", 1 << 20, 0, &out), InflateResult::kTooLarge);
}

// A framed stream written by a framing-format writer of its own (Python: python3-snappy's block
// compress, a bitwise CRC-32C checked against "123456789" -> e3069283, and the spec's mask): the
// stream identifier, a compressed chunk of three Xid 79 lines, a padding chunk (0xfe), a reserved
// skippable chunk (0x80) and an uncompressed chunk "abc\n".
const std::string kFramed(
    "\xff\x06\x00\x00\x73\x4e\x61\x50\x70\x59\x00\x57\x00\x00\x4f\xdb\xb8\x58\xd2\x01\xf0\x46\x4e"
    "\x56\x52\x4d\x3a\x20\x58\x69\x64\x20\x28\x50\x43\x49\x3a\x30\x30\x30\x30\x3a\x33\x62\x3a\x30"
    "\x30\x29\x3a\x20\x37\x39\x2c\x20\x70\x69\x64\x3d\x31\x32\x33\x34\x2c\x20\x47\x50\x55\x20\x68"
    "\x61\x73\x20\x66\x61\x6c\x6c\x65\x6e\x20\x6f\x66\x66\x20\x74\x68\x65\x20\x62\x75\x73\x2e\x0a"
    "\x4e\xfe\x46\x00\xfe\x46\x00\x1d\x46\xfe\x02\x00\x00\x00\x00\x80\x04\x00\x00\x73\x6b\x69\x70"
    "\x01\x08\x00\x00\xc4\xa9\x6b\xef\x61\x62\x63\x0a",
    127);

TEST(SnappyBody, FramingFormat) {
  const std::string line =
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n";
  std::string out;
  ASSERT_EQ(snappyBody(kFramed, 1 << 20, 64, &out), InflateResult::kOk);
  EXPECT_EQ(out, line + line + line + "abc\n");
  EXPECT_GE(out.capacity(), out.size() + 64);
  // Streams in sequence are one body (a stream identifier may recur).
  ASSERT_EQ(snappyBody(kFramed + kFramed, 1 << 20, 0, &out), InflateResult::kOk);
  EXPECT_EQ(out.size(), 2 * (3 * line.size() + 4));
  // At the limit, and one byte over it: refused from the chunks' headers.
  EXPECT_EQ(snappyBody(kFramed, 3 * line.size() + 4, 0, &out), InflateResult::kOk);
  EXPECT_EQ(snappyBody(kFramed, 3 * line.size() + 3, 0, &out), InflateResult::kTooLarge);
}

TEST(SnappyBody, FramingFormatRefusesBadChecksumsAndChunks) {
  std::string out;
  std::string bad = kFramed;
  bad[14] ^= 1;  // the compressed chunk's CRC
  EXPECT_EQ(snappyBody(bad, 1 << 20, 0, &out), InflateResult::kCorrupt);
  bad = kFramed;
  bad[bad.size() - 1] ^= 1;  // the uncompressed chunk's data
  EXPECT_EQ(snappyBody(bad, 1 << 20, 0, &out), InflateResult::kCorrupt);
  // A reserved unskippable chunk (0x02-0x7f).
  EXPECT_EQ(snappyBody(kFramed + std::string("\x02\x01\x00\x00x", 5), 1 << 20, 0, &out),
            InflateResult::kCorrupt);
  // Cut inside a chunk, and inside a chunk's header.
  EXPECT_EQ(snappyBody(kFramed.substr(0, kFramed.size() - 1), 1 << 20, 0, &out),
            InflateResult::kCorrupt);
  EXPECT_EQ(snappyBody(kFramed + std::string("\x00\x01", 2), 1 << 20, 0, &out),
            InflateResult::kCorrupt);
  // A stream identifier chunk that does not say sNaPpY.
  EXPECT_EQ(snappyBody(kFramed + std::string("\xff\x06\x00\x00sNaPpX", 10), 1 << 20, 0, &out),
            InflateResult::kCorrupt);
}

}  // namespace
}  // namespace faultline
