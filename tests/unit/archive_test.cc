// The archive reader: magic-byte detection, gzip (multi-member) and zstd, line assembly across
// chunk boundaries, per-file format detection, and files that fail without stopping the others.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include "core/time.h"
#include "ingest/archive/archive_source.h"
#include "ingest/archive/decompress.h"
#include "tests/tools/zlib_compress.h"

namespace faultline {
namespace {

std::string gzip(const std::string& in) {
  return zlibCompress(in, 15 + 16);
}

std::string zstd(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3));
  return out;
}

// A dmesg text over 1 MiB whose multi-line record straddles the reader's 1 MiB chunk boundary.
std::string straddlingDmesg() {
  std::string text;
  const std::string filler = "[    1.000000] usb 1-2: New USB device strings: Mfr=2, Prod=003\n";
  EXPECT_EQ(filler.size(), 64U);
  for (int i = 0; i < 16383; ++i) {
    text += filler;
  }
  text += "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n";
  text += "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n";
  text += "               NVRM: fallen off the bus and is not responding to commands.\n";
  text += "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n";
  EXPECT_GT(text.size(), size_t{1} << 20);
  return text;
}

std::vector<std::string> replay(const std::vector<ArchiveInput>& inputs, ArchiveStats* stats,
                                std::vector<ArchiveError>* errors = nullptr,
                                const ArchiveOptions& options = {}) {
  ArchiveSource source(inputs, options);
  std::vector<std::string> lines;
  source.run(
      [&](RecordBatch& b) {
        for (const LogRecord& r : b.records) {
          lines.push_back(std::string(r.node) + "|" + std::string(r.line));
        }
      },
      std::stop_token());
  *stats = source.stats();
  if (errors != nullptr) {
    *errors = source.errors();
  } else {
    EXPECT_TRUE(source.errors().empty()) << source.errors().front().message;
  }
  return lines;
}

TEST(Archive, SameRecordsFromPlainGzipAndZstdAcrossChunkBoundaries) {
  const std::string text = straddlingDmesg();
  for (const std::string& bytes : {text, gzip(text), zstd(text)}) {
    ArchiveStats stats;
    const auto lines = replay({{"/logs/gpu-node-7.dmesg.zst", bytes, true}}, &stats);
    ASSERT_EQ(lines.size(), 16385U);
    EXPECT_EQ(lines[16383],
              "gpu-node-7|NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed "
              "in this system has\nNVRM: fallen off the bus and is not responding to commands.");
    EXPECT_EQ(stats.bytes_text, text.size());
    EXPECT_EQ(stats.malformed, 0U);
  }
}

TEST(Archive, ConcatenatedGzipMembersAreAllRead) {
  const std::string a = "[ 1.0] first\n";
  const std::string b = "[ 2.0] second\n";
  ArchiveStats stats;
  const auto lines = replay({{"n.log.gz", gzip(a) + gzip(b), true}}, &stats);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[1], "n|second");
}

// A read returned one member's bytes, and the format was told from them alone: a first member of
// one CRI line stamped to the 100 ms reads as syslog (a review, 2026-12-02).
TEST(Archive, AGzipReadFillsItsBufferAcrossMembers) {
  const std::string a = "2026-11-30T08:25:02.1Z stdout F epoch 3\n";
  const std::string b = "2026-11-30T08:25:02.123456789Z stdout F epoch 4\n";
  const std::string bytes = gzip(a) + gzip(b) + gzip(b);
  const auto reader = openArchiveBytes(bytes, "n.log.gz");
  std::string out(1000, '\0');
  ASSERT_EQ(reader->read(out.data(), out.size()), a.size() + 2 * b.size());
  EXPECT_EQ(out.substr(0, a.size() + 2 * b.size()), a + b + b);
  EXPECT_EQ(reader->read(out.data(), out.size()), 0U);
  // A cut last member: the bytes before the cut first, then the error.
  std::string cut = gzip(b);
  cut.resize(12);
  const std::string cut_bytes = gzip(a) + cut;  // read in place: it outlives the reader
  const auto cut_reader = openArchiveBytes(cut_bytes, "c.log.gz");
  const size_t got = cut_reader->read(out.data(), out.size());
  EXPECT_GE(got, a.size());  // and what the cut member's 2 bytes of data decode to
  EXPECT_LT(got, a.size() + b.size());
  EXPECT_EQ(out.substr(0, got), (a + b).substr(0, got));
  EXPECT_THROW(cut_reader->read(out.data(), out.size()), std::runtime_error);
  // Bytes after the padding zeros: the member's bytes first, then the error.
  const std::string padded = gzip(a) + std::string(4, '\0') + "X";
  const auto padded_reader = openArchiveBytes(padded, "p.log.gz");
  ASSERT_EQ(padded_reader->read(out.data(), out.size()), a.size());
  EXPECT_EQ(out.substr(0, a.size()), a);
  EXPECT_THROW(padded_reader->read(out.data(), out.size()), std::runtime_error);
}

