// The archive line formats, on real lines (sources in tests/data/sample/NOTICE and rules/*.yaml).
#include "ingest/formats/formats.h"

#include <gtest/gtest.h>

#include "core/time.h"

namespace faultline {
namespace {

RecordBatch parseAll(Format f, const std::vector<std::string>& lines, ParseOptions opts = {}) {
  if (opts.node.empty()) {
    opts.node = "n1";
  }
  auto parser = makeParser(f, opts);
  RecordBatch batch;
  // The batch owns the text its records point into, as it does in the archive reader.
  auto text = std::make_shared<const std::vector<std::string>>(lines);
  batch.hold(text, 0);  // memory not accounted in this test
  for (const std::string& l : *text) {
    parser->parse(l, &batch);
  }
  parser->finish(&batch);
  return batch;
}

TEST(Dmesg, UptimeStampsAreOffsetsFromTheFirstLineWithoutBootTime) {
  const RecordBatch b = parseAll(Format::kDmesg, {"[74889.542031] pcieport 0000:00:02.0: AER: x",
                                                  "[74889.644138] NVRM: Xid (PCI:0000:02:00): 79"});
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].time_ns, 0);
  EXPECT_EQ(b.records[1].time_ns, 102107000);
  EXPECT_EQ(b.records[1].line, "NVRM: Xid (PCI:0000:02:00): 79");
  EXPECT_EQ(b.records[1].node, "n1");
  EXPECT_EQ(b.records[1].stream, StreamKind::kKernel);
}

TEST(Dmesg, BootTimeMakesUptimeAbsolute) {
  ParseOptions o;
  o.boot_time_ns = civilToNanos(2025, 1, 1, 0, 0, 0);
  const RecordBatch b =
      parseAll(Format::kDmesg, {"<6>[    2.608284] mlx5_core 0000:41:00.1: x"}, o);
  ASSERT_EQ(b.records.size(), 1U);
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2025, 1, 1, 0, 0, 2, 608284000));
  EXPECT_EQ(b.records[0].line, "mlx5_core 0000:41:00.1: x");
}

TEST(Dmesg, ReadsCtimeKmsgAndIsoForms) {
  const RecordBatch b = parseAll(
      Format::kDmesg,
      {"[Sun Feb 23 16:24:18 2025] NVRM: GPU Board Serial Number: 1650124014249",
       "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 NVRM: Xid (PCI:0000:38:00): 43, x",
       "6,3973,227996636,-;nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid "
       "context, skipping further processing"});
  ASSERT_EQ(b.records.size(), 3U);
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2025, 2, 23, 16, 24, 18));
  EXPECT_EQ(b.records[0].line, "NVRM: GPU Board Serial Number: 1650124014249");
  EXPECT_EQ(b.records[1].time_ns, civilToNanos(2025, 1, 21, 4, 41, 44, 283302000));
  EXPECT_EQ(b.records[1].line, "NVRM: Xid (PCI:0000:38:00): 43, x");
  EXPECT_EQ(b.records[2].line.substr(0, 14), "nvidia-peermem");
}

TEST(Dmesg, KmsgMicrosecondsPastHoursOfUptime) {
  // 39 days of uptime in µs: more than fits int64 ns if read as seconds.
  const RecordBatch b =
      parseAll(Format::kDmesg, {"6,3973,3400000000000,-;a", "6,3974,3400000000001,-;b"});
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[1].time_ns - b.records[0].time_ns, 1000);
  auto p = makeParser(Format::kDmesg, {});
  RecordBatch overflow;
  EXPECT_FALSE(p->parse("[20190531857123.5] absurd uptime", &overflow));
}

TEST(Dmesg, JoinsPrintkContinuationLines) {
  // NVIDIA/NVSentinel#155: one printk record over three lines.
  const RecordBatch b = parseAll(
      Format::kDmesg, {"[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
                       "               NVRM: (PCI ID: 10de:26b5) installed in this system has",
                       "               NVRM: fallen off the bus and is not responding to commands.",
                       "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s)."});
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].line,
            "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this "
            "system has\nNVRM: fallen off the bus and is not responding to commands.");
}

TEST(Dmesg, ReadsTimeFormatIsoWithoutDecode) {
  // util-linux `dmesg --time-format iso`: the comma before the microseconds marks it.
  const std::string line =
      "2025-01-21T04:41:44,283302+00:00 NVRM: Xid (PCI:0000:44:00): 79, pid=1, name=x, GPU has "
      "fallen off the bus.";
  const RecordBatch b = parseAll(Format::kDmesg, {line});
  ASSERT_EQ(b.records.size(), 1U);
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2025, 1, 21, 4, 41, 44, 283302000));
  EXPECT_EQ(b.records[0].line, line.substr(33));
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(detectFormat(line + "\n"), Format::kDmesg);
  // Stamps of syslog and journalctl, without the comma, stay syslog; an application's log with a
  // comma (Python logging, log4j) is no kernel log.
  EXPECT_EQ(detectFormat("2024-02-14T05:03:41.123456+00:00 h kernel: x\n"), Format::kSyslog);
  EXPECT_NE(detectFormat("2025-01-21 04:41:44,283 WARNING NVRM: Xid (PCI:0000:44:00): 79\n"),
            Format::kDmesg);
  EXPECT_NE(detectFormat("2025-01-21T04:41:44,283+00:00 x: NVRM: Xid (PCI:0000:44:00): 79\n"),
            Format::kDmesg);
}

