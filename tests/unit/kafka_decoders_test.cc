#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "core/time.h"
#include "ingest/kafka/decoders.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"

namespace faultline {
namespace {

constexpr int64_t kReceiveNs = 1'800'000'000'000'000'000;

KafkaTopicConfig topic(KafkaEncoding encoding, StreamKind stream = StreamKind::kOther) {
  KafkaTopicConfig config;
  config.name = "t";
  config.encoding = encoding;
  config.stream = stream;
  return config;
}

// Keyed by a node, as a message must name one somewhere to be decoded.
KafkaMessage message(std::string_view value) {
  KafkaMessage msg;
  msg.value = value;
  msg.key = "gpu-0";
  return msg;
}

// What spdlog's default logger writes while it lives.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)));
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  LogCapture(LogCapture&&) = delete;
  LogCapture& operator=(LogCapture&&) = delete;
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Decodes one message that must yield exactly one record.
const LogRecord& decodeOne(const KafkaDecoder& decoder, const KafkaMessage& msg,
                           RecordBatch* batch) {
  const size_t before = batch->records.size();
  EXPECT_TRUE(decoder.decode(msg, kReceiveNs, batch));
  EXPECT_EQ(batch->records.size(), before + 1);
  return batch->records.back();
}

TEST(KafkaRawDecoder, UnquotesOtelJsonStringBody) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kRaw, StreamKind::kKernel));
  RecordBatch batch;
  const std::string value = R"("EXT4-fs error (device \"sda1\"): bad \u00e9\n")";
  const LogRecord& rec = decodeOne(decoder, message(value), &batch);
  EXPECT_EQ(rec.line, "EXT4-fs error (device \"sda1\"): bad \xc3\xa9");
  EXPECT_EQ(rec.stream, StreamKind::kKernel);
  EXPECT_EQ(rec.time_ns, kReceiveNs);
}

TEST(KafkaRawDecoder, QuotedBodyWithoutEscapesIsUnquoted) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kRaw));
  RecordBatch batch;
  const std::string value = "\"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\"";
  const LogRecord& rec = decodeOne(decoder, message(value), &batch);
  EXPECT_EQ(rec.line, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  EXPECT_EQ(rec.stream, StreamKind::kOther);
}

TEST(KafkaRawDecoder, PlainAndHalfQuotedLinesAreVerbatim) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kRaw));
  RecordBatch batch;
  const std::string plain = "<6>[  123.456] EXT4-fs error\n";
  EXPECT_EQ(decodeOne(decoder, message(plain), &batch).line, "<6>[  123.456] EXT4-fs error");
  EXPECT_EQ(decodeOne(decoder, message(R"("quoted" then text)"), &batch).line,
            R"("quoted" then text)");
}

TEST(KafkaRawDecoder, EmptyValueIsMalformed) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kRaw));
  RecordBatch batch;
  EXPECT_FALSE(decoder.decode(message(""), kReceiveNs, &batch));
  EXPECT_FALSE(decoder.decode(message("\"\""), kReceiveNs, &batch));
  EXPECT_TRUE(batch.records.empty());
}

TEST(KafkaRawDecoder, NodeFromHeaderThenKey) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kRaw));
  RecordBatch batch;
  KafkaMessage msg = message("line");
  msg.key = "key-node";
  msg.node_header = [] { return std::string_view("header-node"); };
  EXPECT_EQ(decodeOne(decoder, msg, &batch).node, "header-node");
  msg.node_header = [] { return std::string_view(); };  // the message has no such header
  EXPECT_EQ(decodeOne(decoder, msg, &batch).node, "key-node");
  msg.node_header = nullptr;  // the topic reads no header
  EXPECT_EQ(decodeOne(decoder, msg, &batch).node, "key-node");
}

TEST(KafkaRawDecoder, MessageTimestampInNanoseconds) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kRaw));
  RecordBatch batch;
  KafkaMessage msg = message("line");
  msg.timestamp_ms = 1'740'327'858'123;
  EXPECT_EQ(decodeOne(decoder, msg, &batch).time_ns, 1'740'327'858'123'000'000);
}

// A producer that writes µs where Kafka means ms: in ns that overflows int64.
TEST(KafkaRawDecoder, TimestampBeyondInt64NanosecondsTakesReceiveTime) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kRaw));
  RecordBatch batch;
  KafkaMessage msg = message("line");
  msg.timestamp_ms = 1'741'000'000'000'000;
  EXPECT_EQ(decodeOne(decoder, msg, &batch).time_ns, kReceiveNs);
  msg.timestamp_ms = INT64_MAX / 1'000'000;  // the last that fits
  EXPECT_EQ(decodeOne(decoder, msg, &batch).time_ns, INT64_MAX / 1'000'000 * 1'000'000);
}