TEST(Archive, EachFileHasItsOwnFormat) {
  ArchiveStats stats;
  const auto lines =
      replay({{"a.dmesg", "[ 1.0] kernel line\n", true},
              {"b.log", "Feb 14 05:03:41 host-b kernel: syslog line\nnot syslog at all\n", true}},
             &stats);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0], "a|kernel line");
  EXPECT_EQ(lines[1], "host-b|syslog line");
  EXPECT_EQ(stats.malformed, 1U);  // counted and skipped, the file goes on
}

TEST(Archive, AFailedFileIsRecordedAndTheOthersAreRead) {
  // b: a complete member, then a second one cut short. Its records read before the cut count
  // (they are still in the batch when the error comes), the cut line does not.
  std::string cut = gzip("[ 3.0] lost\n[ 4.0] lost too\n");
  cut.resize(12);
  std::vector<ArchiveInput> inputs = {{"a.dmesg", "[ 1.0] first\n", true},
                                      {"b.dmesg.gz", gzip("[ 2.0] before the cut\n") + cut, true},
                                      {"c.txt", "hello world\n", true},
                                      {"/no/such/d.dmesg", "", false},
                                      {"e.dmesg", "[ 5.0] last\n", true}};
  for (uint32_t i = 0; i < inputs.size(); ++i) {
    inputs[i].number = i;
  }
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  const auto lines = replay(inputs, &stats, &errors);
  EXPECT_EQ(lines, (std::vector<std::string>{"a|first", "b|before the cut", "e|last"}));
  ASSERT_EQ(errors.size(), 3U);
  EXPECT_EQ(errors[0].number, 1U);
  EXPECT_EQ(errors[0].message, "b.dmesg.gz: gzip stream truncated");
  EXPECT_EQ(errors[1].number, 2U);
  EXPECT_EQ(errors[1].message, "c.txt: unknown log format (use --format)");
  EXPECT_EQ(errors[2].number, 3U);
  EXPECT_EQ(errors[2].message, "/no/such/d.dmesg: No such file or directory");
  EXPECT_EQ(stats.records, 3U);
}

TEST(Archive, LogcliDefaultOutputIsRefusedNamingTheExportThatKeepsTheLabels) {
  std::vector<ArchiveInput> inputs = {
      {"loki.txt", "2026-11-30T08:25:06Z {} NVRM: Xid (PCI:0000:3b:00): 79\n", true}};
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  EXPECT_TRUE(replay(inputs, &stats, &errors).empty());
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message,
            "loki.txt: unknown log format: logcli's default output (STAMP {labels} line), whose "
            "lines leave out the labels they share (the node, the kernel's transport); export "
            "with `logcli query --output=jsonl` (format loki-jsonl)");
}

// `journalctl -k --since ... > gpu-3.log` of a quiet node writes journalctl's own "-- No entries
// --": an empty log, not a file of unknown format, which made the replay exit 2 (a review,
// 2026-12-02). journalctl's boot separators and its old header are no lines of the log either:
// neither counted nor malformed.
TEST(Archive, JournalctlsOwnLinesAreNoLogLines) {
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  EXPECT_TRUE(replay({{"gpu-3.log", "-- No entries --\n", true}}, &stats, &errors).empty());
  EXPECT_TRUE(errors.empty()) << errors.front().message;
  EXPECT_EQ(stats.lines, 0U);

  const std::vector<std::string> lines = replay(
      {{"gpu-4.log",
        "-- Journal begins at Mon 2026-11-30 08:00:01 UTC, ends at Mon 2026-11-30 09:00:00 UTC. "
        "--\n"
        "Nov 30 08:25:06 gpu-4 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the "
        "bus.\n"
        "-- Boot 9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e --\n"
        "Nov 30 08:40:00 gpu-4 kernel: Linux version 6.1.0-18-amd64\n",
        true}},
      &stats);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0], "gpu-4|NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  EXPECT_EQ(stats.lines, 2U);
  EXPECT_EQ(stats.malformed, 0U);
}