// util-linux `dmesg --decode` (-x) puts "FACILITY:LEVEL : " before the stamp of every time
// format, and `dmesg --show-delta` (-d) "<    0.000123>" after the uptime. The facility tells a
// process's /dev/kmsg write from the kernel's record, as in the iso form.
TEST(Dmesg, ReadsDecodeAndShowDeltaWithEveryStamp) {
  const std::string xid = "NVRM: Xid (PCI:0000:44:00): 79, pid=1, GPU has fallen off the bus.";
  ParseOptions o;
  o.boot_time_ns = civilToNanos(2026, 11, 28, 10, 0, 0);
  const std::vector<std::pair<std::string, StreamKind>> heads = {
      {"kern  :warn  : [    5.000000] ", StreamKind::kKernel},
      {"user  :info  : [    6.000000] ", StreamKind::kOther},
      {"[    7.000000 <    1.000000>] ", StreamKind::kKernel},
      {"kern  :notice: [    8.000000 <    1.000000>] ", StreamKind::kKernel},
      {"authpriv:err   : [    9.000000] ", StreamKind::kOther},
      {"kern  :err   : [Sat Nov 28 10:00:10 2026] ", StreamKind::kKernel},
  };
  std::vector<std::string> lines;
  for (const auto& [head, stream] : heads) {
    lines.push_back(head + xid);
    EXPECT_EQ(detectFormat(lines.back() + "\n"), Format::kDmesg) << head;
  }
  const RecordBatch b = parseAll(Format::kDmesg, lines, o);
  ASSERT_EQ(b.records.size(), heads.size());
  for (size_t i = 0; i < heads.size(); ++i) {
    EXPECT_EQ(b.records[i].time_ns, *o.boot_time_ns + static_cast<int64_t>(5 + i) * kNanosPerSecond)
        << heads[i].first;
    EXPECT_EQ(b.records[i].line, xid) << heads[i].first;
    EXPECT_EQ(b.records[i].stream, heads[i].second) << heads[i].first;
  }
  // A line whose colons name no facility and level is no decoded head.
  auto p = makeParser(Format::kDmesg, {});
  RecordBatch none;
  EXPECT_FALSE(p->parse("nvidia: probe: [    5.000000] x", &none));
  EXPECT_FALSE(p->parse("kern  :warn  :[    5.000000] x", &none));
}

TEST(Dmesg, RejectsLinesWithoutAStamp) {
  auto p = makeParser(Format::kDmesg, {});
  RecordBatch b;
  EXPECT_FALSE(p->parse("Panic#1 Part2", &b));
  EXPECT_FALSE(p->parse("   indented but nothing to continue", &b));
  EXPECT_TRUE(b.records.empty());
}

TEST(Syslog, ReadsBsdAndIsoFormsAndTheKernelTag) {
  ParseOptions o;
  o.year = 2025;
  const RecordBatch b = parseAll(
      Format::kSyslog,
      {"Feb 14 05:03:41 000-000-00000-1-gpu-1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 "
       "Link INIT",
       "Feb 14 05:03:41 000-000-00000-1-gpu-1 systemd[1]: Started systemd-journald.service.",
       "2024-02-14T05:03:41+0000 gpu-2 kernel: NVRM: Xid (PCI:0000:44:00): 79, x",
       "Apr  9 21:05:38.106121 str-s6100-acs-4 INFO kernel: [10601.214044] igb 0000:00:14.0 eth0"},
      o);
  ASSERT_EQ(b.records.size(), 4U);
  EXPECT_EQ(b.records[0].node, "000-000-00000-1-gpu-1");
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2025, 2, 14, 5, 3, 41));
  EXPECT_EQ(b.records[0].line, "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT");
  EXPECT_EQ(b.records[1].stream, StreamKind::kOther);
  EXPECT_EQ(b.records[2].time_ns, civilToNanos(2024, 2, 14, 5, 3, 41));
  EXPECT_EQ(b.records[2].node, "gpu-2");
  EXPECT_EQ(b.records[3].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[3].node, "str-s6100-acs-4");
}

// `logger -t kernel` is a process: journalctl's text forms print its tag with the PID
// (`kernel[4242]:`), as rsyslog does with `logger -i`; the kernel's own records have none.
TEST(Syslog, AKernelTagWithAPidIsAProcess) {
  const RecordBatch b =
      parseAll(Format::kSyslog,
               {"2026-11-28T10:01:40+0000 gpu-sp1 kernel[4242]: NVRM: Xid (PCI:0000:44:00): 79, x",
                "2026-11-28T10:01:41+0000 gpu-sp1 kernel: NVRM: Xid (PCI:0000:44:00): 79, x"});
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].stream, StreamKind::kOther);
  EXPECT_EQ(b.labels[b.records[0].labels_begin].value, "kernel");
  EXPECT_EQ(b.records[1].stream, StreamKind::kKernel);
}

