// Loki and OTLP decoders against golden vectors captured from real clients (npm winston-loki
// 6.1.7 and @opentelemetry/exporter-logs-otlp-proto 0.223.1) and hand-made bad input.
// Content-Encoding: tests/e2e/push_bad_input.sh.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <snappy.h>

#include "core/pipeline.h"
#include "ingest/formats/formats.h"
#include "ingest/formats/name_table.h"
#include "ingest/formats/protobuf_wire.h"
#include "ingest/kafka/decoders.h"
#include "ingest/otlp/otlp.h"
#include "ingest/push/loki.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"
#include "tests/unit/helpers.h"

namespace faultline {
namespace {

// winston-loki 6.1.7, protobuf + raw snappy (grafana/loki pkg/push/push.proto PushRequest).
constexpr char kWinstonLokiSnappy[] =
    "nAKYCosBCjR7bGV2ZWw9ImVycm9yIixqb2I9Imtlcm5lbCIsbm9kZT0iAQagLTEiLGV4dHJhPSJ4In0SUwoMCIDth9gGEM"
    "D"
    "DnIEBEkNFWFQ0LWZzIGUBRpggKGRldmljZSBudm1lMG4xcDEpOiBleHQ0X2ZpbmRfZW50cnkgeyIFeQgiOiIJegB9AY4AK"
    "R"
    "GODHdhcm5ujQAIfRJeFYPwVIDI2YEBEk5ORVRERVYgV0FUQ0hET0c6IGV0aDAgKG1seDVfY29yZSk6IHRyYW5zbWl0IHF1"
    "Z"
    "XVlIDMgdGltZWQgb3V0IHsibGV2ZWwiOiJ3YXJuIn0=";
// @opentelemetry/exporter-logs-otlp-proto 0.223.1, ExportLogsServiceRequest (opentelemetry-proto
// opentelemetry/proto/collector/logs/v1/logs_service.proto).
constexpr char kOtelJsProto[] =
    "CuYBCk4KGQoNazhzLm5vZGUubmFtZRIICgZub2RlLTMKFQoJaG9zdC5uYW1lEggKBm5vZGUtMwoYCgxzZXJ2aWNlLm5hbW"
    "US"
    "CAoGa2VybmVsEAASkwEKDAoFZG1lc2cSAzEuMBKCAQlAdbpAXCfqGBARGgVFUlJPUio0CjJtY2U6IFtIYXJkd2FyZSBFcn"
    "Jv"
    "cl06IE1hY2hpbmUgY2hlY2sgZXZlbnRzIGxvZ2dlZDIYCgxsb2cuaW9zdHJlYW0SCAoGc3Rkb3V0MhMKDGs4cy5wb2Qubm"
    "Ft"
    "ZRIDCgFwOABZQHW6QFwn6hg=";

// The labels every decoder keeps under the default StreamRules.
const LabelFilter& defaultKeep() {
  static const LabelFilter keep{StreamRules()};
  return keep;
}

std::string base64(std::string_view in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const size_t v = kAlphabet.find(c);
    if (v == std::string::npos) {
      continue;  // '=' padding
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string labelsOf(const RecordBatch& batch, const LogRecord& r) {
  std::string out;
  for (uint32_t i = r.labels_begin; i < r.labels_end; ++i) {
    out += std::string(batch.labels[i].name) + "=" + std::string(batch.labels[i].value) + ";";
  }
  return out;
}

// The bytes of the batch's lines.
size_t lineBytes(const RecordBatch& batch) {
  size_t n = 0;
  for (const LogRecord& r : batch.records) {
    n += r.line.size();
  }
  return n;
}

// Appends KeyValue{key, AnyValue{string_value}} to an OTLP attribute or kvlist list.
void add(google::protobuf::RepeatedPtrField<opentelemetry::proto::common::v1::KeyValue>* list,
         const char* key, const char* value) {
  auto* kv = list->Add();
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}

TEST(LokiProto, DecodesWinstonLokiGoldenVector) {
  RecordBatch batch;
  std::string error;
  bool too_large = false;
  ASSERT_TRUE(decodeLokiProto(base64(kWinstonLokiSnappy), 1 << 20, "tenant1", StreamRules(), &batch,
                              &error, &too_large))
      << error;
  ASSERT_EQ(batch.records.size(), 2u);
  const LogRecord& a = batch.records[0];
  EXPECT_EQ(a.line, "EXT4-fs error (device nvme0n1p1): ext4_find_entry {\"level\":\"error\"}");
  EXPECT_EQ(a.node, "node-1");
  EXPECT_EQ(a.stream, StreamKind::kOther);  // job="kernel" is not a kernel marker
  // protoc --decode_raw of the vector: timestamp {1: 1795290752 2: 271000000}.
  EXPECT_EQ(a.time_ns, 1795290752LL * 1'000'000'000 + 271'000'000);
  EXPECT_EQ(labelsOf(batch, a), "level=error;job=kernel;node=node-1;extra=x;tenant=tenant1;");
  EXPECT_EQ(batch.records[1].line,
            "NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue 3 timed out {\"level\":\"warn\"}");
  // The queue accounts what the batch keeps alive: the decoded message (more than the snappy
  // body it came from) and the record array.
  EXPECT_GT(batch.memoryBytes(), base64(kWinstonLokiSnappy).size() + 2 * sizeof(LogRecord));
  EXPECT_GE(batch.memoryBytes(), lineBytes(batch));
}

// Protobuf wire encoding, enough to build a PushRequest (pkg/push/push.proto): a varint, and a
// length-delimited field.
std::string varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string field(int number, std::string_view bytes) {
  return varint(static_cast<uint64_t>(number) << 3 | 2) + varint(bytes.size()) + std::string(bytes);
}
// A push body as Promtail sends it: the PushRequest snappy-compressed (block format).
std::string snappied(const std::string& request) {
  std::string out;
  snappy::Compress(request.data(), request.size(), &out);
  return out;
}

// Lines and labels are views into the decoded message, which the batch holds, not copies: what
// the batch keeps alive is the message, its arrays and one arena chunk (the tenant), though the
// lines alone fill more than three chunks.
TEST(LokiProto, LinesPointIntoTheHeldMessage) {
  std::string entries;
  for (int i = 0; i < 2000; ++i) {
    const std::string timestamp = varint(1 << 3) + varint(1795290752 + i);  // seconds
    entries += field(
        2, field(1, timestamp) + field(2, "mlx5_core 0000:0" + std::to_string(i % 9) +
                                              ":00.0: Port module event " + std::string(60, '.')));
  }
  const std::string message = field(1, field(1, R"({transport="kernel", node="gpu-1"})") + entries);
  const std::string body = snappied(message);
  RecordBatch batch;
  std::string error;
  bool too_large = false;
  ASSERT_TRUE(decodeLokiProto(body, 1 << 20, "tenant1", StreamRules(), &batch, &error, &too_large))
      << error;
  ASSERT_EQ(batch.records.size(), 2000u);
  EXPECT_EQ(batch.records[3].node, "gpu-1");
  ASSERT_GT(lineBytes(batch), size_t{3} << 16);
  const size_t arrays =
      batch.records.capacity() * sizeof(LogRecord) + batch.labels.capacity() * sizeof(Label);
  EXPECT_GE(batch.memoryBytes(), message.size() + arrays);
  EXPECT_LE(batch.memoryBytes(), message.size() + arrays + (size_t{64} << 10));
}

// A StreamAdapter's labels (field 1) may follow its entries (field 2) on the wire: every entry
// still gets the stream's labels.
TEST(LokiProto, TheStreamsLabelsMayFollowItsEntries) {
  std::string entries;
  for (int i = 0; i < 3; ++i) {
    const std::string timestamp = varint(1 << 3) + varint(1795290752 + i);  // seconds
    entries += field(2, field(1, timestamp) + field(2, "line " + std::to_string(i)));
  }
  const std::string message = field(1, entries + field(1, R"({transport="kernel", node="gpu-1"})"));
  RecordBatch batch;
  std::string error;
  bool too_large = false;
  ASSERT_TRUE(decodeLokiProto(snappied(message), 1 << 20, "tenant1", StreamRules(), &batch, &error,
                              &too_large))
      << error;
  ASSERT_EQ(batch.records.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(batch.records[i].node, "gpu-1");
    EXPECT_EQ(batch.records[i].line, "line " + std::to_string(i));
    EXPECT_EQ(batch.records[i].time_ns, (1795290752 + static_cast<int64_t>(i)) * 1000000000);
  }
}

TEST(LokiProto, RefusesCorruptSnappyAndProtobuf) {
  RecordBatch batch;
  std::string error;
  bool too_large = false;
  EXPECT_FALSE(decodeLokiProto("\xff\xff\xff\xff\xff\xff", 1 << 20, "", StreamRules(), &batch,
                               &error, &too_large));
  EXPECT_FALSE(too_large);
  std::string bad;
  snappy::Compress("\x0a\xff\x01garbage", 10, &bad);
  error.clear();
  EXPECT_FALSE(decodeLokiProto(bad, 1 << 20, "", StreamRules(), &batch, &error, &too_large));
  EXPECT_NE(error.find("PushRequest"), std::string::npos) << error;
}

// A time past int64 nanoseconds (year 2262) is taken as the latest there is, which the pipeline
// bounds as any time ahead of its clock: one entry a pod stamped in year 9999 (a shipper taking
// the time from the line) must not refuse the request's kernel stream. One before 1678 (Go's zero
// time, year 1) is taken as the earliest there is: it refused the request, and Promtail drops a
// batch answered 400, its kernel lines too.
TEST(LokiProto, TimestampBeyondInt64NanosecondsIsTheNearestTime) {
  // PushRequest{streams: [{labels: "{a=\"b\"}", entries: [{timestamp: {seconds: S}, line:
  // "x"}]}]}, encoded by hand (logproto push.proto field numbers): found by loki_fuzz, it
  // overflowed seconds * 10^9.
  auto body = [](int64_t seconds) {
    const std::string timestamp = "\x08" + varint(static_cast<uint64_t>(seconds));
    const std::string entry = field(1, timestamp) + field(2, "x");
    return snappied(field(1, field(1, "{a=\"b\"}") + field(2, entry)));
  };
  RecordBatch batch;
  std::string error;
  bool too_large = false;
  ASSERT_TRUE(
      decodeLokiProto(body(18975159936), 1 << 20, "", StreamRules(), &batch, &error, &too_large))
      << error;
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].time_ns, INT64_MAX);
  batch = RecordBatch();
  ASSERT_TRUE(
      decodeLokiProto(body(-62135596800), 1 << 20, "", StreamRules(), &batch, &error, &too_large))
      << error;
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].time_ns, INT64_MIN);
}

// As LokiJson.TheStreamNamesTheNodeBeforeStructuredMetadata.
TEST(LokiProto, TheStreamNamesTheNodeBeforeStructuredMetadata) {
  // EntryAdapter{line: 2, structuredMetadata: 3 (LabelPairAdapter name 1, value 2)}, by hand.
  const std::string metadata = field(3, field(1, "node") + field(2, "gpu-7")) +
                               field(3, field(1, "job_name") + field(2, "a"));
  const std::string request =
      field(1, field(1, R"({pod="app-0", node_name="gpu-1"})") +
                   field(2, field(2, "NCCL WARN Call to ibv_modify_qp failed") + metadata)) +
      field(1, field(1, R"({job="fluent-bit"})") +
                   field(2, field(2, "x") + field(3, field(1, "node") + field(2, "gpu-3")))) +
      field(1, field(1, R"({pod="app-0"})") + field(2, field(2, "x") + metadata));
  const std::string body = snappied(request);
  RecordBatch batch;
  std::string error;
  bool too_large = false;
  ASSERT_TRUE(decodeLokiProto(body, 1 << 20, "", StreamRules(), &batch, &error, &too_large))
      << error;
  ASSERT_EQ(batch.records.size(), 3u);
  EXPECT_EQ(batch.records[0].node, "gpu-1");
  EXPECT_EQ(batch.records[0].stream, StreamKind::kPod);
  EXPECT_EQ(labelsOf(batch, batch.records[0]), "pod=app-0;node_name=gpu-1;");
  EXPECT_EQ(batch.records[1].node, "gpu-3");
  EXPECT_EQ(batch.records[2].node, "");
  EXPECT_EQ(labelsOf(batch, batch.records[2]), "pod=app-0;");
}

TEST(LokiProto, SnappyLengthOverLimitIsTooLargeBeforeAllocating) {
  // A 5-byte header that claims 2^32-1 bytes: refused from the header alone.
  const std::string bomb = std::string("\xff\xff\xff\xff\x0f", 5) + "\x00\x00";
  RecordBatch batch;
  std::string error;
  bool too_large = false;
  EXPECT_FALSE(decodeLokiProto(bomb, 64 << 20, "", StreamRules(), &batch, &error, &too_large));
  EXPECT_TRUE(too_large) << error;
  // Past INT_MAX, the most a protobuf message may hold, whatever max_bytes allows.
  too_large = false;
  EXPECT_FALSE(decodeLokiProto(bomb, SIZE_MAX, "", StreamRules(), &batch, &error, &too_large));
  EXPECT_TRUE(too_large) << error;
  EXPECT_NE(error.find("over the limit of 2147483647"), std::string::npos) << error;
}

TEST(LokiSelector, ParsesQuotesEscapesAndSpaces) {
  RecordBatch batch;
  std::string error;
  const std::string sel =
      R"({ k8s_node_name = "n1" , msg="a \"quoted\" \\ \n\u00e9",raw=`x\y`, empty=""})";
  ASSERT_TRUE(parseLokiSelector(sel, &batch, &error)) << error;
  ASSERT_EQ(batch.labels.size(), 4u);
  EXPECT_EQ(batch.labels[0].name, "k8s_node_name");
  EXPECT_EQ(batch.labels[0].value, "n1");
  EXPECT_EQ(batch.labels[1].value, "a \"quoted\" \\ \n\xc3\xa9");
  EXPECT_EQ(batch.labels[2].value, "x\\y");
  EXPECT_EQ(batch.labels[3].value, "");
  batch.labels.clear();
  EXPECT_TRUE(parseLokiSelector("{}", &batch, &error));
  EXPECT_TRUE(batch.labels.empty());
  // Go's strconv.Quote writes control characters as \a \b \f \v (Prometheus' labels.String()),
  // and Loki's selector lexer (strconv.Unquote) also reads octal escapes.
  ASSERT_TRUE(parseLokiSelector(R"({file="a\fb\vc\ad\be\101\377"})", &batch, &error)) << error;
  ASSERT_EQ(batch.labels.size(), 1u);
  EXPECT_EQ(batch.labels[0].value, "a\fb\vc\ad\beA\xff");
}