// Replay warns of the files whose times count from their first line: their times meet no other
// file's (a pod log's, stamped in its year).
TEST(Archive, NamesTheFilesStampedSinceBootWithoutABootTime) {
  const std::vector<ArchiveInput> inputs = {
      {"uptime.dmesg", "[ 5.000000] a\n", true},
      {"ctime.dmesg", "[Fri Apr  5 21:29:39 2024] b\n", true},
      {"monotonic.log", "[   12.345678] gpu-1 kernel: c\n", true},
      {"iso.log", "2024-02-14T05:03:41+0000 gpu-1 kernel: d\n", true}};
  for (const bool boot : {false, true}) {
    ArchiveOptions options;
    if (boot) {
      options.parse.boot_time_ns = civilToNanos(2024, 4, 5, 0, 0, 0);
    }
    ArchiveSource source(inputs, options);
    source.run([](RecordBatch&) {}, std::stop_token());
    EXPECT_EQ(source.stats().records, 4U);
    using SinceBoot = ArchiveSource::SinceBoot;
    EXPECT_EQ(source.sinceFirstStamp(),
              boot ? std::vector<SinceBoot>{}
                   : (std::vector<SinceBoot>{{"uptime.dmesg", "uptime"}, {"monotonic.log", ""}}));
  }
  // --node is a dmesg file's node, not that of a file whose lines name their hosts.
  ArchiveOptions options;
  options.parse.node = "n9";
  ArchiveSource source({inputs[0], inputs[2]}, options);
  source.run([](RecordBatch&) {}, std::stop_token());
  EXPECT_EQ(source.sinceFirstStamp(),
            (std::vector<ArchiveSource::SinceBoot>{{"uptime.dmesg", "n9"}, {"monotonic.log", ""}}));
}

TEST(Archive, CorruptGzipDataNamesTheFile) {
  std::string bad = gzip("[ 1.0] x\n");
  bad[12] = static_cast<char>(~bad[12]);
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  replay({{"bad.gz", bad, true}}, &stats, &errors);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message.rfind("bad.gz: corrupt gzip data (", 0), 0U) << errors[0].message;
}

TEST(Archive, GzipZerosAfterACompleteMemberAreIgnoredAsGzipDoes) {
  const std::string member = gzip("[ 1.0] first\n");
  ArchiveStats stats;
  // Tape padding, also longer than the reader's 256 KiB input buffer.
  for (const size_t zeros : {size_t{1}, size_t{512}, size_t{300} << 10}) {
    const auto lines = replay({{"n.dmesg.gz", member + std::string(zeros, '\0'), true}}, &stats);
    EXPECT_EQ(lines, std::vector<std::string>{"n|first"}) << zeros << " zeros";
  }
  std::vector<ArchiveError> errors;
  replay({{"n.dmesg.gz", member + std::string(16, '\0') + "x", true}}, &stats, &errors);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message,
            "n.dmesg.gz: corrupt gzip data (non-zero bytes after the trailing zeros)");
  // Zeros in place of a member's end are no padding.
  std::string cut = member.substr(0, member.size() - 4) + std::string(64, '\0');
  replay({{"n.dmesg.gz", cut, true}}, &stats, &errors);
  EXPECT_EQ(errors.size(), 1U);
}

TEST(Archive, AFirstLineOfAFewBytesDoesNotHideTheFormat) {
  // The format is told from the first read, which used to be the 4 bytes the magic check peeked.
  ArchiveStats stats;
  EXPECT_EQ(replay({{"n.dmesg", "\n[ 1.0] first\n", true}}, &stats),
            std::vector<std::string>{"n|first"});
  EXPECT_EQ(replay({{"s.log", "ok\nFeb 14 05:03:41 host-b kernel: x\n", true}}, &stats),
            std::vector<std::string>{"host-b|x"});
  EXPECT_EQ(stats.malformed, 1U);
}

// A UTF-8 byte order mark (Windows editors, PowerShell) made the first line malformed.
TEST(Archive, AByteOrderMarkIsNoPartOfTheFirstLine) {
  ArchiveStats stats;
  EXPECT_EQ(
      replay({{"gpu-node-3.dmesg", "\xEF\xBB\xBF[  123.4] NVRM: x\n[  124.0] y\n", true}}, &stats),
      (std::vector<std::string>{"gpu-node-3|NVRM: x", "gpu-node-3|y"}));
  EXPECT_EQ(stats.malformed, 0U);
}