TEST(Syslog, JoinsTheLinesJournalctlIndents) {
  // NVIDIA/NVSentinel#155's report as `journalctl -k -o short-iso` prints it.
  const RecordBatch b = parseAll(
      Format::kSyslog,
      {"2025-06-02T13:13:04+0000 gpu-7 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0",
       "                                      NVRM: (PCI ID: 10de:26b5) installed in this system "
       "has",
       "                                      NVRM: fallen off the bus and is not responding to "
       "commands.",
       "not syslog",
       "2025-06-02T13:13:04+0000 gpu-7 kernel: NVRM: The NVIDIA probe routine failed for 1 "
       "device(s)."});
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].line,
            "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this "
            "system has\nNVRM: fallen off the bus and is not responding to commands.");
  EXPECT_EQ(b.records[0].node, "gpu-7");
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[1].line, "NVRM: The NVIDIA probe routine failed for 1 device(s).");
}

TEST(Syslog, AHeldRecordOutlivesItsLine) {
  // LineParser::parse: a line may be reused once the parse() after it returns.
  auto parser = makeParser(Format::kSyslog, {});
  RecordBatch b;
  std::string head = "2025-06-02T13:13:04+0000 gpu-7 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0";
  std::string cont = "      NVRM: fallen off the bus.";
  ASSERT_TRUE(parser->parse(head, &b));
  ASSERT_TRUE(parser->parse(cont, &b));
  head.assign(head.size(), 'z');
  cont.assign(cont.size(), 'z');
  const std::string next = "2025-06-02T13:13:05+0000 gpu-8 systemd[1]: x";
  ASSERT_TRUE(parser->parse(next, &b));
  parser->finish(&b);
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].node, "gpu-7");
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[0].line, "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: fallen off the bus.");
  EXPECT_EQ(b.labels[b.records[0].labels_begin].value, "kernel");
}

TEST(Syslog, OnlyALevelMayStandBeforeTheTag) {
  // A container runtime's log read as syslog: "F kernel" is a pod's own text, not the kernel tag.
  // Stamped to the microsecond, as no runtime stamps, it is read as syslog; to the nanosecond it
  // is no syslog line at all (isContainerStamp).
  const RecordBatch b = parseAll(
      Format::kSyslog,
      {"2024-02-14T05:03:41.123456Z stdout F kernel: NVRM: Xid (PCI:0000:44:00): 79, x",
       "2024-02-14T05:03:41.123456789Z stdout F kernel: NVRM: Xid (PCI:0000:44:00): 79, x",
       "Apr  9 21:05:38.106121 sw-1 NOTICE kernel: igb 0000:00:14.0 eth0: NIC Link is Down"});
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].stream, StreamKind::kOther);
  EXPECT_EQ(b.records[1].stream, StreamKind::kKernel);
}

// `journalctl -o short-monotonic` was detected as dmesg, so every line was the kernel's: a
// process that printed an Xid line tainted the node. It is syslog with a `[seconds]` stamp: the
// host names the node, the `kernel` tag alone makes a kernel record.
TEST(Syslog, ReadsJournalctlShortMonotonic) {
  const std::vector<std::string> lines = {
      "[    5.123456] gpu-1 kernel: Linux version 6.1.0",
      "[   15.123456] gpu-1 python3[1234]: NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off "
      "the bus.",
      "[   16.000000] gpu-1 kernel: NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.",
      "-- Boot 1c9c1fcd5a6e4e5e9d0f7f5b0a0c8a51 --"};
  std::string text;
  for (const std::string& l : lines) {
    text += l + "\n";
  }
  ASSERT_EQ(detectFormat(text), Format::kSyslog);
  RecordBatch b = parseAll(Format::kSyslog, lines);
  ASSERT_EQ(b.records.size(), 3U);
  EXPECT_EQ(b.records[0].node, "gpu-1");
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[0].time_ns, 0);  // without a boot time the first stamp is time 0
  EXPECT_EQ(b.records[1].stream, StreamKind::kOther);
  EXPECT_EQ(b.records[1].line, "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.");
  EXPECT_EQ(b.records[1].time_ns, 10 * kNanosPerSecond);
  EXPECT_EQ(b.records[2].stream, StreamKind::kKernel);

  ParseOptions o;
  o.boot_time_ns = civilToNanos(2025, 1, 1, 0, 0, 0);
  b = parseAll(Format::kSyslog, lines, o);
  ASSERT_EQ(b.records.size(), 3U);
  EXPECT_EQ(b.records[2].time_ns, civilToNanos(2025, 1, 1, 0, 0, 16));

  // dmesg's own lines stay dmesg's, and are no syslog records when forced.
  EXPECT_EQ(detectFormat("[    3.100000] systemd[1]: Started Journal Service.\n"
                         "[    2.200000] hub 1-0:1.0: USB hub found\n"
                         "[    9.000000] usb 1-1: new high-speed USB device number 2\n"),
            Format::kDmesg);
  EXPECT_TRUE(parseAll(Format::kSyslog, {"[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, x",
                                         "[ 9.0] usb 1-1: new high-speed USB device number 2"})
                  .records.empty());
}