// Loki 3 reads a stream's labels with Prometheus 3's ParseMetric, which takes quoted (UTF-8)
// label names, and Prometheus 3's labels.String() writes a name such as service.name so.
TEST(LokiSelector, QuotedLabelNames) {
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(parseLokiSelector(R"({"service.name"="x", `k8s.node.name` = "n1",job="kernel",)"
                                R"( "a\"b\u00e9"="y"})",
                                &batch, &error))
      << error;
  ASSERT_EQ(batch.labels.size(), 4u);
  EXPECT_EQ(batch.labels[0].name, "service.name");
  EXPECT_EQ(batch.labels[0].value, "x");
  EXPECT_EQ(batch.labels[1].name, "k8s.node.name");
  EXPECT_EQ(batch.labels[1].value, "n1");
  EXPECT_EQ(batch.labels[2].name, "job");
  EXPECT_EQ(batch.labels[3].name, "a\"b\xc3\xa9");
  EXPECT_EQ(batch.labels[3].value, "y");
  batch.labels.clear();
  EXPECT_FALSE(parseLokiSelector(R"({""="x"})", &batch, &error));
  EXPECT_TRUE(batch.labels.empty());
}

TEST(LokiSelector, RefusesMalformedSelectors) {
  for (const char* bad :
       {"", "job=\"x\"", "{job=\"x\"", "{job=x}", "{job=\"x}", "{=\"x\"}", "{a=\"1\" b=\"2\"}",
        "{a=\"\\q\"}", "{a=\"\\400\"}", "{a=\"\\01\"}", "{a=\"1\"} trailing"}) {
    RecordBatch batch;
    std::string error;
    EXPECT_FALSE(parseLokiSelector(bad, &batch, &error)) << bad;
    EXPECT_FALSE(error.empty());
    EXPECT_TRUE(batch.labels.empty()) << bad;
  }
}

// decodeLokiJson twice: over `body` alone (copied with padding) and in place, followed in its
// buffer by more than kJsonPadding bytes, which would complete a body cut 2 bytes short and must
// not be read as part of it. Both must agree; *batch gets the in-place decoding.
bool lokiJson(const std::string& body, std::string_view tenant, RecordBatch* batch,
              std::string* error) {
  RecordBatch copied;
  std::string copied_error;
  const bool copied_ok =
      decodeLokiJson(body, body.size(), tenant, StreamRules(), &copied, &copied_error);
  const size_t before = batch->records.size();
  const std::string buffer = body + "]}" + std::string(kJsonPadding, ' ');
  const bool ok = decodeLokiJson(std::string_view(buffer).substr(0, body.size()), buffer.size(),
                                 tenant, StreamRules(), batch, error);
  EXPECT_EQ(ok, copied_ok) << body;
  EXPECT_EQ(*error, copied_error) << body;
  if (ok && copied_ok) {
    EXPECT_EQ(batch->records.size() - before, copied.records.size()) << body;
    for (size_t i = 0; i < copied.records.size() && before + i < batch->records.size(); ++i) {
      const LogRecord& a = batch->records[before + i];
      const LogRecord& b = copied.records[i];
      EXPECT_EQ(a.line, b.line);
      EXPECT_EQ(a.time_ns, b.time_ns);
      EXPECT_EQ(labelsOf(*batch, a), labelsOf(copied, b));
    }
  }
  return ok;
}

// What simdjson refuses and Go's decoders read as U+FFFD (Loki's, the OTel collector's) is
// replaced, the document keeping its size: bytes that are not UTF-8 by '?', one per byte, and
// lone surrogate escapes by \ufffd.
TEST(ReplaceInvalidUnicode, AsGoDecodersReadIt) {
  const std::string q = "?";
  const std::pair<std::string, std::string> cases[] = {
      {R"("a\ud83d")", R"("a\ufffd")"},                       // high half alone, at the end
      {R"("\udcff x")", R"("\ufffd x")"},                     // low half alone
      {R"("\ud83d\u0041")", R"("\ufffd\u0041")"},             // high half, then no low half
      {"\"a\xff\"", "\"a" + q + "\""},                        // not UTF-8
      {"\"\xc0\xaf\"", "\"" + q + q + "\""},                  // overlong '/'
      {"\"\xed\xa0\x80\"", "\"" + q + q + q + "\""},          // a surrogate as UTF-8
      {"\"\xf0\x9f\x98\"", "\"" + q + q + q + "\""},          // cut inside a 4-byte one
      {"\"\xf4\x90\x80\x80\"", "\"" + q + q + q + q + "\""},  // past U+10FFFF
  };
  for (const auto& [in, want] : cases) {
    std::string out;
    EXPECT_TRUE(replaceInvalidUnicode(in, &out)) << in;
    EXPECT_EQ(out, want) << in;
    EXPECT_EQ(out.size(), in.size());
  }
  // Well-formed: a pair, an escaped backslash before "ud83d", UTF-8 of 2 to 4 bytes.
  for (const std::string_view ok :
       {R"("\ud83d\ude80")", R"("\\ud83d")", "\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80\"", "{}"}) {
    std::string out = "untouched";
    EXPECT_FALSE(replaceInvalidUnicode(ok, &out)) << ok;
    EXPECT_EQ(out, "untouched");
  }
}