// A tar archive's members were read as one dmesg file of one node, named after the tarball.
TEST(Archive, ATarArchiveIsRefused) {
  std::string tar(512, '\0');
  tar.replace(0, 17, "gpu-node-01.dmesg");
  tar.replace(257, 6, std::string("ustar\0", 6));
  tar += "[  123.4] NVRM: Xid (PCI:0000:3b:00): 79, x\n";
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  EXPECT_TRUE(replay({{"logs.tar", tar, true}}, &stats, &errors).empty());
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message, "logs.tar: a tar archive: extract it and replay its files");
}

// A node that lost power mid-write (the postmortem case) leaves its log's unwritten last blocks as
// NUL bytes; the next boot's first line is written right after them, on the same line.
TEST(Archive, TheLineAfterARunOfNulsFromACrashIsRead) {
  const std::string nuls(3000, '\0');
  const std::string xid =
      "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.";
  ArchiveStats stats;
  EXPECT_EQ(replay({{"kern.log",
                     "Nov 29 11:59:00 gpu-node-5 kernel: usb 1-1: new device\n" + nuls +
                         "Nov 29 12:00:00 gpu-node-5 kernel: " + xid + "\n",
                     true}},
                   &stats),
            (std::vector<std::string>{"gpu-node-5|usb 1-1: new device", "gpu-node-5|" + xid}));
  EXPECT_EQ(stats.malformed, 0U);
  EXPECT_EQ(
      replay({{"gpu-node-6.dmesg", "[  100.0] usb\n" + nuls + "[  123.4] " + xid + "\n", true}},
             &stats),
      (std::vector<std::string>{"gpu-node-6|usb", "gpu-node-6|" + xid}));
  // NULs alone on a line are no record.
  replay({{"gpu-node-6.dmesg", "[  100.0] usb\n" + nuls + "\n", true}}, &stats);
  EXPECT_EQ(stats.malformed, 1U);
}

// logrotate's copytruncate under a writer without O_APPEND (`dmesg -w > file`) leaves the file's
// old length as a hole of NULs, which its next line follows.
TEST(Archive, ARunOfNulsBeforeTheFirstLineDoesNotHideTheFormat) {
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  EXPECT_EQ(replay({{"gpu-node-8.dmesg", std::string(100000, '\0') + "[  123.4] NVRM: x\n", true}},
                   &stats, &errors),
            std::vector<std::string>{"gpu-node-8|NVRM: x"});
  EXPECT_TRUE(errors.empty()) << errors.front().message;
}

// A hole of NULs longer than a read (a sparse file, a copytruncate hole of hundreds of MB) is
// dropped as it is read, not carried whole to the line after it; a binary file without a line end
// is refused once 16 MiB show none, not held whole to tell its format.
TEST(Archive, ALongRunOfNulsIsNotHeldAndABinaryFileIsRefused) {
  ArchiveSource source(
      {{"n.dmesg", "[  100.0] a\n" + std::string(size_t{64} << 20, '\0') + "[  123.4] NVRM: x\n",
        true}},
      ArchiveOptions{});
  std::vector<std::string> lines;
  size_t most = 0;
  source.run(
      [&](RecordBatch& b) {
        for (const LogRecord& r : b.records) {
          lines.emplace_back(r.line);
        }
        most = std::max(most, b.memoryBytes());
      },
      std::stop_token());
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "NVRM: x"}));
  EXPECT_LT(most, size_t{8} << 20);
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  // A text line this long (a collector's one-line OTLP JSON) is read on.
  EXPECT_EQ(replay({{"n.dmesg", std::string(size_t{17} << 20, 'x') + "\n[ 1.0] y\n", true}}, &stats,
                   &errors),
            std::vector<std::string>{"n|y"});
  EXPECT_TRUE(errors.empty());
  EXPECT_TRUE(replay({{"wtmp", std::string(17 << 20, '\x01'), true}}, &stats, &errors).empty());
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message,
            "wtmp: unknown log format (binary: control bytes and no line end in its first 16 MiB)");
}

TEST(Archive, TheLinesBeforeAGzipCorruptionAreRead) {
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text += "[ " + std::to_string(i) + ".0] line " + std::to_string(i) + "\n";
  }
  std::string gz = gzip(text);
  gz[gz.size() - 8] = static_cast<char>(~gz[gz.size() - 8]);  // the trailer's CRC-32
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  const auto lines = replay({{"n.dmesg.gz", gz, true}}, &stats, &errors);
  EXPECT_EQ(lines.size(), 100U);  // as zcat gives them
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message, "n.dmesg.gz: corrupt gzip data (incorrect data check)");
}