// A record no message part attributes to a node would be correlated as a node "": it is
// skipped, and the message counted (decode returns false).
TEST(KafkaDecoder, RecordWithoutNodeIsSkipped) {
  RecordBatch batch;
  KafkaMessage raw = message("NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus");
  raw.key = "";
  const KafkaDecoder raw_decoder(topic(KafkaEncoding::kRaw, StreamKind::kKernel));
  EXPECT_FALSE(raw_decoder.decode(raw, kReceiveNs, &batch));
  raw.node_header = [] { return std::string_view(); };  // the message has no such header
  EXPECT_FALSE(raw_decoder.decode(raw, kReceiveNs, &batch));
  // The OTel exporter's partition_logs_by_resource_attributes key is a binary hash.
  const std::string hash("\x01\x9f\x00 z\x7f\xee", 7);
  raw.key = hash;
  EXPECT_FALSE(raw_decoder.decode(raw, kReceiveNs, &batch));
  // Its partition_logs_by_trace_id key is the trace id in hex; a node was named by it.
  raw.key = "4bf92f3577b34da6a3ce929d0e0e4736";
  EXPECT_FALSE(raw_decoder.decode(raw, kReceiveNs, &batch));

  KafkaMessage json = message(R"({"message": "NVRM: Xid 79", "_TRANSPORT": "kernel"})");
  json.key = "";
  EXPECT_FALSE(KafkaDecoder(topic(KafkaEncoding::kJson)).decode(json, kReceiveNs, &batch));
  EXPECT_TRUE(batch.records.empty());

  // One export batch, two resources: only the one that names its node is kept.
  const std::string doc = R"({"resourceLogs":[
      {"resource":{"attributes":[{"key":"k8s.node.name","value":{"stringValue":"gpu-1"}}]},
       "scopeLogs":[{"logRecords":[{"body":{"stringValue":"named"}}]}]},
      {"scopeLogs":[{"logRecords":[{"body":{"stringValue":"unnamed"}}]}]}]})";
  KafkaMessage otlp = message(doc);
  otlp.key = "";
  const KafkaDecoder otlp_decoder(topic(KafkaEncoding::kOtlpJson));
  EXPECT_FALSE(otlp_decoder.decode(otlp, kReceiveNs, &batch));
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].line, "named");
  EXPECT_EQ(batch.records[0].node, "gpu-1");
  otlp.key = "gpu-2";  // names the other resource's node
  EXPECT_TRUE(otlp_decoder.decode(otlp, kReceiveNs, &batch));
  ASSERT_EQ(batch.records.size(), 3u);
  EXPECT_EQ(batch.records[2].node, "gpu-2");
}

// A message of the otlp encodings that holds no log record with a line is not an export of logs:
// another encoding's message on the topic (a Vector or Fluent Bit JSON record, an OTLP trace
// export) was taken as an empty export, its lines dropped without a count in
// faultline_kafka_malformed_total.
TEST(KafkaDecoder, AnOtlpMessageWithoutARecordIsMalformed) {
  RecordBatch batch;
  const KafkaDecoder json(topic(KafkaEncoding::kOtlpJson));
  for (const char* bad :
       {R"({"message": "NVRM: Xid 79", "host": "gpu-1"})", R"({"resourceLogs": []})",
        R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"attributes":[]}]}]}]})"}) {
    EXPECT_FALSE(json.decode(message(bad), kReceiveNs, &batch)) << bad;
  }
  const KafkaDecoder proto(topic(KafkaEncoding::kOtlpProto));
  EXPECT_FALSE(proto.decode(message(std::string("\x10\x01", 2)), kReceiveNs, &batch));  // field 2
  EXPECT_TRUE(batch.records.empty());
  EXPECT_TRUE(json.decode(
      message(
          R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]})"),
      kReceiveNs, &batch));
  EXPECT_EQ(batch.records.size(), 1u);
  // A record without a line beside one with a line: the line is kept, the message counted (the
  // push endpoint rejects such a record in its partial success), so a shipper that moved the
  // line out of the body does not lose lines unseen.
  EXPECT_FALSE(json.decode(message(R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[
      {"body":{"stringValue":"y"}}, {"attributes":[]}]}]}]})"),
                           kReceiveNs, &batch));
  ASSERT_EQ(batch.records.size(), 2u);
  EXPECT_EQ(batch.records[1].line, "y");
}