// JavaScript clients write a string cut inside an emoji as a lone surrogate escape, and a kernel
// line may hold any byte: one such line refused the whole request (a 400, which winston-loki and
// the OTel JS exporter drop with the kernel lines in it).
TEST(LokiJson, InvalidUnicodeIsReplacedNotRefused) {
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(
      lokiJson(R"({"streams":[{"stream":{"pod":"p"},"values":[["1","done \ud83d"]]},)"
               "{\"stream\":{\"transport\":\"kernel\"},\"values\":[[\"2\",\"Xid \xff\"]]}]}",
               "", &batch, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 2u);
  EXPECT_EQ(batch.records[0].line, "done \xef\xbf\xbd");
  EXPECT_EQ(batch.records[1].line, "Xid ?");
}

TEST(LokiJson, DecodesStreamsWithMetadataAndTenant) {
  const std::string body = R"({"streams":[
    {"stream":{"transport":"kernel","host":"gpu-7"},
     "values":[["1700000000000000001","NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"],
               ["1700000000000000002","with meta",{"trace_id":"abc"}]]},
    {"stream":{"pod":"evil-0","transport":"kernel","node":"gpu-7"},
     "values":[["1700000000000000003","NVRM: Xid (PCI:0000:44:00): 79, fake"]]}]})";
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(lokiJson(body, "acme", &batch, &error)) << error;
  ASSERT_EQ(batch.records.size(), 3u);
  EXPECT_EQ(batch.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(batch.records[0].node, "gpu-7");
  EXPECT_EQ(batch.records[0].time_ns, 1700000000000000001);
  // Labels in the order the body gives them, as the protobuf selector's.
  EXPECT_EQ(labelsOf(batch, batch.records[1]),
            "transport=kernel;host=gpu-7;tenant=acme;trace_id=abc;");
  EXPECT_EQ(batch.records[2].stream, StreamKind::kPod);  // pod labels always win
}

// The stream's labels (the shipper's: Promtail's discovery, Fluent Bit's $kubernetes) name the
// node before an entry's structured metadata, which shippers fill from the line's own fields
// (Promtail's json and structured_metadata stages): a pod printing {"node":"gpu-7"} named gpu-7,
// as `node` comes before `node_name` in StreamRules::node_labels. A stream naming no node still
// takes its entries' (Fluent Bit's structured_metadata node=$kubernetes['host']), but not a pod's
// stream: a pod's metadata names neither its node nor its job (two entries naming two jobs, as a
// pod printing {"job_name":...} would, tainted its node "2 jobs within 1d"), as OTLP's record
// attributes under a pod's resource do not.
TEST(LokiJson, TheStreamNamesTheNodeBeforeStructuredMetadata) {
  const std::string body = R"({"streams":[
    {"stream":{"pod":"app-0","node_name":"gpu-1"},
     "values":[["1","NCCL WARN Call to ibv_modify_qp failed",{"node":"gpu-7","job_name":"a"}]]},
    {"stream":{"job":"fluent-bit"},"values":[["2","x",{"node":"gpu-3"}]]},
    {"stream":{"pod":"app-0"},"values":[["3","x",{"node":"gpu-9","job_name":"b"}]]}]})";
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(lokiJson(body, "", &batch, &error)) << error;
  ASSERT_EQ(batch.records.size(), 3u);
  EXPECT_EQ(batch.records[0].node, "gpu-1");
  EXPECT_EQ(batch.records[0].stream, StreamKind::kPod);
  EXPECT_EQ(labelsOf(batch, batch.records[0]), "pod=app-0;node_name=gpu-1;");
  EXPECT_EQ(batch.records[1].node, "gpu-3");
  EXPECT_EQ(batch.records[2].node, "");
  EXPECT_EQ(batch.records[2].stream, StreamKind::kPod);
  EXPECT_EQ(labelsOf(batch, batch.records[2]), "pod=app-0;");
}

// Structured metadata is what a shipper made of the line's own fields (Promtail's json and
// structured_metadata stages): a host process's JSON log saying "transport": "kernel" must not
// pass for the kernel's. The stream's labels (a journal scrape's relabelled transport) may.
TEST(LokiJson, StructuredMetadataMarksNoKernelStream) {
  const std::string xid = "NVRM: Xid (PCI:0000:45:00): 79, pid=1, GPU has fallen off the bus.";
  const std::string body =
      R"({"streams":[{"stream":{"node_name":"gpu-2","job":"varlog","filename":"/var/log/a.log"},)"
      R"("values":[["1",")" +
      xid +
      R"(",{"transport":"kernel","syslog_identifier":"kernel"}]]},)"
      R"({"stream":{"node_name":"gpu-2","transport":"kernel"},"values":[["2",")" +
      xid + R"(",{"syslog_identifier":"kernel"}]]}]})";
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(lokiJson(body, "", &batch, &error)) << error;
  ASSERT_EQ(batch.records.size(), 2u);
  EXPECT_EQ(batch.records[0].stream, StreamKind::kOther);
  EXPECT_EQ(batch.records[1].stream, StreamKind::kKernel);
  CollectingSink sink;
  Pipeline pipeline(shippedBank(), Taint{}, {&sink});
  batch.records.pop_back();
  pipeline.process(batch);
  for (const Decision& d : sink.got) {
    ADD_FAILURE() << d.node << " " << d.rule;
  }
}

// Grafana's Fluent Bit chart (grafana/helm-charts charts/fluent-bit, values.yaml labelMap) labels
// a container's output {namespace, app, release, node, container, instance, stream}: the pod's
// name is `instance`, no pod label. A pod printing `ib0: Lost carrier` five times was an `other`
// record, read by ipoib-lost-carrier, and tainted its node (ipoib-lost-carrier-repeated).
TEST(LokiJson, APodsOutputLabelledByGrafanasFluentBitChartTaintsNothing) {
  std::string values;
  for (int i = 0; i < 5; ++i) {
    values += std::string(i > 0 ? "," : "") + "[\"" + std::to_string(1700000000 + i * 60) +
              "000000000\",\"ib0: Lost carrier\"]";
  }
  const std::string body = R"({"streams":[{"stream":{"job":"fluent-bit","namespace":"ml",)"
                           R"("app":"train","node":"gpu-1","container":"trainer",)"
                           R"("instance":"train-0","stream":"stdout"},"values":[)" +
                           values + "]}]}";
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(lokiJson(body, "", &batch, &error)) << error;
  ASSERT_EQ(batch.records.size(), 5u);
  EXPECT_EQ(batch.records[0].node, "gpu-1");
  EXPECT_EQ(batch.records[0].stream, StreamKind::kPod);
  CollectingSink sink;
  Pipeline pipeline(shippedBank(), Taint{}, {&sink});
  pipeline.process(batch);
  for (const Decision& d : sink.got) {
    ADD_FAILURE() << d.node << " " << d.rule;
  }
}

TEST(LokiJson, KeysInAnyOrderAndUnknownOnesSkipped) {
  // "values" before "stream", unknown keys holding nested values, a nested and a numeric metadata
  // value (dropped), an integer timestamp.
  const std::string body = R"({"extra":{"a":[1,{"b":2}]},"streams":[
    {"values":[[1700000000000000001,"first",{"trace_id":"t1","n":7,"deep":{"x":"y"}}],
               ["1700000000000000002","second"]],
     "unknown":[["x"]],
     "stream":{"node":"gpu-3","transport":"kernel"}},
    {"stream":{"node":"gpu-4"},"values":[]}],"after":null})";
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(lokiJson(body, "", &batch, &error)) << error;
  ASSERT_EQ(batch.records.size(), 2u);
  EXPECT_EQ(batch.records[0].time_ns, 1700000000000000001);
  EXPECT_EQ(batch.records[0].line, "first");
  EXPECT_EQ(labelsOf(batch, batch.records[0]), "node=gpu-3;transport=kernel;trace_id=t1;");
  EXPECT_EQ(labelsOf(batch, batch.records[1]), "node=gpu-3;transport=kernel;");
  EXPECT_EQ(batch.records[1].node, "gpu-3");
  EXPECT_EQ(batch.records[1].stream, StreamKind::kKernel);
}

TEST(LokiJson, ARepeatedStreamsKeyKeepsTheLastAndWhatTheBatchHeld) {
  // As a parse tree reads duplicate keys: the last one wins. Records the batch held before the
  // body are kept.
  RecordBatch batch;
  batch.records.emplace_back().line = "earlier";
  std::string error;
  ASSERT_TRUE(lokiJson(
      R"({"streams":[{"values":[["1","dropped"]]}],"streams":[{"values":[["2","kept"]]}]})", "",
      &batch, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 2u);
  EXPECT_EQ(batch.records[0].line, "earlier");
  EXPECT_EQ(batch.records[1].line, "kept");
  EXPECT_EQ(batch.records[1].time_ns, 2);
}

TEST(LokiJson, ReasonsNameThePlace) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"streams":[{"stream":{"a":"b"},"values":[["1","x"],["soon","y"]]}]})",
       "streams[0].values[1][0] is not a string of nanoseconds"},
      {R"({"streams":[{"values":[]},{"stream":{"a":1},"values":[]}]})",
       "streams[1].stream.a is not a string"},
      {R"({"streams":[{"values":[["1"]]}]})", R"(streams[0].values[0] is not ["<ns>", "<line>")"},
      {R"({"streams":[{"values":[["1","x",{},4]]}]})", R"(streams[0].values[0] is not ["<ns>")"},
      {R"({"streams":[{"values":[["1","x","m"]]}]})",
       "streams[0].values[0][2] (structured metadata) is not an object"},
      {R"({"streams":[{"stream":{}}]})", "streams[0].values is missing or not an array"},
      {R"({"streams":[7]})", "streams[0] is not an object"},
      {R"({"other":[]})", "streams is missing or not an array"},
      {R"({"streams":[)", "body is not a JSON object ("},
  };
  for (const auto& [body, reason] : cases) {
    RecordBatch batch;
    std::string error;
    EXPECT_FALSE(lokiJson(body, "", &batch, &error)) << body;
    EXPECT_NE(error.find(reason), std::string::npos) << body << " -> " << error;
  }
}