TEST(Archive, ZstdFilesStartingWithASkippableFrameAreRead) {
  // pzstd writes a skippable frame (RFC 8878 section 3.1.2: magic 0x184D2A50..5F, little-endian)
  // before each frame; zstd -d reads such files, and skippable frames between frames too.
  const auto skippable = [](char nibble, const std::string& payload) {
    std::string f = {static_cast<char>(0x50 | nibble), 0x2a, 0x4d, 0x18};
    for (int i = 0; i < 4; ++i) {
      f += static_cast<char>((payload.size() >> (8 * i)) & 0xff);
    }
    return f + payload;
  };
  const std::string bytes = skippable(0, std::string("\x0c\0\0\0", 4)) + zstd("[ 1.0] first\n") +
                            skippable(0xf, "seek table") + zstd("[ 2.0] second\n");
  ArchiveStats stats;
  EXPECT_EQ(replay({{"n.dmesg.zst", bytes, true}}, &stats),
            (std::vector<std::string>{"n|first", "n|second"}));
}

TEST(Archive, TheLinesBeforeAZstdCorruptionAreRead) {
  // Many blocks in one frame, its checksum wrong: every block decodes before the check fails,
  // as in the gzip test above. libzstd reports an error without the bytes the same call
  // decoded, so a reader that hands it all its input loses the blocks decoded before the error.
  std::string text;
  for (int i = 0; i < 60000; ++i) {
    text += "[ " + std::to_string(i) + ".0] line " + std::to_string(i * 7919 % 10007) + " " +
            std::to_string(i) + "\n";
  }
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::string zst(ZSTD_compressBound(text.size()), '\0');
  zst.resize(ZSTD_compress2(cctx, zst.data(), zst.size(), text.data(), text.size()));
  ZSTD_freeCCtx(cctx);
  zst.back() = static_cast<char>(~zst.back());  // the frame's checksum
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  const auto lines = replay({{"n.dmesg.zst", zst, true}}, &stats, &errors);
  EXPECT_EQ(lines.size(), 60000U);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message,
            "n.dmesg.zst: corrupt zstd data (Restored data doesn't match checksum)");
}

TEST(Archive, ABatchHoldsAFewChunksWhateverTheLines) {
  // Few records among many lines (malformed ones here; a run of NUL bytes, a binary blob or one
  // long line alike): a batch that held every chunk read until it had 8192 records held the
  // whole file, and one growing chunk per MiB of a long line (8.6 GB for a 128 MiB line).
  std::string text;
  const std::string junk(99, 'x');
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 10000; ++j) {
      text += junk + "\n";
    }
    text += "[ " + std::to_string(i) + ".0] a record\n";
  }
  text += "[ 99.0] before a long line\n" + std::string(size_t{8} << 20, 'y') + "\n[ 100.0] after\n";
  ArchiveOptions options;
  options.format = Format::kDmesg;
  ArchiveSource source({{"n.dmesg", text, true}}, options);
  size_t records = 0;
  size_t most = 0;
  std::string last;
  source.run(
      [&](RecordBatch& b) {
        records += b.records.size();
        most = std::max(most, b.memoryBytes());
        last = std::string(b.records.back().line);
      },
      std::stop_token());
  EXPECT_EQ(records, 66U);
  EXPECT_EQ(last, "after");
  EXPECT_LT(most, size_t{24} << 20);  // the chunk with the long line and the one before
}

TEST(Archive, NodeFromFileName) {
  EXPECT_EQ(nodeFromFileName("/var/log/gpu-node-7.dmesg.zst"), "gpu-node-7");
  EXPECT_EQ(nodeFromFileName("n1"), "n1");
  EXPECT_EQ(nodeFromFileName("gpu-1.dmesg.log.gz"), "gpu-1");
}

