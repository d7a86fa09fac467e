// Syslog `Mon DD` stamps: the year they lack, and stamps that name no real time.
#include <gtest/gtest.h>

#include "core/time.h"
#include "ingest/formats/formats.h"

namespace faultline {
namespace {

// Parses `lines` with one parser (one file); the times of the records, and how many were refused.
std::vector<int64_t> times(const std::vector<std::string>& lines, int year, int* refused) {
  ParseOptions o;
  o.year = year;
  auto parser = makeParser(Format::kSyslog, o);
  RecordBatch batch;
  *refused = 0;
  for (const std::string& l : lines) {
    if (!parser->parse(l, &batch)) {
      ++*refused;
    }
  }
  parser->finish(&batch);
  std::vector<int64_t> out;
  for (const LogRecord& r : batch.records) {
    out.push_back(r.time_ns);
  }
  return out;
}

TEST(Syslog, AStampWhoseMonthJumpsOverHalfAYearChangesTheYear) {
  // /work/scratch/h3/rollover.syslog: a log crossing New Year.
  const std::vector<std::string> lines = {"Dec 31 23:59:00 gpu-n1 kernel: ib0: lost carrier",
                                          "Jan  1 00:30:00 gpu-n1 kernel: ib0: lost carrier",
                                          "Feb 29 01:00:00 gpu-n1 kernel: ib0: lost carrier",
                                          "Jan  5 01:00:00 gpu-n1 kernel: out of order"};
  int refused = 0;
  EXPECT_EQ(times(lines, 2023, &refused),
            (std::vector<int64_t>{civilToNanos(2023, 12, 31, 23, 59, 0),
                                  civilToNanos(2024, 1, 1, 0, 30, 0),
                                  civilToNanos(2024, 2, 29, 1, 0, 0),  // 2024 is a leap year
                                  civilToNanos(2024, 1, 5, 1, 0, 0)}));
  EXPECT_EQ(refused, 0);
  // Each parser (file) starts at the year given: the first line's.
  EXPECT_EQ(times({lines[1]}, 2023, &refused),
            std::vector<int64_t>{civilToNanos(2023, 1, 1, 0, 30, 0)});
  // A lagging host's December line after New Year, in a file several hosts write, is of the year
  // before; the next January line is of the new year again.
  EXPECT_EQ(times({"Jan  1 00:00:10 a k: x", "Dec 31 23:59:50 b k: y", "Jan  1 00:00:20 a k: z"},
                  2024, &refused),
            (std::vector<int64_t>{civilToNanos(2024, 1, 1, 0, 0, 10),
                                  civilToNanos(2023, 12, 31, 23, 59, 50),
                                  civilToNanos(2024, 1, 1, 0, 0, 20)}));
  // Half a year back is out of order, not a new year.
  EXPECT_EQ(times({"Jul  1 00:00:00 h k: a", "Jan  1 00:00:00 h k: b"}, 2025, &refused)[1],
            civilToNanos(2025, 1, 1, 0, 0, 0));
  EXPECT_EQ(times({"Jan  1 00:00:00 h k: a", "Jul  1 00:00:00 h k: b"}, 2025, &refused)[1],
            civilToNanos(2025, 7, 1, 0, 0, 0));
  // A sparse log (a kernel-only file, a grep) goes on months later: the same year. Only a
  // December line after a January one is a lagging host's (it was read as the year before from
  // any jump on of seven months or more).
  EXPECT_EQ(times({"Jan  5 10:00:00 h k: a", "Aug  5 10:00:00 h k: b"}, 2026, &refused)[1],
            civilToNanos(2026, 8, 5, 10, 0, 0));
  EXPECT_EQ(times({"Feb  5 10:00:00 h k: a", "Nov  5 10:00:00 h k: b"}, 2026, &refused)[1],
            civilToNanos(2026, 11, 5, 10, 0, 0));
  // No year past 2261: int64 ns end in April 2262.
  EXPECT_EQ(times({"Dec 31 00:00:00 h k: a", "Jan  1 00:00:00 h k: b"}, 2261, &refused).size(), 1U);
  EXPECT_EQ(refused, 1);
}

// Without --year, a file's first `Mon DD` stamp takes the current year unless that puts it over a
// day in the future: then it is last year's. Read in January, last December's log (the rotated
// kern.log.1 beside January's kern.log) was placed eleven months ahead, after January's lines.
TEST(Syslog, WithoutAYearAFirstStampInTheFutureIsLastYears) {
  ParseOptions o;
  o.year = 2027;
  o.now_ns = civilToNanos(2027, 1, 3, 9, 0, 0);
  auto first = [&](const std::string& line) {
    auto parser = makeParser(Format::kSyslog, o);
    RecordBatch b;
    EXPECT_TRUE(parser->parse(line, &b)) << line;
    parser->finish(&b);
    return b.records.empty() ? int64_t{0} : b.records[0].time_ns;
  };
  EXPECT_EQ(first("Dec 28 10:00:00 gpu-1 kernel: a"), civilToNanos(2026, 12, 28, 10, 0, 0));
  EXPECT_EQ(first("Jan  2 10:00:00 gpu-1 kernel: a"), civilToNanos(2027, 1, 2, 10, 0, 0));
  // Within a day ahead (a host in a time zone ahead of UTC): this year's.
  EXPECT_EQ(first("Jan  4 08:00:00 gpu-1 kernel: a"), civilToNanos(2027, 1, 4, 8, 0, 0));
  EXPECT_EQ(first("Jan  4 10:00:00 gpu-1 kernel: a"), civilToNanos(2026, 1, 4, 10, 0, 0));
  // Only the first stamp: the lines after it go on from its year (Dec -> Jan is the next year).
  auto parser = makeParser(Format::kSyslog, o);
  RecordBatch b;
  EXPECT_TRUE(parser->parse("Dec 31 23:59:00 gpu-1 kernel: a", &b));
  EXPECT_TRUE(parser->parse("Jan  1 00:01:00 gpu-1 kernel: b", &b));
  parser->finish(&b);
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[1].time_ns, civilToNanos(2027, 1, 1, 0, 1, 0));
  // On New Year's Eve, a host ahead of UTC already logs the next year.
  o.now_ns = civilToNanos(2026, 12, 31, 23, 0, 0);
  o.year = 2026;
  EXPECT_EQ(first("Jan  1 07:00:00 gpu-1 kernel: a"), civilToNanos(2027, 1, 1, 7, 0, 0));
  EXPECT_EQ(first("Dec 31 22:00:00 gpu-1 kernel: a"), civilToNanos(2026, 12, 31, 22, 0, 0));
  // Feb 29 in a year that has none is of the year before, a leap year's (read in January 2029).
  o.year = 2029;
  o.now_ns = civilToNanos(2029, 1, 10, 0, 0, 0);
  EXPECT_EQ(first("Feb 29 10:00:00 gpu-1 kernel: a"), civilToNanos(2028, 2, 29, 10, 0, 0));
  // Read in a leap year before its Feb 29: the last one, four years back (the year before has
  // none; it was refused). Past 2100, which has none, eight.
  o.year = 2028;
  o.now_ns = civilToNanos(2028, 1, 10, 0, 0, 0);
  EXPECT_EQ(first("Feb 29 10:00:00 gpu-1 kernel: a"), civilToNanos(2024, 2, 29, 10, 0, 0));
  o.year = 2104;
  o.now_ns = civilToNanos(2104, 1, 10, 0, 0, 0);
  EXPECT_EQ(first("Feb 29 10:00:00 gpu-1 kernel: a"), civilToNanos(2096, 2, 29, 10, 0, 0));
  int refused = 0;
  EXPECT_EQ(times({"Mar  5 10:00:00 gpu-1 kernel: a"}, 2028, &refused)[0],
            civilToNanos(2028, 3, 5, 10, 0, 0));  // no now_ns (--year): the year given
}

// A file written with a template that leaves out the host (or the tag) put the kernel's line
// after the stamp: its first word was taken for a host and the rest for a process's record, so
// an Xid was no hit. A host never ends in a colon, nor does an ident hold one.
TEST(Syslog, ALineWithoutHostOrTagIsMalformedNotAProcesssRecord) {
  for (const char* line :
       {"2026-11-30T08:25:06.123456+00:00 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1",
        "2026-11-30T08:25:06.123456+00:00 NVRM: Xid (PCI:0000:3b:00): 79, pid=1",
        "2026-11-30T08:25:06+00:00 mlx5_core 0000:41:00.1: Port module event: Cable unplugged",
        "Nov 30 08:25:06 NVRM: Xid (PCI:0000:3b:00): 79, pid=1"}) {
    int refused = 0;
    EXPECT_TRUE(times({line}, 2026, &refused).empty()) << line;
    EXPECT_EQ(refused, 1) << line;
  }
  int refused = 0;
  EXPECT_EQ(times({"Nov 30 08:25:06 gpu-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1",
                   "Jun 14 15:16:01 combo sshd(pam_unix)[19939]: check pass; user unknown"},
                  2026, &refused)
                .size(),
            2U);
  EXPECT_EQ(refused, 0);
}

TEST(Syslog, AStampThatNamesNoRealTimeIsMalformed) {
  // /work/scratch/h3/bad.syslog and leap.syslog
  for (const char* line : {"Feb 31 10:00:00 gpu-n1 kernel: x", "Feb x9 10:00:00 gpu-n1 kernel: x",
                           "Feb 14 99:99:99 gpu-n1 kernel: x", "Feb 14 24:00:00 gpu-n1 kernel: x",
                           "Feb 14 23:60:00 gpu-n1 kernel: x", "Feb 14 23:00:61 gpu-n1 kernel: x",
                           "Feb  0 10:00:00 gpu-n1 kernel: x", "Apr 31 10:00:00 gpu-n1 kernel: x",
                           "Feb 29 10:00:00 gpu-n1 kernel: x"}) {
    int refused = 0;
    EXPECT_TRUE(times({line}, 2025, &refused).empty()) << line;
    EXPECT_EQ(refused, 1) << line;
  }
  int refused = 0;
  EXPECT_EQ(times({"Feb 29 10:00:00 gpu-n1 kernel: x"}, 2024, &refused),
            std::vector<int64_t>{civilToNanos(2024, 2, 29, 10, 0, 0)});
  EXPECT_EQ(times({"Dec 31 23:59:60 gpu-n1 kernel: leap"}, 2024, &refused),
            std::vector<int64_t>{civilToNanos(2024, 12, 31, 23, 59, 60)});
  // Format detection knows no year: Feb 29 still looks like syslog.
  EXPECT_EQ(detectFormat("Feb 29 10:00:00 gpu-n1 kernel: x\n"), Format::kSyslog);
}

}  // namespace
}  // namespace faultline