// Go's encoding/json writes a nil slice or map as null, and Loki reads null as empty (204).
TEST(LokiJson, NullIsAnEmptyListOrMap) {
  for (const char* empty :
       {R"({"streams":null})", R"({"streams":[{"stream":{"a":"b"},"values":null}]})"}) {
    RecordBatch batch;
    std::string error;
    EXPECT_TRUE(lokiJson(empty, "", &batch, &error)) << empty << ": " << error;
    EXPECT_TRUE(batch.records.empty()) << empty;
  }
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(lokiJson(
      R"({"streams":[{"stream":null,"values":[["1","x"]]},{"stream":{"a":"b"},"values":[["2","y"]]}]})",
      "", &batch, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 2U);
  EXPECT_EQ(batch.records[0].labels_begin, batch.records[0].labels_end);
  EXPECT_EQ(batch.label(batch.records[1], "a"), "b");
}

TEST(LokiJson, RefusesMalformedBodiesWithReasons) {
  for (const char* bad : {"{", "[]", R"({"streams":{}})", R"({"streams":[{"values":[[1]]}]})",
                          R"({"streams":[{"stream":{"a":1},"values":[]}]})",
                          R"({"streams":[{"values":[["12x","line"]]}]})",
                          R"({"streams":[{"values":[["1","line","meta"]]}]})"}) {
    RecordBatch batch;
    std::string error;
    EXPECT_FALSE(lokiJson(bad, "", &batch, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

// A stream's labels are repeated in each entry that carries metadata: a small body of many such
// entries would fill memory (201 labels over 52,428 entries of a 1 MiB body took 587 MB).
TEST(LokiJson, ABodyWhoseLabelsRepeatPastTheDecodeBoundIsRefused) {
  std::string labels;
  for (int i = 0; i < 200; ++i) {
    labels += "\"l" + std::to_string(i) + "\":\"v\",";
  }
  std::string body = R"({"streams":[{"stream":{)" + labels + R"("node":"n1"},"values":[)";
  for (int i = 0; i < 20000; ++i) {
    body += std::string(i == 0 ? "" : ",") + R"(["1",".",{"a":"b"}])";
  }
  body += "]}]}";
  RecordBatch batch;
  std::string error;
  EXPECT_FALSE(lokiJson(body, "", &batch, &error));
  EXPECT_NE(error.find("decodes to more than 16 times its"), std::string::npos) << error;
  // The same entries without metadata share the stream's labels: within the bound.
  std::string plain = R"({"streams":[{"stream":{)" + labels + R"("node":"n1"},"values":[)";
  for (int i = 0; i < 20000; ++i) {
    plain += std::string(i == 0 ? "" : ",") + R"(["1","."])";
  }
  plain += "]}]}";
  RecordBatch ok;
  std::string none;
  ASSERT_TRUE(lokiJson(plain, "", &ok, &none)) << none;
  EXPECT_EQ(ok.records.size(), 20000U);
}

TEST(OtlpProto, AResourceRepeatedPastTheDecodeBoundIsRefused) {
  opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest req;
  auto* rl = req.add_resource_logs();
  for (int i = 0; i < 200; ++i) {  // a kept attribute, given 200 times
    auto* kv = rl->mutable_resource()->add_attributes();
    kv->set_key("k8s.node.name");
    kv->mutable_value()->set_string_value("n1");
  }
  auto* scope = rl->add_scope_logs();
  for (int i = 0; i < 20000; ++i) {
    scope->add_log_records()->mutable_body()->set_string_value(".");
  }
  const std::string body = req.SerializeAsString();
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  EXPECT_FALSE(decodeOtlpProto(body, StreamRules(), defaultKeep(), &batch, &rejected, &error));
  EXPECT_NE(error.find("request decodes to more than 16 times its"), std::string::npos) << error;
  EXPECT_TRUE(batch.records.empty());
}

TEST(OtlpJson, AResourceRepeatedPastTheDecodeBoundIsRefused) {
  std::string attrs;
  for (int i = 0; i < 200; ++i) {
    attrs +=
        std::string(i == 0 ? "" : ",") + R"({"key":"k8s.node.name","value":{"stringValue":"n1"}})";
  }
  std::string body = R"({"resourceLogs":[{"resource":{"attributes":[)" + attrs +
                     R"(]},"scopeLogs":[{"logRecords":[)";
  for (int i = 0; i < 20000; ++i) {
    body += std::string(i == 0 ? "" : ",") + R"({"body":{"stringValue":"."}})";
  }
  body += "]}]}]}";
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  EXPECT_FALSE(
      decodeOtlpJson(body, body.size(), StreamRules(), defaultKeep(), &batch, &rejected, &error));
  EXPECT_NE(error.find("request decodes to more than 16 times its"), std::string::npos) << error;
  EXPECT_TRUE(batch.records.empty());
}

TEST(NameTable, FindsExactNamesOnly) {
  NameTable<int> table;
  table["ab"] = 1;
  table["ba"] = 2;
  table["abc"] = 3;
  table[""] = 4;
  ++table["ab"];  // the same entry
  ASSERT_NE(table.find("ab"), nullptr);
  EXPECT_EQ(*table.find("ab"), 2);
  EXPECT_EQ(*table.find("ba"), 2);
  EXPECT_EQ(*table.find("abc"), 3);
  EXPECT_EQ(*table.find(""), 4);
  for (const char* absent : {"a", "aa", "bb", "Ab", "abd", "abcd", "b"}) {
    EXPECT_EQ(table.find(absent), nullptr) << absent;
  }
  EXPECT_EQ(NameTable<int>().find("x"), nullptr);
  EXPECT_EQ(NameTable<int>().find(""), nullptr);
}

TEST(LabelFilter, KeepsTheLabelsAStageReadsAndNoOthers) {
  const StreamRules defaults;
  const LabelFilter& keep = defaultKeep();
  for (const auto* names : {&defaults.node_labels, &defaults.pod_labels}) {
    for (const std::string& name : *names) {
      EXPECT_TRUE(keep.keeps(name)) << name;
    }
  }
  for (const auto& kv : defaults.kernel_labels) {
    EXPECT_TRUE(keep.keeps(kv.first)) << kv.first;
  }
  for (std::string_view name : kJobLabels) {
    EXPECT_TRUE(keep.keeps(name)) << name;
  }
  for (const char* name : {"", "MESSAGE", "PRIORITY", "service.name", "k8s.node.nam",
                           "k8s.node.namex", "K8S.NODE.NAME", "_hostname"}) {
    EXPECT_FALSE(keep.keeps(name)) << name;
  }
  EXPECT_FALSE(keep.keeps(std::string(200, 'x')));

  StreamRules mine;
  mine.node_labels = {"rack.slot", ""};
  mine.pod_labels = {};
  mine.kernel_labels = {{"facility", "kern"}};
  const LabelFilter custom(mine);
  EXPECT_TRUE(custom.keeps("rack.slot"));
  EXPECT_TRUE(custom.keeps("facility"));
  EXPECT_TRUE(custom.keeps("k8s.job.name"));  // job labels are always read
  EXPECT_FALSE(custom.keeps("k8s.node.name"));
  EXPECT_FALSE(custom.keeps("k8s.pod.name"));
  EXPECT_FALSE(custom.keeps(""));  // a configured empty name keeps nothing
}

TEST(OtlpProto, DecodesOtelJsExporterGoldenVector) {
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  const std::string bytes = base64(kOtelJsProto);
  ASSERT_TRUE(decodeOtlpProto(bytes, StreamRules(), defaultKeep(), &batch, &rejected, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(rejected, 0u);
  const LogRecord& r = batch.records[0];
  EXPECT_EQ(r.line, "mce: [Hardware Error]: Machine check events logged");
  EXPECT_EQ(r.node, "node-3");
  EXPECT_EQ(r.stream, StreamKind::kPod);  // the record carries k8s.pod.name
  EXPECT_EQ(r.time_ns, static_cast<int64_t>(0x18ea275c40ba7540));
  EXPECT_FALSE(batch.label(r, "k8s.pod.name").empty());
  EXPECT_EQ(batch.label(r, "service.name"), "");  // no stage reads it: not kept as a label
}

// Every AnyValue kind the decoder reads, an unknown field, and a resource that follows its
// scope_logs on the wire (a parser merges the two ResourceLogs encodings into one).
TEST(OtlpProto, ReadsValuesInPlaceWhateverTheFieldOrder) {
  namespace otlp = opentelemetry::proto;
  otlp::logs::v1::ResourceLogs scopes;
  otlp::logs::v1::ScopeLogs* sl = scopes.add_scope_logs();
  sl->mutable_scope()->set_name("journald");
  otlp::logs::v1::LogRecord* xid = sl->add_log_records();
  xid->set_time_unix_nano(1700000000000000001);
  xid->set_observed_time_unix_nano(5);
  xid->mutable_body()->set_string_value(
      "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  auto* attr = xid->add_attributes();
  attr->set_key("hostname");  // a node label after k8s.node.name: kept, but not the node
  attr->mutable_value()->set_bool_value(true);
  attr = xid->add_attributes();
  attr->set_key("node");
  attr->mutable_value()->set_double_value(0.5);  // not a scalar the decoder keeps
  attr = xid->add_attributes();
  attr->set_key("service.name");  // no stage reads it: neither kept nor its value read
  attr->mutable_value()->set_string_value("\x0a\xff");
  xid->GetReflection()->MutableUnknownFields(xid)->AddVarint(99, 7);
  otlp::logs::v1::LogRecord* journal = sl->add_log_records();
  journal->set_observed_time_unix_nano(1700000000000000002);
  auto* fields = journal->mutable_body()->mutable_kvlist_value();
  auto* kv = fields->add_values();
  kv->set_key("_TRANSPORT");
  kv->mutable_value()->set_string_value("kernel");
  kv = fields->add_values();
  kv->set_key("PRIORITY");  // not kept
  kv->mutable_value()->set_string_value("4");
  kv = fields->add_values();
  kv->set_key("MESSAGE");  // not UTF-8: the journald receiver sends its bytes as integers
  for (int c : {0x6d, 0x63, 0x65, 0xff}) {  // "mce\xff"
    kv->mutable_value()->mutable_array_value()->add_values()->set_int_value(c);
  }
  sl->add_log_records()->mutable_body()->set_double_value(1.0);  // no line: rejected
  sl->add_log_records()->mutable_body()->set_bytes_value("raw bytes");
  otlp::logs::v1::ResourceLogs resource;
  kv = resource.mutable_resource()->add_attributes();
  kv->set_key("k8s.node.name");
  kv->mutable_value()->set_string_value("gpu-7");
  kv = resource.mutable_resource()->add_attributes();
  kv->set_key("job_name");
  kv->mutable_value()->set_int_value(-3);
  const std::string rl = scopes.SerializeAsString() + resource.SerializeAsString();
  std::string bytes = "\x0a";  // ExportLogsServiceRequest.resource_logs, length-delimited
  for (size_t n = rl.size();; n >>= 7) {
    bytes.push_back(static_cast<char>(n < 0x80 ? n : (n & 0x7f) | 0x80));
    if (n < 0x80) {
      break;
    }
  }
  bytes += rl;

  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  ASSERT_TRUE(decodeOtlpProto(bytes, StreamRules(), defaultKeep(), &batch, &rejected, &error))
      << error;
  EXPECT_EQ(rejected, 1u);
  ASSERT_EQ(batch.records.size(), 3u);
  const LogRecord& a = batch.records[0];
  EXPECT_EQ(a.line, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  EXPECT_EQ(a.line.data(), bytes.data() + bytes.find("NVRM"));  // a view, not a copy
  EXPECT_EQ(a.time_ns, 1700000000000000001);
  EXPECT_EQ(a.node, "gpu-7");
  EXPECT_EQ(batch.label(a, "job_name"), "-3");
  EXPECT_EQ(batch.label(a, "hostname"), "true");
  EXPECT_EQ(batch.label(a, "node"), "");
  EXPECT_EQ(a.labels_end - a.labels_begin, 3u);  // k8s.node.name, job_name, hostname
  const LogRecord& b = batch.records[1];
  EXPECT_EQ(b.line, "mce\xff");
  EXPECT_EQ(b.time_ns, 1700000000000000002);  // no time_unix_nano: the observed time
  EXPECT_EQ(b.node, "gpu-7");
  EXPECT_EQ(b.stream, StreamKind::kKernel);
  EXPECT_EQ(b.labels_end - b.labels_begin, 3u);  // k8s.node.name, job_name, _TRANSPORT
  EXPECT_EQ(batch.label(b, "PRIORITY"), "");
  EXPECT_EQ(batch.records[2].line, "raw bytes");
  EXPECT_EQ(batch.records[2].time_ns, 0);

  // Every strict prefix is refused (a cut inside a length, a tag or a fixed64) or, cut
  // between two fields, decodes to fewer records; none reads past the end (ASan).
  for (size_t n = 1; n < bytes.size(); ++n) {
    RecordBatch cut;
    uint64_t r = 0;
    const std::string prefix = bytes.substr(0, n);
    if (decodeOtlpProto(prefix, StreamRules(), defaultKeep(), &cut, &r, &error)) {
      EXPECT_LE(cut.records.size() + r, 4u) << n;
    } else {
      EXPECT_TRUE(cut.records.empty() && cut.labels.empty()) << n;
    }
  }
}

// A time past int64 nanoseconds (year 2262) is the latest there is, which the pipeline bounds, as
// in the Loki decoders: cast, 2^64-1 became 1 ns before 1970 and 2^63 the year 1677.
TEST(OtlpProto, TimeBeyondInt64NanosecondsIsTheLatestTime) {
  namespace otlp = opentelemetry::proto;
  otlp::collector::logs::v1::ExportLogsServiceRequest request;
  otlp::logs::v1::ResourceLogs* rl = request.add_resource_logs();
  auto* kv = rl->mutable_resource()->add_attributes();
  kv->set_key("k8s.node.name");
  kv->mutable_value()->set_string_value("gpu-7");
  otlp::logs::v1::ScopeLogs* sl = rl->add_scope_logs();
  for (const uint64_t t : {UINT64_MAX, uint64_t{1} << 63}) {
    otlp::logs::v1::LogRecord* r = sl->add_log_records();
    r->set_time_unix_nano(t);
    r->mutable_body()->set_string_value("x");
  }
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  const std::string bytes = request.SerializeAsString();
  ASSERT_TRUE(decodeOtlpProto(bytes, StreamRules(), defaultKeep(), &batch, &rejected, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 2u);
  EXPECT_EQ(batch.records[0].time_ns, INT64_MAX);
  EXPECT_EQ(batch.records[1].time_ns, INT64_MAX);
}

// As in OtlpJson.APodsOwnAttributesNameNeitherItsNodeNorItsJob.
TEST(OtlpProto, APodsOwnAttributesNameNeitherItsNodeNorItsJob) {
  namespace otlp = opentelemetry::proto;
  otlp::collector::logs::v1::ExportLogsServiceRequest request;
  otlp::logs::v1::ResourceLogs* rl = request.add_resource_logs();
  add(rl->mutable_resource()->mutable_attributes(), "k8s.pod.name", "p-0");
  add(rl->mutable_resource()->mutable_attributes(), "host.name", "gpu-1");
  otlp::logs::v1::LogRecord* r = rl->add_scope_logs()->add_log_records();
  r->mutable_body()->set_string_value("watchdog timeout");
  add(r->mutable_attributes(), "k8s.node.name", "gpu-victim");
  add(r->mutable_attributes(), "job_name", "run-a");
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  const std::string bytes = request.SerializeAsString();
  ASSERT_TRUE(decodeOtlpProto(bytes, StreamRules(), defaultKeep(), &batch, &rejected, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].node, "gpu-1");
  EXPECT_EQ(batch.job(batch.records[0]), "");
}

TEST(OtlpProto, RefusesGarbage) {
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  EXPECT_FALSE(
      decodeOtlpProto("\x0a\x05\x0a", StreamRules(), defaultKeep(), &batch, &rejected, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_TRUE(batch.records.empty());
}

// The fields WireReader reads from the message `wire`, followed by `after` (the rest of an
// enclosing message, which the parsers may read ahead into) in a heap block of exactly their size,
// so that ASan reports any read past the block; "!" ends the list if the reader refused the rest.
std::vector<std::string> readFields(const std::string& wire, const std::string& after = "") {
  const std::string block = wire + after;
  const auto held = std::make_unique<char[]>(block.size());
  std::memcpy(held.get(), block.data(), block.size());
  WireReader r(WireBytes{held.get(), static_cast<uint32_t>(wire.size()),
                         static_cast<uint32_t>(after.size())});
  std::vector<std::string> fields;
  while (r.next()) {
    fields.push_back(std::to_string(r.number()) + "=" +
                     (r.is(WireReader::kBytes) ? std::string(r.bytesValue())
                      : r.is(WireReader::WireFormatLite::WIRETYPE_START_GROUP)
                          ? "group"
                          : std::to_string(r.numberValue())));
  }
  if (!r.ok()) {
    fields.emplace_back("!");
  }
  return fields;
}

TEST(WireReader, ReadsEveryWireTypeUpToTheMessagesLastByte) {
  using V = std::vector<std::string>;
  // varint 1 = 150; fixed32 2 = 1; fixed64 3 = 2; bytes 4 = "ab"; group 5 holding varint 1 = 1
  // (skipped whole: its content is not read as fields); field 99 (a two-byte tag) = 7; then the
  // largest varint, 10 bytes, ending the message.
  const std::string wire = std::string("\x08\x96\x01", 3) + std::string("\x15\x01\x00\x00\x00", 5) +
                           std::string("\x19\x02\x00\x00\x00\x00\x00\x00\x00", 9) +
                           "\x22\x02"
                           "ab" +
                           std::string("\x2b\x08\x01\x2c", 4) + "\x98\x06\x07" + "\x08" +
                           std::string(9, '\xff') + "\x01";
  const V all = {"1=150", "2=1", "3=2", "4=ab", "5=group", "99=7", "1=18446744073709551615"};
  // The message alone in its buffer, or nested: followed by bytes that would end a varint cut by
  // the message's end (0x01), by bytes that would continue it (0x80), or by fewer than the 10
  // bytes a parser may read ahead. What is read never depends on what follows.
  for (const std::string& after :
       {std::string(), std::string(12, '\x01'), std::string(12, '\x80'), std::string(3, '\x01')}) {
    const std::string where = std::to_string(after.size()) + " bytes after";
    EXPECT_EQ(readFields(wire, after), all) << where;
    EXPECT_EQ(readFields("", after), V{}) << where;
    EXPECT_EQ(readFields(std::string("\x22\x00", 2), after), V{"4="}) << where;
    // Refused: a varint of 11 bytes; one cut by the end; field number 0; a length past the end; a
    // fixed64 and a fixed32 cut short; wire types 6 and 7; an end-group with no start.
    EXPECT_EQ(readFields("\x08" + std::string(10, '\xff') + "\x01", after), V{"!"}) << where;
    EXPECT_EQ(readFields("\x08\x96", after), V{"!"}) << where;
    EXPECT_EQ(readFields(std::string("\x08\x01\x00\x01", 4), after), (V{"1=1", "!"})) << where;
    EXPECT_EQ(readFields("\x22\x03"
                         "ab",
                         after),
              V{"!"})
        << where;
    EXPECT_EQ(readFields(std::string("\x19\x01\x00\x00", 4), after), V{"!"}) << where;
    EXPECT_EQ(readFields(std::string("\x15\x01\x00\x00", 4), after), V{"!"}) << where;
    EXPECT_EQ(readFields("\x0e\x01", after), V{"!"}) << where;
    EXPECT_EQ(readFields("\x0f\x01", after), V{"!"}) << where;
    EXPECT_EQ(readFields("\x0c", after), V{"!"}) << where;
    // A length of 2^32 + 2 is refused, not read as 2 (cut to 32 bits).
    EXPECT_EQ(readFields(std::string("\x22\x82\x80\x80\x80\x10"
                                     "ab",
                                     8),
                         after),
              V{"!"})
        << where;
    // Every strict prefix of the valid message gives the fields wholly inside it, then a refusal
    // unless it ends between two fields.
    const std::vector<size_t> ends = {3, 8, 17, 21, 25, 28};  // where each field but the last ends
    for (size_t n = 1; n < wire.size(); ++n) {
      const auto whole =
          static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), n) - ends.begin());
      V expected(all.begin(), all.begin() + static_cast<ptrdiff_t>(whole));
      if (std::find(ends.begin(), ends.end(), n) == ends.end()) {
        expected.emplace_back("!");
      }
      EXPECT_EQ(readFields(wire.substr(0, n), after), expected) << n << ", " << where;
    }
  }
}

TEST(OtlpJson, JournaldBodyAndRejectedRecords) {
  const std::string doc = R"({"resourceLogs":[{"resource":{"attributes":[
      {"key":"host.name","value":{"stringValue":"gpu-9"}},
      {"key":"service.name","value":{"stringValue":"journald"}}]},
    "scopeLogs":[{"logRecords":[
      {"timeUnixNano":"1700000000000000000","body":{"kvlistValue":{"values":[
        {"key":"MESSAGE","value":{"stringValue":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"}},
        {"key":"PRIORITY","value":{"stringValue":"4"}},
        {"key":"_TRANSPORT","value":{"stringValue":"kernel"}}]}}},
      {"body":{"kvlistValue":{"values":[{"key":"PRIORITY","value":{"stringValue":"3"}}]}}},
      {"body":{"doubleValue":1.5}}]}]}]})";
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  ASSERT_TRUE(
      decodeOtlpJson(doc, doc.size(), StreamRules(), defaultKeep(), &batch, &rejected, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(rejected, 2u);
  EXPECT_EQ(batch.records[0].stream, StreamKind::kKernel);
  EXPECT_EQ(batch.records[0].node, "gpu-9");
  EXPECT_EQ(batch.records[0].time_ns, 1700000000000000000);
  EXPECT_EQ(batch.records[0].line, "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus");
  // Kept: what a stage reads (host.name, _TRANSPORT); not service.name, PRIORITY or MESSAGE.
  EXPECT_EQ(batch.records[0].labels_end - batch.records[0].labels_begin, 2u);
  EXPECT_EQ(batch.label(batch.records[0], "_TRANSPORT"), "kernel");
  EXPECT_FALSE(decodeOtlpJson("[1]", 3, StreamRules(), defaultKeep(), &batch, &rejected, &error));
  EXPECT_TRUE(decodeOtlpJson("{}", 2, StreamRules(), defaultKeep(), &batch, &rejected,
                             &error));  // empty request
}

// decodeOtlpJson over `doc` alone (copied with padding), or in place: followed in its buffer by
// more than kJsonPadding bytes, which would complete a request cut 3 bytes short and must not be
// read as part of it.
bool otlpJson(const std::string& doc, bool in_place, RecordBatch* batch, uint64_t* rejected,
              std::string* error) {
  if (!in_place) {
    return decodeOtlpJson(doc, doc.size(), StreamRules(), defaultKeep(), batch, rejected, error);
  }
  const std::string buffer = doc + "}]}" + std::string(kJsonPadding, ' ');
  return decodeOtlpJson(std::string_view(buffer).substr(0, doc.size()), buffer.size(),
                        StreamRules(), defaultKeep(), batch, rejected, error);
}

TEST(OtlpJson, InvalidUnicodeIsReplacedNotRefused) {
  for (bool in_place : {false, true}) {
    RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    ASSERT_TRUE(otlpJson(R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[)"
                         R"({"body":{"stringValue":"done \ud83d"}},)"
                         "{\"body\":{\"stringValue\":\"Xid \xff\"}}]}]}]}",
                         in_place, &batch, &rejected, &error))
        << error;
    ASSERT_EQ(batch.records.size(), 2u);
    EXPECT_EQ(batch.records[0].line, "done \xef\xbf\xbd");
    EXPECT_EQ(batch.records[1].line, "Xid ?");
  }
}

// A record's own attributes can hold a pod's JSON fields (the collector's filelog json_parser
// parses to attributes): when the resource names the pod (k8sattributes), they name neither its
// node nor its job. A pod claimed jobs, and so "2 jobs within 1d" tainted its node; and named
// another node, over the resource's host.name. Without a pod in the resource (a shipper that
// puts everything in attributes), the record's labels are all there is.
// An intValue is an int64 (common.proto); one that is not (past int64, a fraction, not a number)
// is not a usable value, as a boolValue that is no boolean, where it read as "0" or
// "9223372036854775807": a line or node name the sender never wrote.
TEST(OtlpJson, AnIntValueThatIsNoInt64IsNoValue) {
  const std::string doc = R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[
      {"body":{"intValue":"-42"},"attributes":[{"key":"host","value":{"intValue":7}}]},
      {"body":{"intValue":"99999999999999999999"},"attributes":[{"key":"host","value":{"intValue":7}}]},
      {"body":{"intValue":18446744073709551615},"attributes":[{"key":"host","value":{"intValue":7}}]},
      {"body":{"intValue":"x1"},"attributes":[{"key":"host","value":{"intValue":7}}]},
      {"body":{"intValue":1.5},"attributes":[{"key":"host","value":{"intValue":7}}]},
      {"body":{"stringValue":"a"},"attributes":[{"key":"host","value":{"intValue":"18446744073709551616"}}]}
    ]}]}]})";
  for (bool in_place : {false, true}) {
    RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    ASSERT_TRUE(otlpJson(doc, in_place, &batch, &rejected, &error)) << error;
    EXPECT_EQ(rejected, 4u);  // the four bodies; the server drops the record without a node
    ASSERT_EQ(batch.records.size(), 2u);
    EXPECT_EQ(batch.records[0].line, "-42");
    EXPECT_EQ(batch.records[0].node, "7");
    EXPECT_EQ(batch.records[1].line, "a");
    EXPECT_EQ(batch.records[1].node, "");
  }
}

TEST(OtlpJson, APodsOwnAttributesNameNeitherItsNodeNorItsJob) {
  for (bool in_place : {false, true}) {
    for (bool resource_late : {false, true}) {
      const std::string resource =
          R"("resource":{"attributes":[{"key":"k8s.pod.name","value":{"stringValue":"p-0"}},)"
          R"({"key":"host.name","value":{"stringValue":"gpu-1"}}]})";
      const std::string scopes =
          R"("scopeLogs":[{"logRecords":[{"body":{"stringValue":"watchdog timeout"},)"
          R"("attributes":[{"key":"k8s.node.name","value":{"stringValue":"gpu-victim"}},)"
          R"({"key":"job_name","value":{"stringValue":"run-a"}}]}]}])";
      const std::string doc = R"({"resourceLogs":[{)" +
                              (resource_late ? scopes + "," + resource : resource + "," + scopes) +
                              "}]}";
      RecordBatch batch;
      uint64_t rejected = 0;
      std::string error;
      ASSERT_TRUE(otlpJson(doc, in_place, &batch, &rejected, &error)) << error;
      ASSERT_EQ(batch.records.size(), 1u);
      const LogRecord& r = batch.records[0];
      EXPECT_EQ(r.node, "gpu-1") << resource_late;
      EXPECT_EQ(r.stream, StreamKind::kPod);
      EXPECT_EQ(batch.job(r), "") << resource_late;
      EXPECT_EQ(batch.label(r, "k8s.node.name"), "");
    }
  }
  const std::string flat =
      R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"},"attributes":[)"
      R"({"key":"k8s.pod.name","value":{"stringValue":"p-0"}},)"
      R"({"key":"k8s.node.name","value":{"stringValue":"gpu-2"}},)"
      R"({"key":"job_name","value":{"stringValue":"run-a"}}]}]}]}]})";
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  ASSERT_TRUE(otlpJson(flat, false, &batch, &rejected, &error)) << error;
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].node, "gpu-2");
  EXPECT_EQ(batch.job(batch.records[0]), "run-a");
}