// Kubernetes node names hold dots (EKS: ip-10-0-1-23.ec2.internal); replay --apply taints the
// node it names, so the name must be the node's whole, and only what tools add is dropped.
TEST(Archive, NodeFromFileNameKeepsANodeNameWithDots) {
  EXPECT_EQ(nodeFromFileName("/logs/ip-10-0-1-23.ec2.internal.dmesg.1.gz"),
            "ip-10-0-1-23.ec2.internal");
  EXPECT_EQ(nodeFromFileName("ip-10-0-1-23.us-west-2.compute.internal.log"),
            "ip-10-0-1-23.us-west-2.compute.internal");
  EXPECT_EQ(nodeFromFileName("ip-10-0-1-23.ec2.internal"), "ip-10-0-1-23.ec2.internal");
  EXPECT_EQ(nodeFromFileName("gpu-node-7.2026-11-28.dmesg.zst"), "gpu-node-7");
  EXPECT_EQ(nodeFromFileName("gpu-node-7.kern.log-20261128.zst"), "gpu-node-7");
  EXPECT_EQ(nodeFromFileName("10.0.1.23.log"), "10.0.1.23");
  EXPECT_EQ(nodeFromFileName("10.0.1.23"), "10.0.1.23");  // no rotation number without a log word
  EXPECT_EQ(nodeFromFileName("dmesg.log"), "dmesg");      // the first part always stays
  EXPECT_EQ(nodeFromFileName("node.gz"), "node");
}

// Per-node trees (a must-gather, a sosreport per node) name every node's kernel log alike: each
// read as node "dmesg", the nodes' faults were one node's.
TEST(Archive, NodeFromFileNameOfLogWordsOnlyIsItsDirectorys) {
  EXPECT_EQ(nodeFromFileName("nodes/gpu-node-01/var/log/dmesg"), "gpu-node-01");
  EXPECT_EQ(nodeFromFileName("/srv/gpu-node-02.logs/kern.log.1.gz"), "gpu-node-02");
  EXPECT_EQ(nodeFromFileName("gpu-node-03/2026-11-28/syslog-20261128"), "gpu-node-03");
  EXPECT_EQ(nodeFromFileName("/var/log/dmesg"), "dmesg");  // no directory named otherwise
  EXPECT_EQ(nodeFromFileName("../log/dmesg"), "dmesg");    // not past ".."
  EXPECT_EQ(nodeFromFileName("gpu-node-04/gpu-node-04.dmesg"), "gpu-node-04");
  EXPECT_EQ(nodeFromFileName("gpu-node-05/var/log/dmesg.0"), "gpu-node-05");  // Debian's rotation
  EXPECT_EQ(nodeFromFileName("gpu-node-06/var/log/dmesg.1.gz"), "gpu-node-06");
  EXPECT_EQ(nodeFromFileName("sosreport-gpu-7-2026-11-30-abcdef/sos_commands/kernel/dmesg"),
            "sosreport-gpu-7-2026-11-30-abcdef");  // one name per node, not sos_commands
  // sos's file of `dmesg -T`, as its plain dmesg: not node "dmesg_-T" for every report.
  EXPECT_EQ(nodeFromFileName("sosreport-gpu-7-2026-11-30-abcdef/sos_commands/kernel/dmesg_-T"),
            "sosreport-gpu-7-2026-11-30-abcdef");
  EXPECT_EQ(nodeFromFileName("sosreport-gpu-8-2026-11-30-abcdef/sos_commands/logs/"
                             "journalctl_--no-pager_--boot_-k"),
            "sosreport-gpu-8-2026-11-30-abcdef");
  EXPECT_EQ(nodeFromFileName("gpu-node-08/20261128-1330/dmesg"), "gpu-node-08");
}

// A node named by its address has digits and '-' as a date does: each file's node was the
// directory's, one node for the whole incident (a review, 2026-12-02).
TEST(Archive, ANodeNamedByItsAddressIsNoDate) {
  EXPECT_EQ(nodeFromFileName("/incident/192-168-1-10.dmesg"), "192-168-1-10");
  EXPECT_EQ(nodeFromFileName("/incident/10-100-20-30.kern.log.1.gz"), "10-100-20-30");
  EXPECT_EQ(nodeFromFileName("/incident/12345678.dmesg"), "12345678");      // a serial number
  EXPECT_EQ(nodeFromFileName("/incident/2026-13-01.dmesg"), "2026-13-01");  // no month 13
  EXPECT_EQ(nodeFromFileName("/incident/gpu-9/2026-11-28.dmesg"), "gpu-9");
}