// `journalctl -o short-delta` (systemd's output_timestamp_monotonic: the delta after the seconds,
// 16 spaces for the first entry) was detected as `dmesg -d`: a process's line was the kernel's.
TEST(Syslog, ReadsJournalctlShortDelta) {
  const std::vector<std::string> lines = {
      "[    5.000000                ] gpu-j2 kernel: Linux version 6.1.0",
      "[  105.000000 <  100.000000 >] gpu-j2 myjob[4242]: NVRM: Xid (PCI:0000:44:00): 79, x",
      "[  106.000000 <    1.000000*>] gpu-j2 kernel: nvidia-modeset: x"};
  std::string text;
  for (const std::string& l : lines) {
    text += l + "\n";
  }
  ASSERT_EQ(detectFormat(text), Format::kSyslog);
  const RecordBatch b = parseAll(Format::kSyslog, lines);
  ASSERT_EQ(b.records.size(), 3U);
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[1].node, "gpu-j2");
  EXPECT_EQ(b.records[1].stream, StreamKind::kOther);
  EXPECT_EQ(b.records[1].time_ns, 100 * kNanosPerSecond);
  EXPECT_EQ(b.records[2].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[2].time_ns, 101 * kNanosPerSecond);
  // dmesg -d stays dmesg.
  EXPECT_EQ(detectFormat("[    5.000000 <    0.000123>] usb 1-1: new high-speed USB device\n"),
            Format::kDmesg);
}

TEST(JournalJson, KernelOnlyWhereJournaldSaysSo) {
  const RecordBatch b = parseAll(
      Format::kJournalJson,
      {R"({"__REALTIME_TIMESTAMP":"1741000003000000","_HOSTNAME":"trn-1","_TRANSPORT":"kernel","MESSAGE":"NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR"})",
       R"({"__REALTIME_TIMESTAMP":"1741000004000000","_HOSTNAME":"trn-2","_TRANSPORT":"syslog","SYSLOG_IDENTIFIER":"myapp","MESSAGE":"NVRM: Xid (PCI:0000:44:00): 79"})",
       R"({"__REALTIME_TIMESTAMP":"1741000005000000","_HOSTNAME":"trn-3","SYSLOG_IDENTIFIER":"kernel","MESSAGE":[78,86,82,77]})",
       R"({"no":"message"})",
       // No time to place it at: malformed, not a record of 1970 (a review, 2026-12-02).
       R"({"_HOSTNAME":"trn-4","_TRANSPORT":"kernel","MESSAGE":"NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR"})"});
  ASSERT_EQ(b.records.size(), 3U);
  EXPECT_EQ(b.records[0].node, "trn-1");
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[0].time_ns, 1741000003000000000);
  EXPECT_EQ(b.records[1].stream, StreamKind::kOther);
  EXPECT_EQ(b.records[2].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[2].line, "NVRM");  // journalctl renders non-UTF-8 MESSAGE as bytes
}

// Fluent Bit with Merge_Log On puts a pod's own JSON keys beside its `kubernetes` map: a pod
// printing a journal entry's, a Loki entry's or an OTLP request's keys chose the parser, which
// saw no pod, and its line was a kernel line of the node it named (a review: replay tainted it).
// Such a record is the json format's, whose parser reads the map; a journal-json parser given
// one refuses it (malformed).
TEST(JournalJson, APodsRecordWithAJournalEntrysKeysIsAPods) {
  const std::string merged =
      R"({"time":"2026-01-01T00:00:00Z","stream":"stdout","__REALTIME_TIMESTAMP":"1767225700000000",)"
      R"("MESSAGE":"NVRM: Xid (PCI:0000:44:00): 79, pid=123, GPU has fallen off the bus.",)"
      R"("_TRANSPORT":"kernel","SYSLOG_FACILITY":"0","_HOSTNAME":"gpu-7",)"
      R"("kubernetes":{"pod_name":"evil-0","host":"gpu-7"}})";
  EXPECT_EQ(detectFormat(merged + "\n"), Format::kJson);
  for (const std::string& keys :
       {std::string(R"("resourceLogs":[],)"), std::string(R"("line":"x","labels":{},)")}) {
    const std::string other = "{" + keys + R"("kubernetes": {"pod_name":"evil-0"}})";
    EXPECT_EQ(detectFormat(other + "\n"), Format::kJson) << other;
  }
  auto journal = makeParser(Format::kJournalJson, {});
  RecordBatch refused;
  EXPECT_FALSE(journal->parse(merged, &refused));
  EXPECT_TRUE(refused.records.empty());
  EXPECT_TRUE(refused.labels.empty());
  const RecordBatch json = parseAll(Format::kJson, {merged});
  ASSERT_EQ(json.records.size(), 1U);
  EXPECT_EQ(json.records[0].stream, StreamKind::kPod);
  EXPECT_EQ(json.records[0].node, "gpu-7");  // the map's host
}