// Record attributes are what the collector's filelog json_parser made of the line (its default
// parse_to): a host process's JSON log saying "_TRANSPORT": "kernel" must not pass for the
// kernel's. A kvlist body's fields (the journald receiver's) may, in either field order, and with
// the resource before or after its records.
TEST(OtlpJson, RecordAttributesMarkNoKernelStream) {
  const std::string resource =
      R"("resource":{"attributes":[{"key":"host.name","value":{"stringValue":"gpu-3"}}]})";
  const std::string forged = R"({"body":{"stringValue":"NVRM: Xid 79"},"attributes":[)"
                             R"({"key":"_TRANSPORT","value":{"stringValue":"kernel"}},)"
                             R"({"key":"SYSLOG_IDENTIFIER","value":{"stringValue":"kernel"}}]})";
  // A kept attribute beside the body's fields, and a record without a line between the two.
  const std::string journald =
      R"({"attributes":[{"key":"job_name","value":{"stringValue":"j"}}],)"
      R"("body":{"kvlistValue":{"values":[{"key":"MESSAGE","value":{"stringValue":"NVRM: Xid 79"}},)"
      R"({"key":"_TRANSPORT","value":{"stringValue":"kernel"}}]}}})";
  const std::string lineless =
      R"({"body":{"kvlistValue":{"values":[{"key":"_TRANSPORT","value":{"stringValue":"kernel"}}]}}})";
  for (bool resource_late : {false, true}) {
    const std::string scopes =
        R"("scopeLogs":[{"logRecords":[)" + forged + "," + lineless + "," + journald + "]}]";
    const std::string doc = R"({"resourceLogs":[{)" +
                            (resource_late ? scopes + "," + resource : resource + "," + scopes) +
                            "}]}";
    RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    ASSERT_TRUE(otlpJson(doc, false, &batch, &rejected, &error)) << error;
    ASSERT_EQ(batch.records.size(), 2u);
    EXPECT_EQ(batch.records[0].stream, StreamKind::kOther) << resource_late;
    EXPECT_EQ(batch.records[0].node, "gpu-3");
    EXPECT_EQ(batch.records[1].stream, StreamKind::kKernel) << resource_late;
    EXPECT_EQ(batch.records[1].node, "gpu-3");
    EXPECT_EQ(batch.label(batch.records[1], "job_name"), "j");
    EXPECT_EQ(batch.label(batch.records[1], "_TRANSPORT"), "kernel");
  }
}