// A sosreport names its files after sos's commands (sos_commands/kernel/dmesg_-T, the output of
// `dmesg -T`), and its host in the file `hostname` at its root: that is each file's node, where
// the file name gave node "dmesg_-T" and the directory the report's whole name.
TEST(Archive, AFileOfASosreportIsItsHosts) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("sos_test." + std::to_string(getpid()));
  const fs::path root = dir / "sosreport-gpu-7-2026-11-30-abc";
  fs::create_directories(root / "sos_commands" / "kernel");
  fs::create_directories(root / "var" / "log");
  fs::create_directories(dir / "other");
  std::ofstream(root / "hostname") << "GPU-7.cluster.local\n";
  const std::string dmesg_t = "[Mon Nov 30 10:00:00 2026] NVRM: Xid (PCI:0000:44:00): 79, x\n";
  std::ofstream(root / "sos_commands/kernel/dmesg_-T") << dmesg_t;
  std::ofstream(dir / "other/gpu-9.dmesg") << dmesg_t;
  EXPECT_EQ(sosReportHost((root / "sos_commands/kernel/dmesg_-T").string()), "gpu-7.cluster.local");
  EXPECT_EQ(sosReportHost((root / "var/log/dmesg").string()), "gpu-7.cluster.local");
  // Only the file's own directories: "..", and a link into the report, name others.
  EXPECT_EQ(sosReportHost((root / "sos_commands/../../other/gpu-9.dmesg").string()), "");
  fs::create_directory_symlink(root / "sos_commands/kernel", dir / "kdir");
  EXPECT_EQ(sosReportHost((dir / "kdir/dmesg_-T").string()), "gpu-7.cluster.local");
  // Replay reads it so: the file's node is the host, not "dmesg_-T".
  ArchiveStats stats;
  EXPECT_EQ(replay({{(root / "sos_commands/kernel/dmesg_-T").string(), "", false},
                    {(root / "sos_commands/../../other/gpu-9.dmesg").string(), "", false}},
                   &stats),
            (std::vector<std::string>{"gpu-7.cluster.local|NVRM: Xid (PCI:0000:44:00): 79, x",
                                      "gpu-9|NVRM: Xid (PCI:0000:44:00): 79, x"}));
  // Not a host name, or no file: none.
  std::ofstream(root / "hostname") << "gpu 7\n";
  EXPECT_EQ(sosReportHost((root / "var/log/dmesg").string()), "");
  fs::remove(root / "hostname");
  EXPECT_EQ(sosReportHost((root / "var/log/dmesg").string()), "");
  fs::remove_all(dir);
}

// `kubectl cluster-info dump --output-directory` writes each pod's output, without timestamps, to
// NAMESPACE/POD/logs.txt beside NAMESPACE/pods.json: a pod printing a host's syslog line first
// made the file syslog, and its line gpu-7's kernel. Such a file is refused; other logs.txt are
// read.
TEST(Archive, AClusterInfoDumpPodLogIsRefused) {
  namespace fs = std::filesystem;
  const fs::path dump = fs::temp_directory_path() / ("dump_test." + std::to_string(getpid()));
  fs::create_directories(dump / "ml" / "trainer-0");
  std::ofstream(dump / "ml" / "pods.json") << "{}";
  const std::string forged =
      "Nov 30 08:25:06 gpu-7 kernel: NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\n"
      "epoch 1 loss 0.5\n";
  std::ofstream(dump / "ml" / "trainer-0" / "logs.txt") << forged;
  fs::create_directories(dump / "gpu-7");
  std::ofstream(dump / "gpu-7" / "logs.txt") << forged;  // no pods.json above it: a host's log
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  EXPECT_EQ(
      replay({{(dump / "ml/trainer-0/logs.txt").string(), "", false},
              {(dump / "gpu-7/logs.txt").string(), "", false}},
             &stats, &errors),
      std::vector<std::string>{"gpu-7|NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"});
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_NE(errors[0].message.find("trainer-0/logs.txt: a pod's log from kubectl "
                                   "cluster-info dump"),
            std::string::npos)
      << errors[0].message;
  fs::remove_all(dump);
}

// A container's log (kubectl logs --timestamps, /var/log/pods) names no node, and its file is
// named after the pod: its node is --node alone. Without it the file is an error saying so, not
// records of a node named after the pod.
TEST(Archive, AContainerLogTakesItsNodeFromTheOptionAlone) {
  const std::string text =
      "2026-11-28T10:00:01.223456789Z gpu-3 kernel: NVRM: Xid (PCI:0000:44:00): 79, x\n"
      "2026-11-28T10:00:02.1Z epoch 3 loss: 0.1\n";
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  EXPECT_TRUE(replay({{"/logs/trainer-0.log", text, true}}, &stats, &errors).empty());
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message,
            "/logs/trainer-0.log: a container's log names no node (kubectl logs, "
            "/var/log/pods): give it with --node");
  EXPECT_EQ(stats.malformed, 2U);

  ArchiveOptions options;
  options.parse.node = "gpu-7";
  EXPECT_EQ(replay({{"/logs/trainer-0.log", text, true}}, &stats, nullptr, options),
            (std::vector<std::string>{"gpu-7|gpu-3 kernel: NVRM: Xid (PCI:0000:44:00): 79, x",
                                      "gpu-7|epoch 3 loss: 0.1"}));
}

