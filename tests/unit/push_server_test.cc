// The HTTP push server in process, on 127.0.0.1: status codes, backpressure (429 with
// Retry-After while the queue is full, nothing lost), limits and bearer-token auth.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "core/batch_queue.h"
#include "core/metrics.h"
#include "ingest/push/push_source.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"

namespace faultline {
namespace {

constexpr char kLokiJson[] =
    R"({"streams":[{"stream":{"transport":"kernel","node":"gpu-1"},"values":[["1700000000000000000","NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"]]}]})";

struct Fixture {
  explicit Fixture(size_t queue_bytes, PushConfig config = {}) : queue(queue_bytes) {
    config.host = "127.0.0.1";
    config.port = 0;
    server = std::make_unique<PushServer>(config, &queue, &metrics, [] { return true; });
    server->start();
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
  }
  httplib::Result lokiJson(const std::string& body = kLokiJson, httplib::Headers headers = {}) {
    return client->Post("/loki/api/v1/push", headers, body, "application/json");
  }
  BatchQueue queue;
  Metrics metrics;
  std::unique_ptr<PushServer> server;
  std::unique_ptr<httplib::Client> client;
};

TEST(PushServer, AcceptsLokiJsonAndQueuesTheBatch) {
  Fixture f(1 << 20);
  auto res = f.lokiJson();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 204);
  auto item = f.queue.pop();
  ASSERT_TRUE(item);
  ASSERT_EQ(item->batch.records.size(), 1u);
  EXPECT_EQ(item->batch.records[0].node, "gpu-1");
  EXPECT_EQ(item->batch.records[0].stream, StreamKind::kKernel);
  f.queue.done(*item);
  EXPECT_EQ(f.queue.depth().first, 0u);
  auto health = f.client->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto metrics = f.client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find(R"(faultline_records_total{source="http",format="loki_json"} 1)"),
            std::string::npos)
      << metrics->body;
  const std::string bytes = R"(faultline_bytes_total{source="http",format="loki_json"} )" +
                            std::to_string(sizeof(kLokiJson) - 1) + "\n";
  EXPECT_NE(metrics->body.find(bytes), std::string::npos) << metrics->body;
}

TEST(PushServer, FullQueueAnswers429WithRetryAfterAndLosesNothing) {
  Fixture f(1);  // one byte: the first batch fills it
  ASSERT_EQ(f.lokiJson()->status, 204);
  auto full = f.lokiJson();
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429);
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  auto otlp = f.client->Post("/v1/logs", "{}", "application/json");
  ASSERT_TRUE(otlp);
  EXPECT_EQ(otlp->status, 429);
  // The pipeline catches up: the queued batch is intact and the retry is accepted.
  auto item = f.queue.pop();
  ASSERT_TRUE(item);
  EXPECT_EQ(item->batch.records.size(), 1u);
  f.queue.done(*item);
  EXPECT_EQ(f.lokiJson()->status, 204);
  EXPECT_NE(
      f.metrics.render().find(R"(faultline_push_requests_rejected_total{reason="queue_full"} 2)"),
      std::string::npos);
}

TEST(PushServer, BadInputGetsAReasonAndTheServerKeepsServing) {
  PushConfig config;
  config.max_body_bytes = 1000;
  config.max_line_bytes = 10;
  Fixture f(1 << 20, config);
  auto bad = f.lokiJson("{\"streams\":[{");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  // The parser's own reason (simdjson's message for an unclosed object).
  EXPECT_EQ(bad->body.rfind("body is not a JSON object (The JSON document has an improper "
                            "structure",
                            0),
            0u)
      << bad->body;
  auto snappy = f.client->Post("/loki/api/v1/push", "garbage", "application/x-protobuf");
  ASSERT_TRUE(snappy);
  EXPECT_EQ(snappy->status, 400);
  auto big = f.lokiJson(std::string(2000, ' ') + kLokiJson);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  auto encoding = f.lokiJson(kLokiJson, {{"Content-Encoding", "br"}});
  ASSERT_TRUE(encoding);
  EXPECT_EQ(encoding->status, 415);
  auto otlp = f.client->Post("/v1/logs", "{\"resourceLogs\":7}", "application/json");
  ASSERT_TRUE(otlp);
  EXPECT_EQ(otlp->status, 400);
  EXPECT_NE(otlp->body.find("resourceLogs is not an array"), std::string::npos) << otlp->body;
  // Still serving; the long line is truncated to max_line_bytes and counted.
  ASSERT_EQ(f.lokiJson()->status, 204);
  auto item = f.queue.pop();
  ASSERT_TRUE(item);
  EXPECT_EQ(item->batch.records[0].line, "NVRM: Xid ");
  f.queue.done(*item);
  EXPECT_NE(f.metrics.render().find(R"(faultline_lines_truncated_total{source="http"} 1)"),
            std::string::npos);
}