// A `kubernetes` kvlist (Fluent Bit's OTLP output) in a kvlist body marks a pod's record.
TEST(OtlpProto, AKubernetesMapInTheBodyMarksAPod) {
  namespace otlp = opentelemetry::proto;
  otlp::collector::logs::v1::ExportLogsServiceRequest request;
  otlp::logs::v1::LogRecord* r = request.add_resource_logs()->add_scope_logs()->add_log_records();
  auto* fields = r->mutable_body()->mutable_kvlist_value()->mutable_values();
  add(fields, "MESSAGE", "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus");
  add(fields, "_TRANSPORT", "kernel");
  add(fields, "_HOSTNAME", "gpu-4");
  auto* map = fields->Add();
  map->set_key("kubernetes");
  add(map->mutable_value()->mutable_kvlist_value()->mutable_values(), "pod_name", "evil-0");
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  const std::string bytes = request.SerializeAsString();
  ASSERT_TRUE(decodeOtlpProto(bytes, StreamRules(), defaultKeep(), &batch, &rejected, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].stream, StreamKind::kPod);
  EXPECT_EQ(batch.records[0].node, "");  // not the pod's own _HOSTNAME
}

TEST(OtlpProto, RecordAttributesMarkNoKernelStream) {
  namespace otlp = opentelemetry::proto;
  otlp::collector::logs::v1::ExportLogsServiceRequest request;
  otlp::logs::v1::ResourceLogs* rl = request.add_resource_logs();
  add(rl->mutable_resource()->mutable_attributes(), "host.name", "gpu-3");
  otlp::logs::v1::ScopeLogs* scope = rl->add_scope_logs();
  otlp::logs::v1::LogRecord* forged = scope->add_log_records();
  forged->mutable_body()->set_string_value("NVRM: Xid 79");
  add(forged->mutable_attributes(), "_TRANSPORT", "kernel");
  otlp::logs::v1::LogRecord* journald = scope->add_log_records();
  add(journald->mutable_attributes(), "job_name", "j");
  add(journald->mutable_body()->mutable_kvlist_value()->mutable_values(), "MESSAGE",
      "NVRM: Xid 79");
  add(journald->mutable_body()->mutable_kvlist_value()->mutable_values(), "_TRANSPORT", "kernel");
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  const std::string bytes = request.SerializeAsString();
  ASSERT_TRUE(decodeOtlpProto(bytes, StreamRules(), defaultKeep(), &batch, &rejected, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 2u);
  EXPECT_EQ(batch.records[0].stream, StreamKind::kOther);
  EXPECT_EQ(batch.records[0].node, "gpu-3");
  EXPECT_EQ(batch.records[1].stream, StreamKind::kKernel);
  EXPECT_EQ(batch.label(batch.records[1], "job_name"), "j");
  EXPECT_EQ(batch.label(batch.records[1], "_TRANSPORT"), "kernel");
}

// A list given as anything but an array (or null, the proto3 JSON mapping's default) refuses the
// request with a reason: answered 200, its records were left unread.
TEST(OtlpJson, AListThatIsNoArrayRefusesTheRequest) {
  const std::string record = R"({"body":{"stringValue":"x"}})";
  for (const std::string& doc :
       {R"({"resourceLogs":[{"scopeLogs":{"logRecords":[)" + record + "]}}]}",
        R"({"resourceLogs":[{"scopeLogs":[{"logRecords":)" + record + "}]}]}",
        std::string(R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":)"
                    R"("x"},"attributes":{"key":"node","value":{"stringValue":"n"}}}]}]}]})")}) {
    RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    EXPECT_FALSE(otlpJson(doc, false, &batch, &rejected, &error)) << doc;
    EXPECT_EQ(error, "a list (scopeLogs, logRecords, attributes, values) is not an array") << doc;
    EXPECT_TRUE(batch.records.empty());
  }
  RecordBatch batch;
  uint64_t rejected = 0;
  std::string error;
  EXPECT_TRUE(otlpJson(R"({"resourceLogs":[{"scopeLogs":[{"logRecords":null}]}]})", false, &batch,
                       &rejected, &error))
      << error;
}

// The decoder reads in one forward pass (simdjson On Demand): fields in any order must give what
// the usual order gives, and a request refused part-way must leave the batch as it was; both
// from a copy and in place.
TEST(OtlpJson, AnyFieldOrderAndRefusedRequestsLeaveTheBatchAlone) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "copied");
    const std::string usual = R"({"resourceLogs":[{"resource":{"attributes":[
      {"key":"k8s.node.name","value":{"stringValue":"gpu-3"}}]},
    "scopeLogs":[{"logRecords":[{"timeUnixNano":"1700000000000000007","attributes":[
      {"key":"k8s.pod.name","value":{"stringValue":"llama-0"}}],
      "body":{"stringValue":"NCCL WARN Watchdog caught collective operation timeout"}}]}]}]})";
    // The same request written backwards: scopeLogs before resource, value before key, body
    // before attributes, the time last.
    const std::string reordered = R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{
      "body":{"stringValue":"NCCL WARN Watchdog caught collective operation timeout"},
      "attributes":[{"value":{"stringValue":"llama-0"},"key":"k8s.pod.name"}],
      "timeUnixNano":"1700000000000000007"}]}],
    "resource":{"attributes":[{"value":{"stringValue":"gpu-3"},"key":"k8s.node.name"}]}}]})";
    for (const std::string* doc : {&usual, &reordered}) {
      RecordBatch batch;
      uint64_t rejected = 0;
      std::string error;
      ASSERT_TRUE(otlpJson(*doc, in_place, &batch, &rejected, &error)) << error;
      ASSERT_EQ(batch.records.size(), 1u);
      const LogRecord& r = batch.records[0];
      EXPECT_EQ(r.node, "gpu-3");
      EXPECT_EQ(r.stream, StreamKind::kPod);
      EXPECT_EQ(r.time_ns, 1700000000000000007);
      EXPECT_EQ(r.line, "NCCL WARN Watchdog caught collective operation timeout");
      EXPECT_EQ(batch.label(r, "k8s.pod.name"), "llama-0");
      EXPECT_EQ(r.labels_end - r.labels_begin, 2u);
      EXPECT_EQ(rejected, 0u);
    }

    // Refused after the first record was read: truncated, broken inside a record, or followed by
    // more bytes. The batch keeps what it held before, and nothing else.
    RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    ASSERT_TRUE(otlpJson(usual, in_place, &batch, &rejected, &error));
    const size_t labels = batch.labels.size();
    const std::string second_record_broken =
        R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"one"}},)"
        R"({"body":{"stringValue":"two"}, "attributes":[}]}]}]})";
    for (const std::string& bad :
         {usual.substr(0, usual.size() - 3), second_record_broken, usual + " {}"}) {
      error.clear();
      EXPECT_FALSE(otlpJson(bad, in_place, &batch, &rejected, &error)) << bad;
      EXPECT_NE(error.find("not JSON"), std::string::npos) << error;
      EXPECT_EQ(batch.records.size(), 1u) << bad;
      EXPECT_EQ(batch.labels.size(), labels) << bad;
      EXPECT_EQ(rejected, 0u) << bad;
    }
  }
}