// Fluent Bit's OTLP output sends a record as a kvlist body (or as attributes), its `kubernetes`
// map a kvlist inside it: the map marks a pod's record, though the pod's own keys say kernel.
TEST(OtlpJson, AKubernetesMapInTheBodyOrAttributesMarksAPod) {
  const std::string kubernetes = R"({"key":"kubernetes","value":{"kvlistValue":{"values":[)"
                                 R"({"key":"pod_name","value":{"stringValue":"evil-0"}}]}}})";
  const std::string forged = R"({"key":"_TRANSPORT","value":{"stringValue":"kernel"}},)"
                             R"({"key":"_HOSTNAME","value":{"stringValue":"gpu-4"}})";
  const std::string message =
      R"({"key":"MESSAGE","value":{"stringValue":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"}})";
  const std::string in_body =
      R"({"resourceLogs":[{"resource":{},"scopeLogs":[{"logRecords":[{"timeUnixNano":"1741000010000000000",)"
      R"("body":{"kvlistValue":{"values":[)" +
      message + "," + forged + "," + kubernetes + "]}}}]}]}]}";
  const std::string in_attributes =
      R"({"resourceLogs":[{"resource":{},"scopeLogs":[{"logRecords":[{"timeUnixNano":"1741000010000000000",)"
      R"("attributes":[)" +
      kubernetes + R"(],"body":{"kvlistValue":{"values":[)" + message + "," + forged + "]}}}]}]}]}";
  const RecordBatch b = parseAll(Format::kOtlpJson, {in_body, in_attributes});
  ASSERT_EQ(b.records.size(), 2U);
  for (const LogRecord& r : b.records) {
    EXPECT_EQ(r.stream, StreamKind::kPod);
    EXPECT_EQ(r.node, "");  // not the pod's own _HOSTNAME: the map is not read
    EXPECT_EQ(b.label(r, "_HOSTNAME"), "");
  }
}

TEST(OtlpJson, PodAttributesMakeAPodStreamAndJournaldBodiesAKernelOne) {
  const std::string pod =
      R"({"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name","value":{"stringValue":"gpu-4"}},{"key":"k8s.pod.name","value":{"stringValue":"w-0"}}]},"scopeLogs":[{"scope":{},"logRecords":[{"timeUnixNano":"1741000010000000000","body":{"stringValue":"NVRM: Xid (PCI:0000:44:00): 79, fake"}}]}]}]})";
  const std::string journald =
      R"({"resourceLogs":[{"resource":{},"scopeLogs":[{"logRecords":[{"observedTimeUnixNano":"1741000020000000000","body":{"kvlistValue":{"values":[{"key":"MESSAGE","value":{"stringValue":"NVRM: GPU 0000:a1:00.0: GPU has fallen off the bus."}},{"key":"_HOSTNAME","value":{"stringValue":"gpu-6"}},{"key":"_TRANSPORT","value":{"stringValue":"kernel"}}]}}}]}]}]})";
  const RecordBatch b = parseAll(Format::kOtlpJson, {pod, journald});
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].node, "gpu-4");
  EXPECT_EQ(b.records[0].stream, StreamKind::kPod);
  EXPECT_EQ(b.label(b.records[0], "k8s.pod.name"), "w-0");
  EXPECT_EQ(b.records[1].node, "gpu-6");
  EXPECT_EQ(b.records[1].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[1].time_ns, 1741000020000000000);
  EXPECT_EQ(b.records[1].line, "NVRM: GPU 0000:a1:00.0: GPU has fallen off the bus.");
}

TEST(LokiJsonl, LabelsDecideNodeAndStream) {
  const RecordBatch b = parseAll(
      Format::kLokiJsonl,
      {R"({"labels":{"transport":"kernel","node_name":"gpu-8"},"line":"mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link DOWN","timestamp":"2025-03-03T11:07:05.000000000Z"})",
       R"({"labels":{"pod":"w","transport":"kernel","node_name":"gpu-7"},"line":"x","timestamp":"1741000000000000000"})"});
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[0].node, "gpu-8");
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2025, 3, 3, 11, 7, 5));
  EXPECT_EQ(b.records[1].stream, StreamKind::kPod);  // a pod label wins over any kernel label
  EXPECT_EQ(b.records[1].time_ns, 1741000000000000000);
}

TEST(LokiJsonl, AStampThatIsNeitherFormIsMalformed) {
  auto p = makeParser(Format::kLokiJsonl, {});
  RecordBatch b;
  // Lower-case 't' and 'z' are RFC 3339; "2025-03-03x..." is no stamp, and its leading digits
  // are no nanosecond epoch either.
  EXPECT_TRUE(
      p->parse(R"({"labels":{"node":"g1"},"line":"x","timestamp":"2025-03-03t11:07:06z"})", &b));
  EXPECT_FALSE(
      p->parse(R"({"labels":{"node":"g1"},"line":"x","timestamp":"2025-03-03x11:07:06"})", &b));
  // No stamp: no time to place it at, malformed, not a record of 1970 (a review, 2026-12-02).
  EXPECT_FALSE(p->parse(R"({"labels":{"node":"g1"},"line":"x"})", &b));
  ASSERT_EQ(b.records.size(), 1U);
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2025, 3, 3, 11, 7, 6));
}