// A malformed message is counted in faultline_kafka_malformed_total and its cause logged, the
// first time of each cause on a topic: the count alone, all an operator had, did not tell a topic
// of another encoding from a shipper's field names or a pod's keys beside its shipper's.
TEST(KafkaDecoder, AMalformedMessageIsLoggedWithItsCause) {
  const LogCapture log;
  RecordBatch batch;
  KafkaTopicConfig config = topic(KafkaEncoding::kJson);
  config.name = "pod-logs";
  const KafkaDecoder json(config);
  EXPECT_FALSE(json.decode(message(R"({"message": "cut)"), kReceiveNs, &batch));
  EXPECT_FALSE(json.decode(message(R"({"log": 42})"), kReceiveNs, &batch));
  EXPECT_FALSE(json.decode(message(R"({"message": "cut again)"), kReceiveNs, &batch));
  config.name = "otlp_logs";
  config.encoding = KafkaEncoding::kOtlpProto;
  EXPECT_FALSE(KafkaDecoder(config).decode(message("\x0a\x05"), kReceiveNs, &batch));
  const std::string text = log.text();
  EXPECT_NE(text.find("kafka: topic pod-logs: a message is not JSON: "), std::string::npos) << text;
  EXPECT_NE(text.find("kafka: topic pod-logs: a message has no line field"), std::string::npos)
      << text;
  EXPECT_NE(text.find("kafka: topic otlp_logs: a message does not decode: not an OTLP"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("is not JSON"), text.rfind("is not JSON")) << text;  // once per cause
}

// The OTel journald receiver reads journalctl -o json into Go values, where a number is a float64,
// so a MESSAGE journalctl writes as an array of bytes (not printable UTF-8: a tab, an escape)
// reaches OTLP as an arrayValue of doubleValues. Only intValues were read as bytes: the kernel line
// had no line and was dropped, over otlp_proto and otlp_json alike.
TEST(KafkaDecoder, AJournaldMessageOfDoubleValuesIsItsBytes) {
  const std::string line = "NVRM:\tXid 79";
  opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest request;
  auto* resource_logs = request.add_resource_logs();
  auto* node = resource_logs->mutable_resource()->add_attributes();
  node->set_key("k8s.node.name");
  node->mutable_value()->set_string_value("gpu-1");
  auto* record = resource_logs->add_scope_logs()->add_log_records();
  record->set_time_unix_nano(1'700'000'000'000'000'000);
  auto* fields = record->mutable_body()->mutable_kvlist_value();
  auto* message_field = fields->add_values();
  message_field->set_key("MESSAGE");
  std::string json_bytes;
  for (const char c : line) {
    message_field->mutable_value()->mutable_array_value()->add_values()->set_double_value(c);
    json_bytes += (json_bytes.empty() ? "" : ",") + std::string(R"({"doubleValue":)") +
                  std::to_string(static_cast<int>(c)) + "}";
  }
  auto* transport = fields->add_values();
  transport->set_key("_TRANSPORT");
  transport->mutable_value()->set_string_value("kernel");
  const std::string proto = request.SerializeAsString();
  const std::string json =
      R"({"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name","value":)"
      R"({"stringValue":"gpu-1"}}]},"scopeLogs":[{"logRecords":[{"timeUnixNano":)"
      R"("1700000000000000000","body":{"kvlistValue":{"values":[{"key":"MESSAGE","value":)"
      R"({"arrayValue":{"values":[)" +
      json_bytes + R"(]}}},{"key":"_TRANSPORT","value":{"stringValue":"kernel"}}]}}}]}]}]})";
  for (const auto& [encoding, value] :
       {std::pair{KafkaEncoding::kOtlpProto, proto}, std::pair{KafkaEncoding::kOtlpJson, json}}) {
    const KafkaDecoder decoder(topic(encoding));
    RecordBatch batch;
    const char* name = encoding == KafkaEncoding::kOtlpProto ? "otlp_proto" : "otlp_json";
    EXPECT_TRUE(decoder.decode(message(value), kReceiveNs, &batch)) << name;
    if (batch.records.size() != 1) {
      ADD_FAILURE() << name << ": " << batch.records.size() << " records";
      continue;
    }
    EXPECT_EQ(batch.records[0].line, line);
    EXPECT_EQ(batch.records[0].node, "gpu-1");
    EXPECT_EQ(batch.records[0].stream, StreamKind::kKernel);
  }
}

// The source allocates an owner only for decoders whose records point into the message; the
// others must copy what they keep, the message being freed right after decoding
// (KafkaOtlpDecoder.ProtoAndJsonWithKeyFallbackAndTopicStream checks otlp_proto's pointing).
TEST(KafkaDecoder, OnlyOtlpProtoPointsIntoMessages) {
  EXPECT_TRUE(KafkaDecoder(topic(KafkaEncoding::kOtlpProto)).pointsIntoMessages());
  const std::string line = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.";
  const std::pair<KafkaEncoding, std::string> copying[] = {
      {KafkaEncoding::kRaw, line},
      {KafkaEncoding::kRaw, "\"" + line + "\""},
      {KafkaEncoding::kJson, R"({"message": ")" + line + R"("})"},
      {KafkaEncoding::kOtlpJson,
       R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":")" + line +
           R"("}}]}]}]})"}};
  for (const auto& [encoding, value] : copying) {
    const KafkaDecoder decoder(topic(encoding));
    EXPECT_FALSE(decoder.pointsIntoMessages());
    std::string payload = value;
    std::string key = "gpu-1";
    std::string header = "gpu-2";
    RecordBatch batch;
    KafkaMessage msg = message(payload);
    msg.key = key;
    decodeOne(decoder, msg, &batch);
    msg.node_header = [&header] { return std::string_view(header); };
    decodeOne(decoder, msg, &batch);
    // What the message's destruction would leave.
    for (std::string* s : {&payload, &key, &header}) {
      s->assign(s->size(), 'x');
    }
    EXPECT_EQ(batch.records[0].line, line) << value;
    EXPECT_EQ(batch.records[0].node, "gpu-1") << value;
    EXPECT_EQ(batch.records[1].line, line) << value;
    EXPECT_EQ(batch.records[1].node, "gpu-2") << value;
  }
}

TEST(KafkaJsonDecoder, VectorKubernetesLogs) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson, StreamKind::kKernel));
  RecordBatch batch;
  const LogRecord& rec = decodeOne(decoder, message(R"({
      "message": "CUDA error: an illegal memory access was encountered",
      "timestamp": "2025-02-23T16:24:18.123456789Z", "stream": "stderr",
      "source_type": "kubernetes_logs",
      "kubernetes": {"pod_name": "train-0", "pod_namespace": "ml",
                     "container_name": "trainer", "pod_node_name": "gpu-7"}})"),
                                   &batch);
  EXPECT_EQ(rec.line, "CUDA error: an illegal memory access was encountered");
  EXPECT_EQ(rec.node, "gpu-7");
  EXPECT_EQ(rec.time_ns, civilToNanos(2025, 2, 23, 16, 24, 18, 123456789));
  EXPECT_EQ(rec.stream, StreamKind::kPod);  // even on a topic configured as kernel
  EXPECT_EQ(batch.label(rec, "kubernetes.pod_name"), "train-0");
  EXPECT_EQ(batch.job(rec), "");  // a pod of no Job
}