// A record that names no node is dropped and counted malformed, as live (push, Kafka) drops it
// (README: "Replay decides as the live service"): decided, it was a fault of a node "", every
// such record of every machine one node.
TEST(Archive, ARecordNamingNoNodeIsDroppedAsLive) {
  const std::string text =
      R"({"labels":{"transport":"kernel"},"line":"a","timestamp":"2025-02-23T16:24:18Z"})"
      "\n"
      R"({"labels":{"node":"gpu-1","transport":"kernel"},"line":"b",)"
      R"("timestamp":"2025-02-23T16:24:19Z"})"
      "\n";
  ArchiveStats stats;
  const auto lines = replay({{"/logs/site.jsonl", text, true}}, &stats);
  EXPECT_EQ(lines, std::vector<std::string>{"gpu-1|b"});
  EXPECT_EQ(stats.lines, 2U);
  EXPECT_EQ(stats.malformed, 1U);
  EXPECT_EQ(stats.records, 1U);

  // A json record (a Kafka json topic's archive) without a node field is --node's, as a message
  // without one is its key's live; not the file's name's (gpu-9.json read as node gpu-9).
  const std::string json = R"({"time":"2026-11-28T10:00:00Z","message":"a"})"
                           "\n"
                           R"({"time":"2026-11-28T10:00:01Z","message":"b","host":"gpu-1"})"
                           "\n";
  EXPECT_EQ(replay({{"/logs/gpu-9.json", json, true}}, &stats),
            std::vector<std::string>{"gpu-1|b"});
  EXPECT_EQ(stats.malformed, 1U);
  ArchiveOptions options;
  options.parse.node = "gpu-7";
  EXPECT_EQ(replay({{"/logs/gpu-9.json", json, true}}, &stats, nullptr, options),
            (std::vector<std::string>{"gpu-7|a", "gpu-1|b"}));
}

// A file none of whose lines gave a record is an error naming it, the others are read: replay
// exits 2 rather than report "no decision" for what it never read (a --format the file is not
// in, an export whose records name no node). A file with records beside malformed lines is not.
TEST(Archive, AFileOfWhichNoLineGaveARecordIsAnError) {
  std::vector<ArchiveInput> inputs = {
      {"gpu-1.dmesg", "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n", true},
      {"kern.log", "Feb 14 05:03:41 gpu-2 kernel: syslog line\n", true}};
  inputs[1].number = 1;
  ArchiveOptions options;
  options.format = Format::kSyslog;
  ArchiveStats stats;
  std::vector<ArchiveError> errors;
  EXPECT_EQ(replay(inputs, &stats, &errors, options),
            std::vector<std::string>{"gpu-2|syslog line"});
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].number, 0U);
  EXPECT_EQ(errors[0].message,
            "gpu-1.dmesg: none of its 1 lines gave a record (syslog: each one malformed, or "
            "naming no node)");

  replay({{"site.jsonl",
           R"({"labels":{"transport":"kernel"},"line":"a","timestamp":"2025-02-23T16:24:18Z"})"
           "\n",
           true}},
         &stats, &errors);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message,
            "site.jsonl: none of its 1 lines gave a record (loki-jsonl: each one malformed, or "
            "naming no node)");
  EXPECT_EQ(stats.malformed, 1U);

  // Fluent Bit's S3 and HTTP outputs keep the time under `date`, no default time field: the
  // error says what a json record needs and where to name the shipper's fields.
  replay({{"fluent-bit.jsonl",
           R"({"date":1764324002.5,"log":"NVRM: Xid 79","kubernetes":{"host":"gpu-8"}})"
           "\n",
           true}},
         &stats, &errors);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].message,
            "fluent-bit.jsonl: none of its 1 lines gave a record (json: each one malformed, or "
            "naming no node; a json record needs a line, a node and a time field: give the "
            "shipper's as a --config Kafka json topic's fields, or the node with --node)");
}

}  // namespace
}  // namespace faultline