TEST(DetectFormat, TellsEachFormatApart) {
  EXPECT_EQ(detectFormat("[ 1843.308145] NVRM: x\n[ 1843.4] y\n"), Format::kDmesg);
  EXPECT_EQ(detectFormat("6,3964,206764307,-;nvidia-nvswitch2: open (major=510)\n"),
            Format::kDmesg);
  EXPECT_EQ(detectFormat("Feb 14 05:03:41 h kernel: x\n"), Format::kSyslog);
  EXPECT_EQ(detectFormat("2024-02-14T05:03:41+0000 h kernel: x\n"), Format::kSyslog);
  EXPECT_EQ(detectFormat(R"({"__REALTIME_TIMESTAMP":"1","MESSAGE":"m"})"), Format::kJournalJson);
  EXPECT_EQ(detectFormat(R"({"resourceLogs":[]})"), Format::kOtlpJson);
  EXPECT_EQ(detectFormat(R"({"labels":{},"line":"l","timestamp":"1"})"), Format::kLokiJsonl);
  EXPECT_EQ(detectFormat("just some words\nand more\n"), std::nullopt);
  EXPECT_EQ(detectFormat("2026-11-28T10:00:00.123456789Z epoch 3\n"), Format::kContainer);
  EXPECT_EQ(detectFormat("2026-11-28T10:00:00.12345678Z stdout F epoch 3\n"), Format::kContainer);
  // Microseconds are a syslog writer's (journalctl short-iso-precise, rsyslog RFC 3339).
  EXPECT_EQ(detectFormat("2024-02-14T05:03:41.123456+00:00 h kernel: x\n"), Format::kSyslog);
  // Shippers' records of journal entries, which keep one of MESSAGE and __REALTIME_TIMESTAMP
  // and not the other, and Fluent Bit's tail input's (log).
  EXPECT_EQ(detectFormat(R"({"__REALTIME_TIMESTAMP":"1","message":"m","host":"h"})"),
            Format::kJson);
  EXPECT_EQ(detectFormat(R"({"date":1.5,"MESSAGE":"m","_HOSTNAME":"h"})"), Format::kJson);
  EXPECT_EQ(detectFormat(R"({"log":"m\n","kubernetes":{"host":"h"}})"), Format::kJson);
  EXPECT_EQ(detectFormat(R"({"level":"info","note":"a \"message\" quoted"})"), std::nullopt);
}

// logcli's default output (`STAMP {labels} line`) leaves out of each line the labels every line
// shares: read as syslog, a kernel line was a process's record of a host `{host="gpu-1",`, and an
// Xid went unseen. No format takes it; isLogcliDefault names it for the error.
TEST(DetectFormat, RefusesLogcliDefaultOutput) {
  const std::string labelled =
      "2026-11-30T08:25:06Z {host=\"gpu-1\", transport=\"kernel\"} NVRM: Xid (PCI:0000:3b:00): "
      "79, pid=1234, name=python, GPU has fallen off the bus.\n";
  const std::string shared = "\n2026-11-30T09:25:06+01:00 {} NVRM: Xid (PCI:0000:3b:00): 79\n";
  EXPECT_EQ(detectFormat(labelled), std::nullopt);
  EXPECT_EQ(detectFormat(shared), std::nullopt);
  EXPECT_TRUE(isLogcliDefault(labelled));
  EXPECT_TRUE(isLogcliDefault(shared));
  const RecordBatch b = parseAll(Format::kSyslog, {labelled.substr(0, labelled.size() - 1)});
  EXPECT_TRUE(b.records.empty());
  EXPECT_FALSE(isLogcliDefault("2024-02-14T05:03:41+0000 h kernel: x {a=\"b\"} y\n"));
  EXPECT_FALSE(isLogcliDefault("2024-02-14T05:03:41+0000 {not labels} y\n"));
  EXPECT_FALSE(isLogcliDefault("[ 1843.308145] NVRM: x\n"));
}