TEST(PushServer, OtlpJsonPartialSuccess) {
  Fixture f(1 << 20);
  auto res = f.client->Post(
      "/v1/logs",
      R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a"}},{"body":{}}]}]}]})",
      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  EXPECT_NE(res->body.find(R"("rejectedLogRecords":"1")"), std::string::npos) << res->body;
}

// An OTLP protobuf body is read into one buffer reserved from Content-Length, which the batch
// holds (its records point into it), and the queue counts the batch by that buffer: not by the
// capacity of a body grown from cpp-httplib's 4 KB pieces by doubling (1 MiB for this 0.53 MiB).
TEST(PushServer, QueueCountsAHeldOtlpBodyAtItsSize) {
  opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest req;
  auto* records = req.add_resource_logs()->add_scope_logs();
  const std::string line =
      "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus " + std::string(420, '.');
  for (int i = 0; i < 1100; ++i) {
    records->add_log_records()->mutable_body()->set_string_value(line);
  }
  const std::string body = req.SerializeAsString();
  ASSERT_GT(body.size(), size_t{512} << 10);
  ASSERT_LT(body.size(), size_t{544} << 10);
  Fixture f(64 << 20);
  auto res = f.client->Post("/v1/logs", body, "application/x-protobuf");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  auto item = f.queue.pop();
  ASSERT_TRUE(item);
  const RecordBatch& batch = item->batch;
  ASSERT_EQ(batch.records.size(), 1100u);
  EXPECT_EQ(batch.records[0].line, line);
  // The body, the record and label arrays, and at most one 64 KB arena chunk.
  const size_t arrays =
      batch.records.capacity() * sizeof(LogRecord) + batch.labels.capacity() * sizeof(Label);
  EXPECT_GE(item->bytes, body.size() + arrays);
  EXPECT_LE(item->bytes, body.size() + arrays + (size_t{64} << 10));
  f.queue.done(*item);
}

TEST(PushServer, BearerTokenFromAFileReReadOnChange) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fl-push-token-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "token";
  std::ofstream(file) << "s3cret\n";
  PushConfig config;
  config.token_file = file.string();
  Fixture f(1 << 20, config);
  EXPECT_EQ(f.lokiJson()->status, 401);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer s3cret"}})->status, 204);
  // Rotated: a new file with a different modification time.
  std::filesystem::last_write_time(
      file, std::filesystem::last_write_time(file) + std::chrono::seconds(5));
  std::ofstream(file) << "rotated";
  std::filesystem::last_write_time(
      file, std::filesystem::file_time_type::clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer s3cret"}})->status, 401);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer rotated"}})->status, 204);
  // Health and metrics need no token.
  EXPECT_EQ(f.client->Get("/healthz")->status, 200);
  std::filesystem::remove_all(dir);
}

TEST(BatchQueue, FullRefusesTryPushAndPushWaitsUntilProcessed) {
  BatchQueue queue(10);
  BatchQueue::Item a;
  a.bytes = 8;
  ASSERT_TRUE(queue.tryPush(a));
  BatchQueue::Item c;
  c.bytes = 3;
  EXPECT_FALSE(queue.tryPush(c));  // 8 + 3 > 10
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    BatchQueue::Item b;
    b.bytes = 8;
    EXPECT_TRUE(queue.push(b, std::stop_token()));
    pushed = true;
  });
  auto first = queue.pop();  // taken off the queue, but its bytes count until done()
  ASSERT_TRUE(first);
  EXPECT_EQ(queue.depth().first, 8u);
  EXPECT_FALSE(pushed);
  queue.done(*first);
  producer.join();
  EXPECT_TRUE(pushed);
  queue.close();
  auto second = queue.pop();
  ASSERT_TRUE(second);  // drained after close
  EXPECT_EQ(second->bytes, 8u);
  queue.done(*second);
  EXPECT_FALSE(queue.pop());
}

TEST(BatchQueue, OversizedBatchIsAdmittedAlone) {
  BatchQueue queue(10);
  BatchQueue::Item big;
  big.bytes = 100;
  EXPECT_TRUE(queue.tryPush(big));
  BatchQueue::Item small;
  small.bytes = 1;
  EXPECT_FALSE(queue.tryPush(small));
}

}  // namespace
}  // namespace faultline