// A line with a byte that is not UTF-8 (a kernel line may hold any) or a lone surrogate escape is
// taken with U+FFFD in their place, as Go's decoders read it, not dropped with its message.
TEST(KafkaJsonDecoder, InvalidUnicodeIsReplacedNotRefused) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson, StreamKind::kKernel));
  RecordBatch batch;
  const LogRecord& rec = decodeOne(
      decoder, message("{\"message\": \"Xid 79 \xff \\ud83d\", \"host\": \"gpu-7\"}"), &batch);
  EXPECT_EQ(rec.line, "Xid 79 ? \xef\xbf\xbd");
  EXPECT_EQ(rec.node, "gpu-7");
}

// The NCCL rules count distinct jobs (rules/nccl-pytorch.yaml): a pod's Job comes from the pod
// labels each shipper adds.
TEST(KafkaJsonDecoder, APodsJobFromVectorAndFluentBitLabels) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  const LogRecord& vector = decodeOne(decoder, message(R"({"message": "x",
      "kubernetes": {"pod_name": "train-0-abc", "pod_node_name": "gpu-7",
                     "pod_labels": {"batch.kubernetes.io/job-name": "train-0",
                                    "job-name": "train-0"}}})"),
                                      &batch);
  EXPECT_EQ(batch.job(vector), "train-0");
  const LogRecord& fluent = decodeOne(decoder, message(R"({"log": "x",
      "kubernetes": {"pod_name": "w-0", "host": "gpu-3",
                     "labels": {"jobset.sigs.k8s.io/jobset-name": "llama"}}})"),
                                      &batch);
  EXPECT_EQ(batch.job(fluent), "llama");
  // A pod's own key that claims another job than its shipper's leaves the job ambiguous; a
  // top-level job key is none of the shipper's.
  EXPECT_FALSE(decoder.decode(message(R"({"log": "x",
      "kubernetes": {"pod_name": "w-0", "host": "gpu-3", "labels": {"job-name": "w"}},
      "kubernetes.labels.job-name": "fake"})"),
                              kReceiveNs, &batch));
  const LogRecord& own = decodeOne(decoder, message(R"({"log": "x", "k8s.job.name": "fake",
      "job-name": "fake", "kubernetes": {"pod_name": "w-0", "host": "gpu-3"}})"),
                                   &batch);
  EXPECT_EQ(batch.job(own), "");
}

// A container's line whose shipper could not look up its pod (Vector's kubernetes_logs event
// without its kubernetes map, vectordotdev/vector#10122; Fluent Bit's CRI parser output the
// kubernetes filter passed through) still carries the runtime's stream: a pod's, not a host
// service's, so its "ib0: Lost carrier" or "GPU reset executed: ..." is no host line.
TEST(KafkaJsonDecoder, AContainersLineWithoutItsPodIsStillAPods) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  const LogRecord& vector =
      decodeOne(decoder, message(R"({"file": "/var/log/pods/team_evil-0_0c7d/c/0.log",
      "message": "GPU reset executed: GPU-979426f2-893a-7cbb-c4cf-81472f89a462, success: true",
      "source_type": "kubernetes_logs", "stream": "stdout",
      "timestamp": "2026-11-30T10:00:00Z", "host": "gpu-1"})"),
                &batch);
  EXPECT_EQ(vector.stream, StreamKind::kPod);
  EXPECT_EQ(vector.node, "gpu-1");
  const LogRecord& fluent =
      decodeOne(decoder, message(R"({"@timestamp": 1764496800.5, "stream": "stderr",
      "logtag": "F", "log": "ib0: Lost carrier\n", "hostname": "gpu-2"})"),
                &batch);
  EXPECT_EQ(fluent.stream, StreamKind::kPod);
  // A host service's journal record has no stream.
  const LogRecord& host = decodeOne(decoder, message(R"({"MESSAGE": "ib0: Lost carrier",
      "SYSLOG_IDENTIFIER": "systemd-networkd", "_HOSTNAME": "gpu-2",
      "__REALTIME_TIMESTAMP": "1764496800000000"})"),
                                    &batch);
  EXPECT_EQ(host.stream, StreamKind::kOther);
}

TEST(KafkaJsonDecoder, FluentBitTailWithKubernetesFilter) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  const LogRecord& rec = decodeOne(decoder, message(R"({"@timestamp": 1740327858.25,
      "log": "NCCL WARN NET/IB : Got completion with error 12\n", "stream": "stdout",
      "time": "2025-02-23T16:24:18.250Z",
      "kubernetes": {"pod_name": "nccl-1", "namespace_name": "ml", "host": "gpu-3"}})"),
                                   &batch);
  EXPECT_EQ(rec.line, "NCCL WARN NET/IB : Got completion with error 12");
  EXPECT_EQ(rec.node, "gpu-3");
  EXPECT_EQ(rec.time_ns, civilToNanos(2025, 2, 23, 16, 24, 18, 250'000'000));
  EXPECT_EQ(rec.stream, StreamKind::kPod);
}