// In the proto3 JSON mapping null is a field's default: {"resourceLogs": null} is an empty request
// (200), as the collector's decoder reads it; it was refused "resourceLogs is not an array".
TEST(OtlpJson, NullResourceLogsIsAnEmptyRequest) {
  for (bool in_place : {false, true}) {
    RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    EXPECT_TRUE(otlpJson(R"({"resourceLogs": null})", in_place, &batch, &rejected, &error))
        << error;
    EXPECT_TRUE(batch.records.empty());
    EXPECT_FALSE(otlpJson(R"({"resourceLogs": {}})", in_place, &batch, &rejected, &error));
    EXPECT_EQ(error, "resourceLogs is not an array");
  }
}

// Strings are viewed in the request unless they hold escapes; both kinds, with spaces around the
// separators, must read as JSON says. Times are JSON integers, quoted or not; observedTimeUnixNano
// counts only when timeUnixNano is 0, absent or no integer.
TEST(OtlpJson, EscapedAndPlainStringsAndTheTimes) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "copied");
    const std::string doc = R"({"resourceLogs":[{"resource":{"attributes":[
      {"key" : "k8s.node\u002ename" , "value" : {"stringValue" : "gpu-\u0037" } }]},
    "scopeLogs":[{"logRecords":[
      {"timeUnixNano":"1700000000000000001","observedTimeUnixNano":"1800000000000000000",
       "body":{"kvlistValue":{"values":[
         {"key":"_TRANSPORT","value":{"stringValue":"ker\nnel"}},
         {"key":"MESS\u0041GE" ,"value":{"stringValue":"Xid 79, \"fallen\" \\ off \u00e9"}}]}}},
      {"timeUnixNano":1700000000000000002,"body":{"stringValue" :	"plain"	}},
      {"timeUnixNano":"0","observedTimeUnixNano":"1700000000000000003","body":{"stringValue":"a"}},
      {"timeUnixNano":"17x","observedTimeUnixNano":"1700000000000000004","body":{"stringValue":"b"}},
      {"observedTimeUnixNano":"1700000000000000005","timeUnixNano":"1700000000000000006",
       "body":{"stringValue":"c"}},
      {"timeUnixNano":18446744073709551615,"body":{"stringValue":"d"}}]}]}]})";
    RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    ASSERT_TRUE(otlpJson(doc, in_place, &batch, &rejected, &error)) << error;
    ASSERT_EQ(batch.records.size(), 6u);
    EXPECT_EQ(rejected, 0u);
    const LogRecord& first = batch.records[0];
    EXPECT_EQ(first.node, "gpu-7");
    EXPECT_EQ(first.line, "Xid 79, \"fallen\" \\ off \xc3\xa9");
    EXPECT_EQ(batch.label(first, "_TRANSPORT"), "ker\nnel");
    EXPECT_EQ(first.time_ns, 1700000000000000001);
    EXPECT_EQ(batch.records[1].line, "plain");
    EXPECT_EQ(batch.records[1].time_ns, 1700000000000000002);
    EXPECT_EQ(batch.records[2].time_ns, 1700000000000000003);
    EXPECT_EQ(batch.records[3].time_ns, 1700000000000000004);
    EXPECT_EQ(batch.records[4].time_ns, 1700000000000000006);
    EXPECT_EQ(batch.records[5].time_ns, INT64_MAX);  // past int64: the latest time there is
  }
}

// OTLP JSON writes a fixed64 as a decimal string: one past int64 nanoseconds (year 2262) is the
// latest time there is, as unquoted and as in protobuf (README: "OTLP times past 2262 are taken as
// Loki's are"), not 0 (1970 in replay, the time of arrival live).
TEST(OtlpJson, QuotedTimePastInt64IsTheLatestTime) {
  for (const char* ts : {R"("18446744073709551615")", R"("9300000000000000000")"}) {
    RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    const std::string doc =
        std::string(R"({"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name",)"
                    R"("value":{"stringValue":"gpu-1"}}]},"scopeLogs":[{"logRecords":[)"
                    R"({"timeUnixNano":)") +
        ts + R"(,"body":{"stringValue":"x"}}]}]}]})";
    ASSERT_TRUE(otlpJson(doc, false, &batch, &rejected, &error)) << ts << ": " << error;
    ASSERT_EQ(batch.records.size(), 1u);
    EXPECT_EQ(batch.records[0].time_ns, INT64_MAX) << ts;
  }
}

