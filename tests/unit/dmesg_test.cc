// dmesg records: /dev/kmsg dictionaries, and stamps out of the int64 range or naming no real time.
#include <gtest/gtest.h>

#include "core/time.h"
#include "ingest/formats/formats.h"

namespace faultline {
namespace {

TEST(Dmesg, KmsgDictionaryLinesAreDroppedNotJoined) {
  // /work/scratch/h3/kmsgdict.kmsg
  auto parser = makeParser(Format::kDmesg, {});
  const std::vector<std::string> lines = {
      "6,100,5000000,-;NVRM: Xid (PCI:0000:44:00): 79, pid=1, GPU has fallen off the bus.",
      " SUBSYSTEM=pci", " DEVICE=+pci:0000:44:00.0", "6,101,6000000,-;hello"};
  RecordBatch b;
  for (const std::string& l : lines) {
    EXPECT_TRUE(parser->parse(l, &b)) << l;  // part of a record: not malformed
  }
  parser->finish(&b);
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].line,
            "NVRM: Xid (PCI:0000:44:00): 79, pid=1, GPU has fallen off the bus.");
  EXPECT_EQ(b.records[1].line, "hello");
}

// A record whose priority names a facility other than kern was written to /dev/kmsg by a process
// (the kernel turns a process's kern into user): a privileged pod's or a service's line, not the
// kernel's. Where the form shows no facility (plain dmesg), a record stays the kernel's.
TEST(Dmesg, ARecordAProcessWroteIsNoKernelRecord) {
  const std::string xid = "NVRM: Xid (PCI:0000:44:00): 79, pid=1, GPU has fallen off the bus.";
  const std::vector<std::pair<std::string, StreamKind>> cases = {
      {"<14>[    5.000000] ", StreamKind::kOther},  // user.info, as `dmesg -r` prints it
      {"<4>[    6.000000] ", StreamKind::kKernel},  // kern.warning
      {"12,7,7000000,-;", StreamKind::kOther},      // /dev/kmsg: user.warning
      {"4,8,8000000,-;", StreamKind::kKernel},
      {"user  :warn  : 2025-01-21T04:41:44,285060+00:00 ", StreamKind::kOther},  // dmesg -x
      {"kern  :warn  : 2025-01-21T04:41:45,285060+00:00 ", StreamKind::kKernel},
      {"[    9.000000] ", StreamKind::kKernel}};
  for (const auto& [head, stream] : cases) {
    auto parser = makeParser(Format::kDmesg, {});
    RecordBatch b;
    const std::string line = head + xid;  // the record views it until finish()
    EXPECT_TRUE(parser->parse(line, &b)) << head;
    parser->finish(&b);
    ASSERT_EQ(b.records.size(), 1U) << head;
    EXPECT_EQ(b.records[0].line, xid) << head;
    EXPECT_EQ(b.records[0].stream, stream) << head;
  }
}

// /dev/kmsg escapes a record's newlines (and other bytes below ' ', and '\\' itself) as \xNN: the
// NVIDIA driver's three-line "fallen off the bus" report is one record, whose GPU is named on its
// first line. Unescaped, it reads as dmesg's joined continuations do.
TEST(Dmesg, KmsgEscapesAreUndone) {
  auto parser = makeParser(Format::kDmesg, {});
  RecordBatch b;
  EXPECT_TRUE(parser->parse(
      "4,1001,1843308145,-;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: 10de:26b5) "
      "installed in this system has\\x0aNVRM: fallen off the bus and is not responding to "
      "commands.",
      &b));
  EXPECT_TRUE(parser->parse("6,1002,1843308146,-;a \\x5c in a path, \\xZZ and a cut \\x4", &b));
  EXPECT_TRUE(parser->parse("[ 1.0] not kmsg: \\x0a stays", &b));
  parser->finish(&b);
  ASSERT_EQ(b.records.size(), 3U);
  EXPECT_EQ(b.records[0].line,
            "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system "
            "has\nNVRM: fallen off the bus and is not responding to commands.");
  EXPECT_EQ(b.records[1].line, "a \\ in a path, \\xZZ and a cut \\x4");
  EXPECT_EQ(b.records[2].line, "not kmsg: \\x0a stays");
}

TEST(Dmesg, IndentedKeyValueLinesOfOtherFormsAreStillContinuations) {
  auto parser = makeParser(Format::kDmesg, {});
  RecordBatch b;
  EXPECT_TRUE(parser->parse("[ 1.0] mlx5_core: settings", &b));
  EXPECT_TRUE(parser->parse("        MODE=fast", &b));
  parser->finish(&b);
  ASSERT_EQ(b.records.size(), 1U);
  EXPECT_EQ(b.records[0].line, "mlx5_core: settings\nMODE=fast");
}