// Replay's json format reads a topic's archive (Vector's file or aws_s3 sink, Fluent Bit's s3
// output) with the Kafka source's json decoder: a pod's record is the pod's, whatever its line
// says, and the journal's kernel records are the kernel's.
TEST(Json, ReadsShippersRecordsAsTheKafkaSourceDoes) {
  const std::string pod =
      R"({"kubernetes":{"pod_name":"train-0","pod_namespace":"ml","pod_node_name":"gpu-7",)"
      R"("pod_labels":{"job-name":"train"}},"message":"gpu-3 kernel: NVRM: Xid (PCI:0000:44:00): )"
      R"(79, GPU has fallen off the bus.","stream":"stderr","timestamp":"2026-11-28T10:00:00.1Z"})";
  const std::string kernel =
      R"({"host":"gpu-7","message":"NVRM: Xid (PCI:0000:44:00): 79","_TRANSPORT":"kernel",)"
      R"("SYSLOG_IDENTIFIER":"kernel","timestamp":"2026-11-28T10:00:01Z"})";
  const std::string fluent_bit_tail =
      R"({"date":1764324002.5,"@timestamp":1764324002.5,"log":"epoch 3\n",)"
      R"("kubernetes":{"host":"gpu-8","pod_name":"p","namespace_name":"ml"}})";
  const RecordBatch b = parseAll(Format::kJson, {pod, kernel, fluent_bit_tail});
  ASSERT_EQ(b.records.size(), 3U);
  EXPECT_EQ(b.records[0].stream, StreamKind::kPod);
  EXPECT_EQ(b.records[0].node, "gpu-7");
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2026, 11, 28, 10, 0, 0, 100000000));
  EXPECT_EQ(b.label(b.records[0], "k8s.job.name"), "train");
  EXPECT_EQ(b.records[1].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[1].line, "NVRM: Xid (PCI:0000:44:00): 79");
  EXPECT_EQ(b.records[1].time_ns, civilToNanos(2026, 11, 28, 10, 0, 1));
  EXPECT_EQ(b.records[2].stream, StreamKind::kPod);
  EXPECT_EQ(b.records[2].node, "gpu-8");
  EXPECT_EQ(b.records[2].line, "epoch 3");
  EXPECT_EQ(b.records[2].time_ns, 1764324002500000000);
}

// Replay has no message time to fall back on: a record without a time is malformed, not placed
// at the epoch. One without a node is --node's; a pod naming two nodes is refused.
TEST(Json, ARecordWithoutATimeIsMalformedAndOneWithoutANodeIsTheOptions) {
  ParseOptions o;
  o.node = "gpu-9";
  auto p = makeParser(Format::kJson, o);
  RecordBatch b;
  EXPECT_FALSE(p->parse(R"({"host":"gpu-7","message":"NVRM: Xid 79"})", &b));
  EXPECT_FALSE(p->parse(R"({"host":"gpu-7","message":"x","timestamp":"yesterday"})", &b));
  EXPECT_FALSE(p->parse(R"(["not", "an object"])", &b));
  EXPECT_FALSE(p->parse(R"({"host":"gpu-7","timestamp":"2026-11-28T10:00:00Z"})", &b));
  EXPECT_FALSE(p->parse(
      R"({"kubernetes":{"pod_name":"p","pod_node_name":"gpu-1","host":"gpu-2"},"message":"x",)"
      R"("timestamp":"2026-11-28T10:00:00Z"})",
      &b));
  EXPECT_TRUE(p->parse(R"({"message":"x","timestamp":"2026-11-28T10:00:00Z"})", &b));
  ASSERT_EQ(b.records.size(), 1U);
  EXPECT_EQ(b.records[0].node, "gpu-9");
  EXPECT_EQ(b.records[0].stream, StreamKind::kOther);
}

// With --config, the json format reads records as the config's Kafka json topic does: its field
// paths, and its stream for records that nothing marks (a kernel-only topic), a process's record
// (a facility other than kern) staying other.
TEST(Json, TakesATopicsFieldsAndStream) {
  ParseOptions o;
  o.json_fields.line = {"text"};
  o.json_fields.node = {"origin.node"};
  o.json_fields.time = {"at"};
  o.json_stream = StreamKind::kKernel;
  const RecordBatch b =
      parseAll(Format::kJson,
               {R"({"origin":{"node":"gpu-4"},"text":"NVRM: Xid 79","at":1764324002})",
                R"({"origin":{"node":"gpu-4"},"text":"x","at":1764324003,"SYSLOG_FACILITY":"3"})",
                R"({"host":"gpu-4","message":"not this topic's fields","timestamp":1764324004})"},
               o);
  // Detection knows the topic's line field, as a key or as a nested path's first part.
  const std::string line = R"({"origin":{"node":"gpu-4"},"text":"NVRM: Xid 79","at":1764324002})";
  EXPECT_EQ(detectFormat(line), std::nullopt);
  EXPECT_EQ(detectFormat(line, o.json_fields.line), Format::kJson);
  EXPECT_EQ(detectFormat(R"({"event":{"text":"x"}})", {"event.text"}), Format::kJson);
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].node, "gpu-4");
  EXPECT_EQ(b.records[0].line, "NVRM: Xid 79");
  EXPECT_EQ(b.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(b.records[0].time_ns, 1764324002000000000);
  EXPECT_EQ(b.records[1].stream, StreamKind::kOther);
}