TEST(KafkaJsonDecoder, JournaldKernelRecords) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  // Vector's journald source: MESSAGE in message, _HOSTNAME in host, raw journal fields kept.
  const LogRecord& vector = decodeOne(decoder, message(R"({"message": "NVRM: Xid 79",
      "host": "gpu-1", "_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel",
      "__REALTIME_TIMESTAMP": "1740327858123456"})"),
                                      &batch);
  EXPECT_EQ(vector.node, "gpu-1");
  EXPECT_EQ(vector.stream, StreamKind::kKernel);
  EXPECT_EQ(vector.time_ns, 1'740'327'858'123'456'000);
  // Fluent Bit's systemd input: journal field names as they are.
  const LogRecord& fluent = decodeOne(
      decoder,
      message(R"({"MESSAGE": "EXT4-fs error", "_HOSTNAME": "gpu-2", "_TRANSPORT": "kernel"})"),
      &batch);
  EXPECT_EQ(fluent.line, "EXT4-fs error");
  EXPECT_EQ(fluent.node, "gpu-2");
  EXPECT_EQ(fluent.stream, StreamKind::kKernel);
  EXPECT_EQ(fluent.time_ns, kReceiveNs);
}

// journalctl -o json (and the OTel journald receiver's body, json.Marshal-ed by the kafka
// exporter's raw encoding) writes a field that is not printable UTF-8 (a tab, an escape, a byte of
// another encoding) as an array of its bytes: the line is those bytes, as replay's journal-json
// reads it. Such a kernel line was refused as malformed, its fault unseen.
TEST(KafkaJsonDecoder, JournaldMessageAsAnArrayOfBytes) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  // "NVRM:\tXid 79"
  ASSERT_TRUE(decoder.decode(message(R"({"MESSAGE": [78, 86, 82, 77, 58, 9, 88, 105, 100, 32, 55,
      57], "_HOSTNAME": "gpu-1", "_TRANSPORT": "kernel", "__REALTIME_TIMESTAMP": "1740327858123456"})"),
                             kReceiveNs, &batch));
  ASSERT_EQ(batch.records.size(), 1u);
  const LogRecord& rec = batch.records[0];
  EXPECT_EQ(rec.line, "NVRM:\tXid 79");
  EXPECT_EQ(rec.node, "gpu-1");
  EXPECT_EQ(rec.stream, StreamKind::kKernel);
  EXPECT_EQ(rec.time_ns, 1'740'327'858'123'456'000);
  // Not a byte array: still malformed.
  for (const char* bad : {R"({"MESSAGE": [78, "x"]})", R"({"MESSAGE": [78, 256]})",
                          R"({"MESSAGE": [78, -1]})", R"({"MESSAGE": [[78]]})"}) {
    EXPECT_FALSE(decoder.decode(message(bad), kReceiveNs, &batch)) << bad;
  }
  EXPECT_EQ(batch.records.size(), 1u);
}

// journald records what a process wrote to /dev/kmsg with _TRANSPORT=kernel and the process's
// facility, and `logger -t kernel` gives SYSLOG_IDENTIFIER=kernel with its own and transport
// syslog: the kernel alone logs as kern (0), with transport kernel. Such a record is no kernel
// record, on a kernel topic neither.
TEST(KafkaJsonDecoder, AJournaldRecordOfAProcessFacilityIsNoKernelRecord) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson, StreamKind::kKernel));
  RecordBatch batch;
  const std::string xid =
      R"("MESSAGE": "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.")";
  for (const std::string fields :
       {R"("_TRANSPORT": "kernel", "SYSLOG_FACILITY": "1")",
        R"("_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": "kernel", "SYSLOG_FACILITY": "1")",
        R"("_TRANSPORT": "kernel", "SYSLOG_FACILITY": "0")", R"("_TRANSPORT": "kernel")",
        R"("_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": "kernel")"}) {
    ASSERT_TRUE(decoder.decode(message("{" + xid + ", " + fields + ", \"_HOSTNAME\": \"gpu-1\"}"),
                               kReceiveNs, &batch))
        << fields;
  }
  ASSERT_EQ(batch.records.size(), 5u);
  EXPECT_EQ(batch.records[0].stream, StreamKind::kOther);
  EXPECT_EQ(batch.records[1].stream, StreamKind::kOther);
  EXPECT_EQ(batch.records[2].stream, StreamKind::kKernel);
  EXPECT_EQ(batch.records[3].stream, StreamKind::kKernel);
  EXPECT_EQ(batch.records[4].stream, StreamKind::kOther);  // another transport: no facility needed
}

// A container's output in the journal (Docker's and Podman's journald log drivers) carries
// CONTAINER_NAME and is a pod's, as journald records are everywhere else (README, "Stream kinds"),
// even under the SYSLOG_IDENTIFIER its launcher's tag gave it. It was taken as kernel output.
TEST(KafkaJsonDecoder, JournaldContainerOutputIsNeverKernel) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  const LogRecord& rec = decodeOne(decoder, message(R"({"MESSAGE": "NVRM: Xid 79",
      "_HOSTNAME": "gpu-1", "_TRANSPORT": "journal", "SYSLOG_IDENTIFIER": "kernel",
      "CONTAINER_NAME": "prank", "CONTAINER_ID": "0123456789ab"})"),
                                   &batch);
  EXPECT_EQ(rec.node, "gpu-1");
  EXPECT_EQ(rec.stream, StreamKind::kPod);
}

