// inflateBody (ingest/push/inflate.h): gzip and zlib bodies as HTTP clients send them, and the
// bodies it must refuse without holding more than the limit.
#include "ingest/push/inflate.h"

#include <string>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace faultline