// `kubectl logs --timestamps` prints a pod's output after a Go RFC3339Nano stamp. Read as syslog,
// a line the pod printed as "gpu-3 kernel: NVRM: Xid ..." was gpu-3's kernel record, and replay
// tainted gpu-3 on it. The format's records are the pod's stream of the node --node gives.
TEST(Container, APodLineThatReadsAsAKernelLineIsThePods) {
  const std::string forged =
      "2026-11-28T10:00:01.223456789Z gpu-3 kernel: NVRM: Xid (PCI:0000:44:00): 79, GPU has "
      "fallen off the bus.";
  ASSERT_EQ(detectFormat(forged + "\n2026-11-28T10:00:02.1Z epoch 3 loss: 0.1\n"),
            Format::kContainer);
  ParseOptions o;
  o.node = "gpu-7";
  const RecordBatch b =
      parseAll(Format::kContainer, {forged, "2026-11-28T10:00:02.1Z epoch 3 loss: 0.1"}, o);
  ASSERT_EQ(b.records.size(), 2U);
  for (const LogRecord& r : b.records) {
    EXPECT_EQ(r.stream, StreamKind::kPod);
    EXPECT_EQ(r.node, "gpu-7");
  }
  EXPECT_EQ(b.records[0].line,
            "gpu-3 kernel: NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.");
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2026, 11, 28, 10, 0, 1, 223456789));
  EXPECT_EQ(b.records[1].line, "epoch 3 loss: 0.1");
  EXPECT_EQ(b.records[1].time_ns, civilToNanos(2026, 11, 28, 10, 0, 2, 100000000));

  // Forced as syslog, the line is refused rather than read as gpu-3's kernel.
  EXPECT_TRUE(parseAll(Format::kSyslog, {forged}).records.empty());
}

// The CRI log files under /var/log/pods: `STAMP STREAM TAG msg`, a line the runtime cut written
// as P parts ended by an F part (kubernetes/cri-api, "CRI container log format").
TEST(Container, ReadsCriLinesAndJoinsTheirParts) {
  const RecordBatch b = parseAll(
      Format::kContainer, {"2026-11-28T10:00:00.100000001Z stdout F one",
                           "2026-11-28T10:00:00.200000002Z stderr P [Rank 0] Watchdog ",
                           "2026-11-28T10:00:00.200000003Z stderr P caught collective ",
                           "2026-11-28T10:00:00.200000004Z stderr F operation timeout",
                           "2026-11-28T10:00:00.300000005Z stdout F ", "not a line of the format",
                           "2026-11-28T10:00:00.400000006Z stdout P cut at the end"});
  ASSERT_EQ(b.records.size(), 4U);
  EXPECT_EQ(b.records[0].line, "one");
  EXPECT_EQ(b.records[1].line, "[Rank 0] Watchdog caught collective operation timeout");
  EXPECT_EQ(b.records[1].time_ns, civilToNanos(2026, 11, 28, 10, 0, 0, 200000002));
  EXPECT_EQ(b.records[2].line, "");
  EXPECT_EQ(b.records[3].line, "cut at the end");
  for (const LogRecord& r : b.records) {
    EXPECT_EQ(r.stream, StreamKind::kPod);
  }
}

// A line of many parts (a progress bar that never writes `\n`) keeps its first 256 KiB, as push
// keeps of a line: joined whole, one such line held hundreds of MB.
TEST(Container, AJoinedLineKeepsItsFirst256KiB) {
  const std::string part(16 << 10, 'x');
  std::vector<std::string> lines;
  for (int i = 0; i < 40; ++i) {
    lines.push_back("2026-11-28T10:00:00.100000001Z stdout P " + part);
  }
  lines.emplace_back("2026-11-28T10:00:00.100000002Z stdout F end");
  lines.emplace_back("2026-11-28T10:00:00.100000003Z stdout F next");
  const RecordBatch b = parseAll(Format::kContainer, lines);
  ASSERT_EQ(b.records.size(), 2U);
  EXPECT_EQ(b.records[0].line.size(), size_t{256} << 10);
  EXPECT_EQ(b.records[1].line, "next");
}

// The runtime cuts stdout's and stderr's lines apart, and writes whichever comes: stderr's lines
// between stdout's parts belong to neither the stdout line nor its parts. Joined as one, a
// watchdog timeout on stderr was read inside a progress bar's line on stdout, at its time.
TEST(Container, EachStreamsPartsAreJoinedApart) {
  const RecordBatch b =
      parseAll(Format::kContainer, {"2026-11-28T10:00:00.1Z stdout P progress 10% ",
                                    "2026-11-28T10:00:00.2Z stderr P [Rank 0] Watchdog caught ",
                                    "2026-11-28T10:00:00.3Z stdout P 20% ",
                                    "2026-11-28T10:00:00.4Z stderr F collective operation timeout",
                                    "2026-11-28T10:00:00.5Z stdout F 30%",
                                    "2026-11-28T10:00:00.6Z stderr P cut at the end",
                                    "2026-11-28T10:00:00.7Z stdout P cut too"});
  ASSERT_EQ(b.records.size(), 4U);
  EXPECT_EQ(b.records[0].line, "[Rank 0] Watchdog caught collective operation timeout");
  EXPECT_EQ(b.records[0].time_ns, civilToNanos(2026, 11, 28, 10, 0, 0, 200000000));
  EXPECT_EQ(b.records[1].line, "progress 10% 20% 30%");
  EXPECT_EQ(b.records[1].time_ns, civilToNanos(2026, 11, 28, 10, 0, 0, 100000000));
  EXPECT_EQ(b.records[2].line, "cut at the end");  // the file's end: earlier first
  EXPECT_EQ(b.records[3].line, "cut too");
}

}  // namespace
}  // namespace faultline