TEST(KafkaJsonDecoder, RsyslogProgramnameKernel) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  const LogRecord& rec = decodeOne(decoder, message(R"({"@timestamp": "2025-02-23T17:24:18+01:00",
      "hostname": "gpu-4", "programname": "kernel", "msg": "mlx5_core: health poll failed"})"),
                                   &batch);
  EXPECT_EQ(rec.node, "gpu-4");
  EXPECT_EQ(rec.stream, StreamKind::kKernel);
  EXPECT_EQ(rec.time_ns, civilToNanos(2025, 2, 23, 16, 24, 18));
}

// rsyslog's %jsonmesg% of `logger -t kernel 'NVRM: Xid ...'` (imuxsock, facility user): the tag
// gives programname kernel, the facility says a process wrote it. It tainted its node.
TEST(KafkaJsonDecoder, RsyslogProgramnameKernelOfAProcessIsNoKernel) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  const LogRecord& rec = decodeOne(
      decoder, message(R"({"msg":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
      "hostname":"gpu-7","syslogtag":"kernel:","inputname":"imuxsock","pri":"13",
      "syslogfacility":"1","syslogseverity":"5","programname":"kernel","app-name":"kernel",
      "timereported":"2025-02-23T17:24:18.000000+01:00"})"),
      &batch);
  EXPECT_EQ(rec.node, "gpu-7");
  EXPECT_EQ(rec.stream, StreamKind::kOther);
  RecordBatch kernel;
  EXPECT_EQ(decodeOne(decoder, message(R"({"msg":"mlx5_core: health poll failed","hostname":"gpu-7",
      "inputname":"imklog","syslogfacility":"0","programname":"kernel",
      "timereported":"2025-02-23T17:24:18.000000+01:00"})"),
                      &kernel)
                .stream,
            StreamKind::kKernel);
}

TEST(KafkaJsonDecoder, PodRecordIsNeverKernel) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson, StreamKind::kKernel));
  RecordBatch batch;
  const LogRecord& rec = decodeOne(decoder, message(R"({"message": "NVRM: Xid 79",
      "_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel", "programname": "kernel",
      "kubernetes": {"pod_name": "prank"}})"),
                                   &batch);
  EXPECT_EQ(rec.stream, StreamKind::kPod);
}

// With Merge_Log and no Merge_Log_Key, a pod's JSON naming Vector's node field beside Fluent
// Bit's map (or a job beside its labels' job) names another node: refused, as the pod could
// otherwise have its lines decided for any node, or count as several jobs.
TEST(KafkaJsonDecoder, TwoShipperNodeOrJobFieldsNamingDifferentValuesAreRefused) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson, StreamKind::kKernel));
  RecordBatch batch;
  for (const char* bad : {
           R"({"kubernetes.pod_node_name":"gpu-7","kubernetes.pod_labels.job-name":"job-a",
               "log":"[Rank 0] Watchdog caught collective operation timeout",
               "kubernetes":{"pod_name":"evil-0","host":"gpu-2"}})",
           R"({"kubernetes.pod_labels.job-name":"job-b","log":"x",
               "kubernetes":{"pod_name":"p-0","host":"gpu-2","labels":{"job-name":"job-a"}}})",
       }) {
    EXPECT_FALSE(decoder.decode(message(bad), kReceiveNs, &batch)) << bad;
  }
  EXPECT_TRUE(batch.records.empty());
  // A JobSet's pod: its child Job's job-name and the JobSet's name differ by design; the job is
  // the JobSet.
  const LogRecord& jobset = decodeOne(
      decoder, message(R"({"message":"x","kubernetes":{"pod_name":"p-0","pod_node_name":"gpu-2",
                  "pod_labels":{"job-name":"llama-workers-0",
                                "batch.kubernetes.io/job-name":"llama-workers-0",
                                "jobset.sigs.k8s.io/jobset-name":"llama"}}})"),
      &batch);
  EXPECT_EQ(batch.job(jobset), "llama");
  // A host name beside the shipper's node name (a Vector event's `host`) is no conflict: the
  // shipper's map wins.
  const LogRecord& rec = decodeOne(decoder, message(R"({"message":"x","host":"gpu-2.example.com",
                  "kubernetes":{"pod_name":"p-0","pod_node_name":"gpu-2"}})"),
                                   &batch);
  EXPECT_EQ(rec.node, "gpu-2");
}