TEST(Dmesg, UptimeAfterBootTimePastInt64IsMalformed) {
  // /work/scratch/h3/t.dmesg and o2.dmesg with --boot-time 2261-12-31T00:00:00Z
  ParseOptions o;
  o.boot_time_ns = civilToNanos(2261, 12, 31, 0, 0, 0);
  auto parser = makeParser(Format::kDmesg, o);
  RecordBatch b;
  EXPECT_FALSE(parser->parse("[999999999.999999] NVRM: Xid (PCI:0000:a1:00): 79, x", &b));
  EXPECT_FALSE(parser->parse("6,1,999999999999999,-;NVRM: Xid (PCI:0000:a1:00): 79, x", &b));
  EXPECT_TRUE(parser->parse("[8000000.0] NVRM: Xid (PCI:0000:a1:00): 79, x", &b));  // 2262-04
  parser->finish(&b);
  ASSERT_EQ(b.records.size(), 1U);
  EXPECT_EQ(b.records[0].time_ns, *o.boot_time_ns + 8000000 * kNanosPerSecond);
}

TEST(Dmesg, CtimeStampThatNamesNoRealTimeIsNoStamp) {
  auto parser = makeParser(Format::kDmesg, {});
  RecordBatch b;
  for (const char* line : {"[Sat Feb 31 21:29:39 2024] x", "[Thu Feb 29 21:29:39 2023] x",
                           "[Fri Apr  x 21:29:39 2024] x", "[Fri Apr  5 2x:29:39 2024] x",
                           "[Fri Apr  5 24:29:39 2024] x"}) {
    EXPECT_FALSE(parser->parse(line, &b)) << line;
  }
  EXPECT_TRUE(parser->parse("[Thu Feb 29 21:29:39 2024] x", &b));
}

// dmesg --reltime (-e, and -H's output): "[Nov30 08:25]" when the minute changes (util-linux's
// "%b%e %H:%M", so "[Nov 5 ...]" early in a month), else the time since the record before. The
// deltas used to add up from 1970 and across the minutes: an hour between two records became
// seconds, and a window counted records an hour apart as one burst.
TEST(Dmesg, ReltimeDeltasAddToTheMinuteBeforeThem) {
  ParseOptions o;
  o.year = 2025;
  auto parser = makeParser(Format::kDmesg, o);
  RecordBatch b;
  const std::vector<std::string> lines = {
      "[  +0.500000] cut: no minute before it",
      "[Dec31 23:58] a",
      "[  +5.500000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
      "[ +12.000000] b",
      "kern  :warn  : [Dec31 23:59] c",  // with --decode
      "[  +0.000001] d",
      "[Jan 1 01:00] e",  // the next year: the month went back
      "[Feb29 00:00] 2026 has no Feb 29",
      "[  +0.000002] f"};
  std::vector<bool> parsed;
  for (const std::string& l : lines) {
    parsed.push_back(parser->parse(l, &b));
  }
  parser->finish(&b);
  EXPECT_EQ(parsed, (std::vector<bool>{false, true, true, true, true, true, true, false, true}));
  const int64_t minute = civilToNanos(2025, 12, 31, 23, 58, 0);
  const int64_t us = 1000;
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"a", minute},
      {"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
       minute + 5'500'000 * us},
      {"b", minute + 17'500'000 * us},
      {"c", minute + 60 * kNanosPerSecond},
      {"d", minute + 60 * kNanosPerSecond + us},
      {"e", civilToNanos(2026, 1, 1, 1, 0, 0)},
      {"f", civilToNanos(2026, 1, 1, 1, 0, 0) + 2 * us}};
  ASSERT_EQ(b.records.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(b.records[i].line, want[i].first);
    EXPECT_EQ(b.records[i].time_ns, want[i].second) << want[i].first;
    EXPECT_EQ(b.records[i].stream, StreamKind::kKernel);
  }
  EXPECT_EQ(detectFormat("[Nov 5 08:25] x\n[  +0.000123] y\n"), Format::kDmesg);
}

// Without --year, as syslog's `Mon DD`: a first minute over a day in the future is last year's.
TEST(Dmesg, WithoutAYearAFirstReltimeMinuteInTheFutureIsLastYears) {
  ParseOptions o;
  o.year = 2027;
  o.now_ns = civilToNanos(2027, 1, 3, 9, 0, 0);
  auto parser = makeParser(Format::kDmesg, o);
  RecordBatch b;
  EXPECT_TRUE(parser->parse("[Dec31 23:58] a", &b));
  EXPECT_TRUE(parser->parse("[Jan 1 00:10] b", &b));
  parser->finish(&b);
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2026, 12, 31, 23, 58, 0));
  EXPECT_EQ(b.records[1].time_ns, civilToNanos(2027, 1, 1, 0, 10, 0));
}

}  // namespace
}  // namespace faultline