// bytes_value in the JSON mapping is base64: a request gives the same records from its protobuf
// and from its JSON (the base64 texts as libprotobuf's MessageToJsonString writes these bytes:
// standard, padded). A body of bytes was refused in JSON (the collector's filelog receiver with
// `encoding: nop` sends every line so) while the protobuf decoder took it as text.
TEST(OtlpJson, BytesValueIsBase64AsInTheProtobufMapping) {
  namespace otlp = opentelemetry::proto;
  otlp::collector::logs::v1::ExportLogsServiceRequest req;
  otlp::logs::v1::ResourceLogs* rl = req.add_resource_logs();
  auto* kv = rl->mutable_resource()->add_attributes();
  kv->set_key("k8s.node.name");
  kv->mutable_value()->set_bytes_value("gpu-3");
  otlp::logs::v1::ScopeLogs* sl = rl->add_scope_logs();
  const std::vector<std::string> lines = {
      "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", std::string("mce\xff\x00", 5),
      "a", "ab"};
  for (const std::string& line : lines) {
    sl->add_log_records()->mutable_body()->set_bytes_value(line);
  }
  RecordBatch from_proto;
  uint64_t rejected = 0;
  std::string error;
  const std::string proto = req.SerializeAsString();  // the records view it
  ASSERT_TRUE(decodeOtlpProto(proto, StreamRules(), defaultKeep(), &from_proto, &rejected, &error));
  ASSERT_EQ(from_proto.records.size(), 4u);
  const std::string json =
      R"({"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name",)"
      R"("value":{"bytesValue":"Z3B1LTM="}}]},"scopeLogs":[{"logRecords":[)"
      R"({"body":{"bytesValue":"TlZSTTogWGlkIChQQ0k6MDAwMDozYjowMCk6IDc5LCBHUFUgaGFzIGZhbGxlbiBvZmYgdGhlIGJ1cy4="}},)"
      R"({"body":{"bytesValue":"bWNl/wA="}},{"body":{"bytesValue":"YQ=="}},)"
      R"({"body":{"bytesValue":"YWI="}}]}]}]})";
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "copied");
    RecordBatch batch;
    ASSERT_TRUE(otlpJson(json, in_place, &batch, &rejected, &error)) << error;
    EXPECT_EQ(rejected, 0u);
    ASSERT_EQ(batch.records.size(), 4u);
    for (size_t i = 0; i < batch.records.size(); ++i) {
      EXPECT_EQ(batch.records[i].line, lines[i]) << i;
      EXPECT_EQ(batch.records[i].line, from_proto.records[i].line) << i;
      EXPECT_EQ(batch.records[i].node, "gpu-3") << i;
      EXPECT_EQ(from_proto.records[i].node, "gpu-3") << i;
    }
  }

  // URL-safe or unpadded base64 is base64 too (the mapping accepts both); other text is no line.
  // Non-ASCII text (fuzzed: "done \ud83dN10__c") crashed the process in yaml-cpp's decoder.
  RecordBatch batch;
  ASSERT_TRUE(otlpJson(R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[)"
                       R"({"body":{"bytesValue":"-_8"}},{"body":{"bytesValue":"YWI"}},)"
                       R"({"body":{"bytesValue":"not base64!"}},{"body":{"bytesValue":7}},)"
                       R"({"body":{"bytesValue":"d\u00e9j\u00e0"}},)"
                       R"({"body":{"bytesValue":"done \ud83dN10__c"}}]}]}]})",
                       false, &batch, &rejected, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 2u);
  EXPECT_EQ(batch.records[0].line, "\xfb\xff");
  EXPECT_EQ(batch.records[1].line, "ab");
  EXPECT_EQ(rejected, 4u);
}

// The proto3 JSON mapping has parsers accept a field's proto name as well as its lowerCamelCase
// name, and the OTel collector's OTLP/HTTP receiver reads both (pdata: "timeUnixNano",
// "time_unix_nano"); libprotobuf, Go's protojson and Python's json_format write the proto names
// when asked to. A request so written decoded as an empty one: answered 200 without a rejected
// record, every line lost.
TEST(OtlpJson, ProtoFieldNamesReadAsTheirCamelCaseNames) {
  const std::string camel_case =
      R"({"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name",)"
      R"("value":{"stringValue":"gpu-4"}}]},"scopeLogs":[{"logRecords":[)"
      R"({"timeUnixNano":"1700000000000000001","body":{"stringValue":"NVRM: Xid 79"}},)"
      R"({"observedTimeUnixNano":"1700000000000000002","body":{"kvlistValue":{"values":[)"
      R"({"key":"_TRANSPORT","value":{"stringValue":"kernel"}},{"key":"MESSAGE","value":)"
      R"({"arrayValue":{"values":[{"intValue":"109"},{"intValue":"99"},{"intValue":"101"}]}}}]}}},)"
      R"({"body":{"bytesValue":"RVhUNC1mcyBlcnJvcg=="}},{"body":{"intValue":"7"}},)"
      R"({"body":{"boolValue":true}}]}]}]})";
  std::string proto_names = camel_case;
  for (const auto& [camel, proto] : std::vector<std::pair<std::string, std::string>>{
           {"resourceLogs", "resource_logs"},
           {"scopeLogs", "scope_logs"},
           {"logRecords", "log_records"},
           {"observedTimeUnixNano", "observed_time_unix_nano"},
           {"timeUnixNano", "time_unix_nano"},
           {"stringValue", "string_value"},
           {"kvlistValue", "kvlist_value"},
           {"arrayValue", "array_value"},
           {"intValue", "int_value"},
           {"bytesValue", "bytes_value"},
           {"boolValue", "bool_value"}}) {
    for (size_t at = proto_names.find('"' + camel + '"'); at != std::string::npos;
         at = proto_names.find('"' + camel + '"', at)) {
      proto_names.replace(at + 1, camel.size(), proto);
    }
  }
  ASSERT_EQ(proto_names.find("Value"), std::string::npos) << proto_names;
  RecordBatch camel;
  uint64_t rejected = 0;
  std::string error;
  ASSERT_TRUE(otlpJson(camel_case, false, &camel, &rejected, &error)) << error;
  ASSERT_EQ(camel.records.size(), 5u);
  EXPECT_EQ(camel.records[0].time_ns, 1700000000000000001);
  EXPECT_EQ(camel.records[1].time_ns, 1700000000000000002);
  EXPECT_EQ(camel.records[1].line, "mce");
  EXPECT_EQ(camel.records[1].stream, StreamKind::kKernel);
  EXPECT_EQ(camel.records[2].line, "EXT4-fs error");
  EXPECT_EQ(camel.records[3].line, "7");
  EXPECT_EQ(camel.records[4].line, "true");
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "copied");
    RecordBatch batch;
    rejected = 0;
    ASSERT_TRUE(otlpJson(proto_names, in_place, &batch, &rejected, &error)) << error;
    EXPECT_EQ(rejected, 0u);
    ASSERT_EQ(batch.records.size(), camel.records.size()) << proto_names;
    for (size_t i = 0; i < batch.records.size(); ++i) {
      EXPECT_EQ(batch.records[i].line, camel.records[i].line) << i;
      EXPECT_EQ(batch.records[i].time_ns, camel.records[i].time_ns) << i;
      EXPECT_EQ(batch.records[i].node, "gpu-4") << i;
      EXPECT_EQ(batch.records[i].stream, camel.records[i].stream) << i;
      EXPECT_EQ(labelsOf(batch, batch.records[i]), labelsOf(camel, camel.records[i])) << i;
    }
  }
}

TEST(OtlpResponse, PartialSuccessOnlyWhenRejected) {
  EXPECT_EQ(otlpProtoResponse(0, "x"), "");
  EXPECT_EQ(otlpJsonResponse(0, "x"), "{}");
  EXPECT_EQ(otlpJsonResponse(2, "why"),
            R"({"partialSuccess":{"errorMessage":"why","rejectedLogRecords":"2"}})");
  EXPECT_FALSE(otlpProtoResponse(2, "why").empty());
}

TEST(KafkaOtlpDecoder, ProtoAndJsonWithKeyFallbackAndTopicStream) {
  KafkaTopicConfig config;
  config.name = "otlp_logs";
  config.encoding = KafkaEncoding::kOtlpProto;
  const KafkaDecoder proto(config);
  RecordBatch batch;
  const std::string value = base64(kOtelJsProto);
  KafkaMessage msg;
  msg.value = value;
  msg.timestamp_ms = 1700000000000;
  ASSERT_TRUE(proto.decode(msg, 0, &batch));
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].node, "node-3");
  // The records point into the message: the batch holds its owner (the source's rdkafka
  // message) until cleared.
  auto owner = std::make_shared<std::string>(value);
  msg.value = *owner;
  msg.owner = owner;
  ASSERT_TRUE(proto.decode(msg, 0, &batch));
  msg.owner.reset();
  EXPECT_EQ(owner.use_count(), 2);
  EXPECT_EQ(batch.records[1].line.data(), owner->data() + value.find("mce: "));
  KafkaMessage bad;
  bad.value = "\x0a\x05";
  EXPECT_FALSE(proto.decode(bad, 0, &batch));

  config.encoding = KafkaEncoding::kOtlpJson;
  config.stream = StreamKind::kKernel;
  const KafkaDecoder json(config);
  const std::string doc =
      R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"EXT4-fs error"}}]}]}]})";
  KafkaMessage jm;
  jm.value = doc;
  jm.key = "gpu-4";
  jm.timestamp_ms = 1700000000000;
  RecordBatch jb;
  ASSERT_TRUE(json.decode(jm, 0, &jb));
  ASSERT_EQ(jb.records.size(), 1u);
  EXPECT_EQ(jb.records[0].node, "gpu-4");                 // no attribute: the message key
  EXPECT_EQ(jb.records[0].stream, StreamKind::kKernel);   // no marker: the topic's stream
  EXPECT_EQ(jb.records[0].time_ns, 1700000000000000000);  // no record time: the message's
}

TEST(LokiJson, TimestampBeyondInt64NanosecondsIsTheNearestTime) {
  for (const char* ts : {R"("99999999999999999999")", "18446744073709551615"}) {
    RecordBatch batch;
    std::string error;
    const std::string body =
        std::string(R"({"streams":[{"stream":{"a":"b"},"values":[[)") + ts + R"(,"x"]]}]})";
    ASSERT_TRUE(lokiJson(body, "", &batch, &error)) << ts << ": " << error;
    ASSERT_EQ(batch.records.size(), 1u);
    EXPECT_EQ(batch.records[0].time_ns, INT64_MAX) << ts;
  }
  RecordBatch batch;
  std::string error;
  ASSERT_TRUE(
      lokiJson(R"({"streams":[{"stream":{"a":"b"},"values":[["-62135596800000000000","x"]]}]})", "",
               &batch, &error))
      << error;
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].time_ns, INT64_MIN);
}

}  // namespace
}  // namespace faultline