// Fluent Bit with Merge_Log On puts a pod's own JSON keys at the top level, before the
// `kubernetes` map: a pod printing these must not pass for kernel output of a node it names.
TEST(KafkaJsonDecoder, PathTwiceWithDifferentValuesIsRefused) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson, StreamKind::kKernel));
  RecordBatch batch;
  for (const char* bad : {
           // Flat keys first: an empty pod name, another node.
           R"({"kubernetes.pod_name":null,"kubernetes.host":"gpu-1","_TRANSPORT":"kernel",
               "message":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
               "kubernetes":{"pod_name":"evil-0","namespace_name":"train","host":"gpu-3"}})",
           // The same with every pod path empty: first-wins took it for gpu-1's kernel output.
           R"({"kubernetes.pod_name":null,"kubernetes.namespace_name":null,
               "kubernetes.container_name":null,"kubernetes.host":"gpu-1","_TRANSPORT":"kernel",
               "message":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
               "kubernetes":{"pod_name":"evil-0","namespace_name":"train","container_name":"c",
                             "host":"gpu-3"}})",
           // A `kubernetes` map of the pod's own, all null, before the shipper's.
           R"({"log":"{...}","stream":"stdout",
               "kubernetes":{"pod_name":null,"namespace_name":null,"container_name":null},
               "_TRANSPORT":"kernel",
               "message":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
               "kubernetes":{"pod_name":"evil-0","namespace_name":"train","container_name":"c",
                             "host":"gpu-3"}})",
           R"({"message":"x","kubernetes.pod_name":"","kubernetes":{"pod_name":"p"}})",
           R"({"message":"x","host":"gpu-1","host":"gpu-2"})",
           R"({"message":"x","_TRANSPORT":"journal","_TRANSPORT":"kernel"})",
       }) {
    EXPECT_FALSE(decoder.decode(message(bad), kReceiveNs, &batch)) << bad;
  }
  EXPECT_TRUE(batch.records.empty());
  // The same value twice is no ambiguity.
  const LogRecord& rec = decodeOne(
      decoder, message(R"({"message":"x","kubernetes.host":"gpu-1","kubernetes":{"host":"gpu-1"},
                  "_TRANSPORT":"kernel","_TRANSPORT":"kernel"})"),
      &batch);
  EXPECT_EQ(rec.node, "gpu-1");
  EXPECT_EQ(rec.stream, StreamKind::kKernel);
}

TEST(KafkaJsonDecoder, UnmarkedRecordTakesTopicStream) {
  RecordBatch batch;
  const std::string value = R"({"message": "x", "host": {"name": "gpu-5"}})";
  const LogRecord& kernel = decodeOne(
      KafkaDecoder(topic(KafkaEncoding::kJson, StreamKind::kKernel)), message(value), &batch);
  EXPECT_EQ(kernel.stream, StreamKind::kKernel);
  EXPECT_EQ(kernel.node, "gpu-5");  // nested host.name
  const LogRecord& other =
      decodeOne(KafkaDecoder(topic(KafkaEncoding::kJson)), message(value), &batch);
  EXPECT_EQ(other.stream, StreamKind::kOther);
}

TEST(KafkaJsonDecoder, FlatDottedKeysAndEpochMagnitudes) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  const int64_t s = 1'740'327'858;
  for (const std::string& t :
       {std::to_string(s), std::to_string(s * 1000) + ".0", std::to_string(s * 1'000'000),
        std::to_string(s * 1'000'000'000), "\"" + std::to_string(s) + "\""}) {
    const LogRecord& rec = decodeOne(
        decoder, message(R"({"body": "x", "k8s.node.name": "gpu-6", "time": )" + t + "}"), &batch);
    EXPECT_EQ(rec.time_ns, s * kNanosPerSecond) << t;
    EXPECT_EQ(rec.node, "gpu-6");
  }
}

// A dotted path matches every way of splitting it into nested keys; the list's order decides
// between paths, document order between two spellings of one path.
TEST(KafkaJsonDecoder, DottedPathsMatchAnyNestingAndListOrderWins) {
  KafkaTopicConfig config = topic(KafkaEncoding::kJson);
  config.fields.line = {"a.b.c", "msg"};
  config.fields.node = {"k8s.node.name", "host"};
  const KafkaDecoder decoder(config);
  RecordBatch batch;
  for (const char* doc : {R"({"msg": "no", "a": {"b": {"c": "yes"}}, "host": "h"})",
                          R"({"a.b": {"c": "yes"}, "msg": "no", "host": "h"})",
                          R"({"a": {"b.c": "yes"}, "host": "h"})",
                          R"({"a.b.c": "yes", "a": {"b": {"c": "later"}}, "host": "h"})"}) {
    const LogRecord& rec = decodeOne(
        decoder, message(std::string(doc).insert(1, R"("k8s": {"node": {"name": "gpu-1"}}, )")),
        &batch);
    EXPECT_EQ(rec.line, "yes") << doc;
    EXPECT_EQ(rec.node, "gpu-1") << doc;  // the first node path, though "host" comes too
  }
  // {"a": "x"} is no object: nothing below it; the next line path is taken.
  EXPECT_EQ(decodeOne(decoder, message(R"({"a": "x", "msg": "fallback"})"), &batch).line,
            "fallback");
}

TEST(KafkaJsonDecoder, UnparseableTimeFallsBackToMessageTimestamp) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  KafkaMessage msg = message(R"({"message": "x", "timestamp": "yesterday"})");
  msg.timestamp_ms = 1000;
  EXPECT_EQ(decodeOne(decoder, msg, &batch).time_ns, 1'000'000'000);
}

TEST(KafkaJsonDecoder, ATimeReadOnlyInPartIsNoTime) {
  // "12:00:00 +0200" is 10:00Z: a stamp whose zone follows a space is not read as 12:00Z.
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  KafkaMessage msg = message(R"({"message": "x", "time": "2024-05-01 12:00:00 +0200"})");
  msg.timestamp_ms = 1000;
  EXPECT_EQ(decodeOne(decoder, msg, &batch).time_ns, 1'000'000'000);
}

TEST(KafkaJsonDecoder, NodeFallsBackToHeader) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  // Fluent Bit's kmsg input carries no host field.
  KafkaMessage msg = message(R"({"priority":3,"sequence":1814,"sec":11706,"usec":732233,
      "msg":"NVRM: Xid 48"})");
  msg.node_header = [] { return std::string_view("gpu-8"); };
  const LogRecord& rec = decodeOne(decoder, msg, &batch);
  EXPECT_EQ(rec.node, "gpu-8");
  EXPECT_EQ(rec.line, "NVRM: Xid 48");
}

// librdkafka parses a message's headers on first access: a message that names its node is
// decoded without asking for them.
TEST(KafkaJsonDecoder, HeaderReadOnlyWhenTheMessageNamesNoNode) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  int asked = 0;
  KafkaMessage msg = message(R"({"host": "gpu-3", "message": "NVRM: Xid 48"})");
  msg.node_header = [&asked] {
    ++asked;
    return std::string_view("gpu-8");
  };
  EXPECT_EQ(decodeOne(decoder, msg, &batch).node, "gpu-3");
  EXPECT_EQ(asked, 0);
  msg.value = R"({"message": "NVRM: Xid 48"})";
  EXPECT_EQ(decodeOne(decoder, msg, &batch).node, "gpu-8");
  EXPECT_EQ(asked, 1);
}

TEST(KafkaJsonDecoder, ConfiguredFieldPaths) {
  KafkaTopicConfig config = topic(KafkaEncoding::kJson);
  config.fields.line = {"payload.text"};
  config.fields.node = {"origin"};
  config.fields.pod = {"container"};
  const KafkaDecoder decoder(config);
  RecordBatch batch;
  const LogRecord& rec =
      decodeOne(decoder, message(R"({"message": "no", "payload": {"text": "yes"}, "origin": "gpu-9",
      "container": "c1", "host": "other"})"),
                &batch);
  EXPECT_EQ(rec.line, "yes");
  EXPECT_EQ(rec.node, "gpu-9");
  EXPECT_EQ(rec.stream, StreamKind::kPod);
}

TEST(KafkaJsonDecoder, MalformedIsSkippedAndNextDecodes) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  EXPECT_FALSE(decoder.decode(message(R"({"message": "cut)"), kReceiveNs, &batch));
  EXPECT_FALSE(decoder.decode(message(R"(["message"])"), kReceiveNs, &batch));
  EXPECT_FALSE(decoder.decode(message(R"({"message": 42, "host": "h"})"), kReceiveNs, &batch));
  EXPECT_TRUE(batch.records.empty());
  EXPECT_TRUE(batch.labels.empty());
  EXPECT_EQ(decodeOne(decoder, message(R"({"message": "ok"})"), &batch).line, "ok");
}

// An empty line is a record, as replay and the Loki and OTLP decoders take it (a blank dmesg line,
// a journal entry without text: Vector's journald source writes "message": ""); only a message
// without a string line field is malformed. A non-empty spelling of the line still wins.
TEST(KafkaJsonDecoder, EmptyLineIsARecord) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  ASSERT_TRUE(decoder.decode(message(R"({"message": "", "host": "gpu-1", "_TRANSPORT": "kernel",
      "timestamp": "2025-03-01T17:32:14.4Z"})"),
                             kReceiveNs, &batch));
  ASSERT_EQ(batch.records.size(), 1);
  const LogRecord& vector = batch.records[0];
  EXPECT_EQ(vector.line, "");
  EXPECT_EQ(vector.node, "gpu-1");
  EXPECT_EQ(vector.stream, StreamKind::kKernel);
  EXPECT_EQ(vector.time_ns, civilToNanos(2025, 3, 1, 17, 32, 14) + 400'000'000);
  EXPECT_EQ(decodeOne(decoder, message(R"({"log": "\n"})"), &batch).line, "");
  EXPECT_EQ(decodeOne(decoder, message(R"({"message": "", "log": "x"})"), &batch).line, "x");
  EXPECT_FALSE(decoder.decode(message(R"({"host": "gpu-1"})"), kReceiveNs, &batch));
  EXPECT_FALSE(decoder.decode(message(R"({"message": null})"), kReceiveNs, &batch));
  EXPECT_EQ(batch.records.size(), 3);
}

// A message must be one JSON object, whole: what follows it refuses it too.
TEST(KafkaJsonDecoder, OneWholeObjectRequired) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  for (const char* bad :
       {R"({"message": "a"} x)", R"({"message": "a"}{"message": "b"})", R"({"message": "a",})",
        R"({"message": "a", "host": "h")", R"({"mess\qge": "a"})", R"({"message": "a\q"})"}) {
    EXPECT_FALSE(decoder.decode(message(bad), kReceiveNs, &batch)) << bad;
  }
  EXPECT_TRUE(batch.records.empty());
  EXPECT_EQ(decodeOne(decoder, message(R"({"message": "a", "host": "h"} )"), &batch).line, "a");
}

// Keys are compared unescaped, as written or with escapes.
TEST(KafkaJsonDecoder, EscapedKeysMatch) {
  const KafkaDecoder decoder(topic(KafkaEncoding::kJson));
  RecordBatch batch;
  const LogRecord& rec = decodeOne(
      decoder, message(R"({"mess\u0061ge": "esc", "kubernetes": {"pod_node_n\u0061me": "gpu-1"}})"),
      &batch);
  EXPECT_EQ(rec.line, "esc");
  EXPECT_EQ(rec.node, "gpu-1");
}

}  // namespace
}  // namespace faultline
