// The HTTP push server in process, on 127.0.0.1: status codes, backpressure (429 with
// Retry-After while the queue is full, nothing lost), limits and bearer-token auth.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <snappy.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "core/batch_queue.h"
#include "core/metrics.h"
#include "ingest/push/push_source.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"
#include "tests/tools/zlib_compress.h"

namespace faultline {
namespace {

constexpr char kLokiJson[] =
    R"({"streams":[{"stream":{"transport":"kernel","node":"gpu-1"},"values":[["1700000000000000000","NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"]]}]})";

struct Fixture {
  explicit Fixture(
      size_t queue_bytes, PushConfig config = {}, std::function<bool()> ready = [] { return true; })
      : queue(queue_bytes) {
    config.host = "127.0.0.1";
    config.port = 0;
    server = std::make_unique<PushServer>(config, &queue, &metrics, std::move(ready));
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

// An OTLP protobuf ExportLogsServiceRequest: one resource naming node gpu-1, `count` records
// whose body is `line`.
std::string otlpBody(const std::string& line, int count) {
  opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest req;
  auto* resource = req.add_resource_logs();
  auto* node = resource->mutable_resource()->add_attributes();
  node->set_key("k8s.node.name");
  node->mutable_value()->set_string_value("gpu-1");
  auto* records = resource->add_scope_logs();
  for (int i = 0; i < count; ++i) {
    records->add_log_records()->mutable_body()->set_string_value(line);
  }
  return req.SerializeAsString();
}

// Liveness: /healthz turns 503, with the reason, once the pipeline has held a batch for
// stall_after without finishing one (nothing pops this queue: a wedged pipeline), on listen and on
// probe_listen alike, and 200 again once the batch is done.
TEST(PushServer, HealthzFailsWhileThePipelineHoldsABatchAndFinishesNone) {
  PushConfig config;
  config.probe_host = "127.0.0.1";
  config.probe_port = 0;
  config.stall_after = std::chrono::milliseconds(300);
  Fixture f(1 << 20, config);
  httplib::Client probe("127.0.0.1", f.server->probePort());
  const auto healthz = [&](httplib::Client& c) {
    auto res = c.Get("/healthz");
    return res ? std::to_string(res->status) + " " + res->body : std::string("no answer");
  };
  EXPECT_EQ(healthz(*f.client), "200 ok\n");  // nothing held: idle is healthy
  const auto pushed = BatchQueue::Clock::now();
  auto res = f.lokiJson();
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 204);
  const std::string early = healthz(*f.client);
  if (BatchQueue::Clock::now() - pushed < config.stall_after) {  // else the machine stalled us
    EXPECT_EQ(early, "200 ok\n");
  }
  std::this_thread::sleep_for(config.stall_after + std::chrono::milliseconds(100));
  for (httplib::Client* c : {f.client.get(), &probe}) {
    const std::string answer = healthz(*c);
    EXPECT_EQ(answer.substr(0, 39), "503 pipeline stalled: batches held for ") << answer;
    EXPECT_NE(answer.find("with none processed (the bound is 0 s)"), std::string::npos) << answer;
  }
  std::optional<BatchQueue::Item> item = f.queue.pop();
  ASSERT_TRUE(item);
  f.queue.done(*item);
  EXPECT_EQ(healthz(*f.client), "200 ok\n");
  EXPECT_EQ(healthz(probe), "200 ok\n");
}

// A restart on new rules binds its listen and probe_listen addresses after this process freed
// its own: checkListen tries only the others (a taken one is refused, as the restart would fail).
TEST(PushServer, CheckListenTriesOnlyThePortsTheRestartDoesNotFree) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int taken = ntohs(addr.sin_port);
  PushConfig running;
  running.host = "127.0.0.1";
  running.port = 0;
  running.probe_host = "127.0.0.1";
  running.probe_port = taken;  // this process's probe port, say
  PushConfig next = running;
  next.port = taken;  // listen moves to the probe's port, freed by the restart
  next.probe_port = -1;
  EXPECT_NO_THROW(checkListen(next, &running));
  EXPECT_THROW(checkListen(next, nullptr), std::runtime_error);  // another process's port
  ::close(fd);
}

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

// A replica that does not lead while another one does refuses pushes, so that the shipper's
// retry reaches the leader: 503, Retry-After, the connection closed (a kept-alive one would bring
// the retry back here), counted. Without a leader elsewhere it takes them again.
TEST(PushServer, PushesWhileAnotherReplicaLeadsAre503AndTheConnectionClosed) {
  BatchQueue queue(1 << 20);
  Metrics metrics;
  std::atomic<bool> elsewhere{true};
  PushConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  PushServer server(
      config, &queue, &metrics, [] { return true; },
      [&] { return elsewhere ? std::string("replica-a") : std::string(); });
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  auto loki = client.Post("/loki/api/v1/push", kLokiJson, "application/json");
  ASSERT_TRUE(loki);
  EXPECT_EQ(loki->status, 503);
  EXPECT_EQ(loki->get_header_value("Retry-After"), "1");
  EXPECT_EQ(loki->get_header_value("Connection"), "close");
  EXPECT_EQ(loki->body, "not the leader (replica-a is); retry later\n");
  auto otlp = client.Post("/v1/logs", otlpBody("hello", 1), "application/x-protobuf");
  ASSERT_TRUE(otlp);
  EXPECT_EQ(otlp->status, 503);
  EXPECT_EQ(otlp->get_header_value("Retry-After"), "1");
  EXPECT_EQ(otlp->body.substr(0, 2), std::string("\x08\x0e"));  // google.rpc.Status code 14
  auto otlp_json = client.Post("/v1/logs", "{}", "application/json");
  ASSERT_TRUE(otlp_json);
  EXPECT_EQ(otlp_json->status, 503);
  EXPECT_NE(otlp_json->body.find(R"("code":14)"), std::string::npos) << otlp_json->body;
  EXPECT_EQ(queue.depth().second, 0u);
  EXPECT_NE(
      metrics.render().find(R"(faultline_push_requests_rejected_total{reason="not_leader"} 3)"),
      std::string::npos);
  elsewhere = false;
  auto taken = client.Post("/loki/api/v1/push", kLokiJson, "application/json");
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->status, 204);
  EXPECT_EQ(queue.depth().second, 1u);
  server.stop();
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

// A stream or record that names no node is dropped and counted, not decided for a node "".
TEST(PushServer, RecordsWithoutANodeAreDroppedAndCounted) {
  Fixture f(1 << 20);
  const std::string two_streams =
      R"({"streams":[{"stream":{"transport":"kernel"},"values":[["1700000000000000000","NVRM: Xid (PCI:0000:44:00): 79, x"]]},)"
      R"({"stream":{"transport":"kernel","node":"gpu-1"},"values":[["1700000000000000000","ok"]]}]})";
  ASSERT_EQ(f.lokiJson(two_streams)->status, 204);
  auto item = f.queue.pop();
  ASSERT_TRUE(item);
  ASSERT_EQ(item->batch.records.size(), 1U);
  EXPECT_EQ(item->batch.records[0].node, "gpu-1");
  f.queue.done(*item);
  auto otlp = f.client->Post(
      "/v1/logs",
      R"({"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a"}}]}]}]})",
      "application/json");
  ASSERT_TRUE(otlp);
  EXPECT_EQ(otlp->status, 200);
  EXPECT_NE(otlp->body.find(R"("rejectedLogRecords":"1")"), std::string::npos) << otlp->body;
  const std::string metrics = f.metrics.render();
  EXPECT_NE(metrics.find(R"(faultline_records_rejected_total{source="http",format="loki_json"} 1)"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(faultline_records_rejected_total{source="http",format="otlp_json"} 1)"),
            std::string::npos)
      << metrics;
}

// `snappy` on OTLP is the collector's `compression: snappy`: the body is decompressed. On Loki
// it is a no-op (loki#3407).
TEST(PushServer, OtlpSnappyIsDecompressedLokiSnappyIsANoOp) {
  Fixture f(1 << 20);
  std::string packed;
  const std::string body =
      otlpBody("NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus", 1);
  snappy::Compress(body.data(), body.size(), &packed);
  auto otlp = f.client->Post("/v1/logs", {{"Content-Encoding", "snappy"}}, packed,
                             "application/x-protobuf");
  ASSERT_TRUE(otlp);
  EXPECT_EQ(otlp->status, 200);
  auto item = f.queue.pop();
  ASSERT_TRUE(item);
  ASSERT_EQ(item->batch.records.size(), 1U);
  EXPECT_EQ(item->batch.records[0].node, "gpu-1");
  EXPECT_EQ(item->batch.records[0].line,
            "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus");
  f.queue.done(*item);
  otlp =
      f.client->Post("/v1/logs", {{"Content-Encoding", "snappy"}}, "x", "application/x-protobuf");
  ASSERT_TRUE(otlp);
  EXPECT_EQ(otlp->status, 400);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Content-Encoding", "snappy"}})->status, 204);
}

TEST(PushServer, OtlpJsonPartialSuccess) {
  Fixture f(1 << 20);
  auto res = f.client->Post(
      "/v1/logs",
      R"({"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name","value":{"stringValue":"gpu-1"}}]},"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a"}},{"body":{}}]}]}]})",
      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  EXPECT_NE(res->body.find(R"("rejectedLogRecords":"1")"), std::string::npos) << res->body;
}

// An OTLP protobuf body is read into one buffer reserved from Content-Length, which the batch
// holds (its records point into it), and the queue counts the batch by that buffer: not by the
// capacity of a body grown piece by piece by doubling (1 MiB for this 0.53 MiB).
TEST(PushServer, QueueCountsAHeldOtlpBodyAtItsSize) {
  const std::string line =
      "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus " + std::string(420, '.');
  const std::string body = otlpBody(line, 1100);
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
  // Of the token's length, wrong in the first byte or the last.
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer x3cret"}})->status, 401);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer s3cres"}})->status, 401);
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

// A rotation loses no push: the file holds the new token beside the old while the shippers move
// (their exporters drop a batch answered 401: protocols.md 1.4), then the new one alone. Each
// version is read whatever its modification time: here every one is stamped at 0, as
// reproducible image builds stamp files, which the first read once took for "read already".
TEST(PushServer, EveryTokenOfTheFileIsTakenWhateverItsModificationTime) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fl-push-tokens-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "token";
  const auto write = [&](const std::string& text) {
    std::ofstream(file) << text;
    std::filesystem::last_write_time(file, std::filesystem::file_time_type::clock::from_sys(
                                               std::chrono::system_clock::time_point{}));
  };
  write("old\n");
  PushConfig config;
  config.token_file = file.string();
  Fixture f(1 << 20, config);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer old"}})->status, 204);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer new"}})->status, 401);
  write("old\nnew\n");
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer old"}})->status, 204);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer new"}})->status, 204);
  write("new\n");
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer old"}})->status, 401);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer new"}})->status, 204);
  // A directory in its place reads as no file (refused, not cached), then a file again.
  std::filesystem::remove(file);
  std::filesystem::create_directory(file);
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer new"}})->status, 401);
  std::filesystem::remove(file);
  write("new\n");
  EXPECT_EQ(f.lokiJson(kLokiJson, {{"Authorization", "Bearer new"}})->status, 204);
  std::filesystem::remove_all(dir);
}

// A raw connection to 127.0.0.1:port, for what cpp-httplib's client does not send.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    const timeval timeout{10, 0};  // so that a server that never answers fails the test
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& data) const {
    ASSERT_EQ(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(data.size()));
  }
  // Reads until `end` has been received (returns what came, `end` included), or until the peer
  // closes when `end` is empty.
  std::string receive(const std::string& end = "") {
    std::string got;
    char buf[4096];
    while (end.empty() || got.find(end) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_by_peer_ = n == 0;
        break;
      }
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  // Whether the last receive() ended because the server closed the connection.
  bool closedByPeer() const { return closed_by_peer_; }
  // Sends `data` a byte at a time, one every `every`, until all is sent or the server has closed
  // the connection; returns the bytes sent.
  size_t trickle(const std::string& data, std::chrono::milliseconds every) const {
    size_t sent = 0;
    while (sent < data.size() && ::send(fd_, data.data() + sent, 1, MSG_NOSIGNAL) == 1) {
      ++sent;
      std::this_thread::sleep_for(every);
    }
    return sent;
  }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_by_peer_ = false;
};

// A push without the token is answered from its header: its body is never read, so nobody who
// can reach the port makes the server hold threads × max_body_bytes.
TEST(PushServer, AnUnauthorizedPushIsAnsweredBeforeItsBody) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fl-push-early-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "s3cret\n";
  PushConfig config;
  config.token_file = (dir / "token").string();
  config.read_timeout = std::chrono::seconds(60);  // a server waiting for the body would not answer
  Fixture f(1 << 20, config);
  RawConnection c(f.server->port());
  ASSERT_TRUE(c.connected());
  c.send(
      "POST /loki/api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 50000000\r\n\r\n");
  EXPECT_EQ(c.receive("\r\n\r\n").rfind("HTTP/1.1 401", 0), 0U);
  std::filesystem::remove_all(dir);
}

TEST(PushServer, CompressedBodiesInEveryFormHttpAllows) {
  Fixture f(1 << 20);
  // gzip, and deflate in zlib format (RFC 9110 8.4.1.2), in gzip format (cpp-httplib's and
  // some clients' reading of it) and raw (RFC 1951: Loki's reading of it, Go's compress/flate);
  // zlib as the OTel collector's `compression: zlib` sends it.
  for (const auto& [encoding, window_bits] :
       std::vector<std::pair<std::string, int>>{{"gzip", 31},
                                                {"x-gzip", 31},
                                                {"deflate", 15},
                                                {"deflate", 31},
                                                {"deflate", -15},
                                                {"zlib", 15}}) {
    auto res = f.lokiJson(zlibCompress(kLokiJson, window_bits), {{"Content-Encoding", encoding}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 204) << encoding << " " << window_bits << ": " << res->body;
    auto item = f.queue.tryPop();  // a refused body queues nothing: fail, not hang
    ASSERT_TRUE(item) << encoding << " " << window_bits;
    ASSERT_EQ(item->batch.records.size(), 1u);
    EXPECT_EQ(item->batch.records[0].node, "gpu-1");
    f.queue.done(*item);
  }
  auto corrupt = f.lokiJson("not deflate", {{"Content-Encoding", "deflate"}});
  ASSERT_TRUE(corrupt);
  EXPECT_EQ(corrupt->status, 400);
  EXPECT_EQ(corrupt->body, "corrupt deflate data\n");
}

TEST(PushServer, HttpDetailsClientsRelyOn) {
  Fixture f(1 << 20);
  const std::string body = kLokiJson;
  const std::string head =
      "POST /loki/api/v1/push HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n";
  {  // curl sends `Expect: 100-continue` with large bodies and waits for the 100 before sending.
    RawConnection c(f.server->port());
    ASSERT_TRUE(c.connected());
    c.send(head + "Expect: 100-continue\r\n\r\n");
    EXPECT_EQ(c.receive("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
    c.send(body);
    const std::string answer = c.receive("\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 204 No Content\r\n", 0), 0u) << answer;
    // RFC 9110 8.6: a server must not send Content-Length in a 204.
    EXPECT_EQ(answer.find("Content-Length"), std::string::npos) << answer;
  }
  {  // Two requests sent at once on one connection (pipelined) are answered in order.
    RawConnection c(f.server->port());
    c.send(head + "\r\n" + body + "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string answers = c.receive();
    EXPECT_EQ(answers.rfind("HTTP/1.1 204 No Content\r\n", 0), 0u) << answers;
    EXPECT_NE(answers.find("HTTP/1.1 200 OK\r\n"), std::string::npos) << answers;
    EXPECT_EQ(answers.substr(answers.size() - 3), "ok\n") << answers;
  }
  for (int i = 0; i < 2; ++i) {  // both pushes were queued (tryPop: a test must not hang)
    auto item = f.queue.tryPop();
    ASSERT_TRUE(item) << i;
    f.queue.done(*item);
  }
  {  // A malformed request gets a 400 with a reason and is counted; the connection is closed.
    RawConnection c(f.server->port());
    c.send("NOT AN HTTP REQUEST\r\n\r\n");
    const std::string answer = c.receive();
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << answer;
    EXPECT_NE(answer.find("malformed request: "), std::string::npos) << answer;
    EXPECT_NE(
        f.metrics.render().find(R"(faultline_push_requests_rejected_total{reason="malformed"} 1)"),
        std::string::npos);
  }
  auto unknown = f.client->Get("/nowhere");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  auto get_push = f.client->Get("/v1/logs");
  ASSERT_TRUE(get_push);
  EXPECT_EQ(get_push->status, 405);
  EXPECT_EQ(get_push->get_header_value("Allow"), "POST");
  auto post_health = f.client->Post("/healthz", "", "text/plain");
  ASSERT_TRUE(post_health);
  EXPECT_EQ(post_health->status, 405);
  EXPECT_EQ(post_health->get_header_value("Allow"), "GET");
  const std::string metrics = f.metrics.render();
  EXPECT_NE(metrics.find(R"(faultline_push_requests_rejected_total{reason="not_found"} 1)"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(faultline_push_requests_rejected_total{reason="method"} 2)"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(f.lokiJson()->status, 204);  // still serving
}

// Every node's agent keeps a connection open: more idle keep-alive connections than server
// threads (4 here) must not keep anyone else waiting.
TEST(PushServer, IdleKeepAliveConnectionsHoldNoThread) {
  Fixture f(1 << 20);
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(std::make_unique<RawConnection>(f.server->port()));
    ASSERT_TRUE(idle.back()->connected());
    idle.back()->send(request);
    EXPECT_NE(idle.back()->receive("ok\n").find("HTTP/1.1 200 OK"), std::string::npos);
  }
  // A new client is answered while the 20 stay open; the timeout only keeps a failure from
  // hanging the test (the answer takes milliseconds).
  httplib::Client client("127.0.0.1", f.server->port());
  client.set_read_timeout(10, 0);
  auto res = client.Post("/loki/api/v1/push", kLokiJson, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 204);
  // And so is each idle connection, again.
  for (auto& c : idle) {
    c->send(request);
    EXPECT_NE(c->receive("ok\n").find("HTTP/1.1 200 OK"), std::string::npos);
  }
  // Stopping closes them: each reads the end of the stream, not the receive timeout.
  f.server->stop();
  for (auto& c : idle) {
    EXPECT_EQ(c->receive(), "");
    EXPECT_TRUE(c->closedByPeer());
  }
}

// A client that asks to close (Connection: close, or HTTP/1.0) and whose request was read whole
// sends nothing more: the server closes at once. It read on until that client closed too, for up
// to 1 s of silence, holding its thread: a client closing late held the only one here 1 s.
TEST(PushServer, AClientAskingToCloseHoldsNoThreadAfterItsAnswer) {
  using std::chrono::steady_clock;
  using namespace std::chrono_literals;
  PushConfig config;
  config.threads = 1;
  Fixture f(1 << 20, config);
  httplib::Client client("127.0.0.1", f.server->port());
  client.set_read_timeout(10, 0);
  const std::string body = kLokiJson;
  for (const std::string& request :
       {std::string("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        std::string("GET /healthz HTTP/1.0\r\n\r\n"),
        "POST /loki/api/v1/push HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body}) {
    RawConnection c(f.server->port());  // open until the end of the iteration
    ASSERT_TRUE(c.connected());
    c.send(request);
    const std::string answer = c.receive();
    EXPECT_TRUE(c.closedByPeer()) << request;
    EXPECT_EQ(answer.rfind("HTTP/1.", 0), 0u) << answer;
    const auto start = steady_clock::now();
    auto res = client.Get("/healthz");
    const auto waited = steady_clock::now() - start;
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    // A thread the closed connection held would answer only after read_timeout (10 s); half of
    // it leaves a loaded machine room (500 ms did not always, with three tests per core).
    EXPECT_LT(waited, config.read_timeout / 2) << request;
  }
  auto item = f.queue.tryPop();
  ASSERT_TRUE(item);
  f.queue.done(*item);
}

// A client sending a byte every 250 ms, each within the pause bound, is dropped once its header
// or its body as a whole is late, so that a few such clients cannot hold every server thread.
TEST(PushServer, TricklingRequestIsDroppedAtItsDeadline) {
  using std::chrono::steady_clock;
  using namespace std::chrono_literals;
  PushConfig config;
  config.threads = 1;
  config.read_timeout = 1s;
  Fixture f(1 << 20, config);
  httplib::Client client("127.0.0.1", f.server->port());
  client.set_read_timeout(30, 0);  // to measure the wait before the fix (the trickles' 9-10 s)
  const std::string post =
      "POST /loki/api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  for (const bool in_header : {true, false}) {
    RawConnection slow(f.server->port());
    ASSERT_TRUE(slow.connected());
    const std::string trickled =
        in_header ? "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" : std::string(40, ' ');
    if (!in_header) {
      slow.send(post + "Content-Length: 40\r\n\r\n");
    }
    size_t sent = 0;
    std::thread trickler([&] { sent = slow.trickle(trickled, 250ms); });
    std::this_thread::sleep_for(100ms);
    // The only thread is free again at the deadline (1 s), not when the trickle ends.
    const auto start = steady_clock::now();
    auto res = client.Get("/healthz");
    const auto waited = steady_clock::now() - start;
    trickler.join();
    ASSERT_TRUE(res) << (in_header ? "header" : "body");
    EXPECT_EQ(res->status, 200);
    EXPECT_LT(waited, 3s) << (in_header ? "header" : "body");
    EXPECT_LT(sent, trickled.size()) << (in_header ? "header" : "body");
  }
  // A body that takes longer than read_timeout but arrives at over 64 KiB/s (160 KiB/s) is served.
  const std::string body = kLokiJson + std::string(256 << 10, ' ');
  RawConnection steady(f.server->port());
  ASSERT_TRUE(steady.connected());
  steady.send(post + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n");
  for (size_t at = 0; at < body.size(); at += 16 << 10) {
    steady.send(body.substr(at, 16 << 10));
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_NE(steady.receive("\r\n\r\n").find("HTTP/1.1 204"), std::string::npos);
}

// The kubelet's probes time out after 3 s. Anyone who can reach the port, without a token (the
// header is read before it is checked), can hold every server thread with headers trickled for
// read_timeout (10 s), reopening each connection as it is dropped: on `listen` the probes then
// time out, and the leader leaves the Service and is restarted. probe_listen answers them
// whatever holds the push threads, and however many clients trickle to it too.
TEST(PushServer, ProbesAnswerWhileEveryThreadReadsATrickledHeader) {
  using std::chrono::steady_clock;
  using namespace std::chrono_literals;
  PushConfig config;
  config.threads = 2;
  config.read_timeout = 5s;  // past the probes' 3 s, as the default 10 s is
  config.probe_host = "127.0.0.1";
  config.probe_port = 0;
  Fixture f(1 << 20, config);
  ASSERT_GT(f.server->probePort(), 0);
  std::vector<std::unique_ptr<RawConnection>> slow;
  std::vector<std::jthread> tricklers;  // joined before the connections close, on any way out
  for (const int port : {f.server->port(), f.server->port(), f.server->probePort(),
                         f.server->probePort(), f.server->probePort()}) {
    slow.push_back(std::make_unique<RawConnection>(port));
    ASSERT_TRUE(slow.back()->connected());
    slow.back()->send("GET /healthz HTTP/1.1\r\nX-Slow: ");
    tricklers.emplace_back([c = slow.back().get()] { c->trickle(std::string(24, 'a'), 250ms); });
  }
  std::this_thread::sleep_for(200ms);
  httplib::Client probe("127.0.0.1", f.server->probePort());
  probe.set_connection_timeout(3, 0);  // the kubelet's timeoutSeconds
  probe.set_read_timeout(3, 0);
  for (const char* path : {"/readyz", "/healthz", "/metrics"}) {
    const auto start = steady_clock::now();
    auto res = probe.Get(path);
    EXPECT_TRUE(res) << path << " unanswered after "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() -
                                                                              start)
                            .count()
                     << " ms";
    EXPECT_EQ(res ? res->status : 0, 200) << path;
  }
  // Pushes are taken on `listen` only.
  auto push = probe.Post("/loki/api/v1/push", kLokiJson, "application/json");
  ASSERT_TRUE(push);
  EXPECT_EQ(push->status, 404);
  EXPECT_EQ(f.queue.depth().second, 0u);
}

// /readyz asks the API server (core/commands.cc sinksReady: up to 15 s when it does not answer).
// Liveness (/healthz) and scrapes on probe_listen must not wait behind it, or an API server
// outage gets the replicas restarted.
TEST(PushServer, ProbeListenAnswersHealthzWhileReadyzWaits) {
  using namespace std::chrono_literals;
  std::atomic<bool> release{false};
  PushConfig config;
  config.probe_host = "127.0.0.1";
  config.probe_port = 0;
  Fixture f(1 << 20, config, [&] {
    for (int i = 0; i < 100 && !release; ++i) {  // the API server not answering, for 10 s at most
      std::this_thread::sleep_for(100ms);
    }
    return true;
  });
  httplib::Client slow("127.0.0.1", f.server->probePort());
  slow.set_read_timeout(30, 0);
  int ready_status = 0;
  std::jthread readyz([&] {
    if (auto res = slow.Get("/readyz")) {
      ready_status = res->status;
    }
  });
  std::this_thread::sleep_for(200ms);
  httplib::Client probe("127.0.0.1", f.server->probePort());
  probe.set_connection_timeout(3, 0);  // the kubelet's timeoutSeconds
  probe.set_read_timeout(3, 0);
  for (const char* path : {"/healthz", "/metrics"}) {
    auto res = probe.Get(path);
    EXPECT_TRUE(res) << path << " waited for /readyz";
    EXPECT_EQ(res ? res->status : 0, 200) << path;
  }
  release = true;
  readyz.join();
  EXPECT_EQ(ready_status, 200);
}

// A chunked body's chunk-size lines and trailer count against no header or body limit in Beast:
// a line without its CRLF (an endless chunk extension, or trailer field) was buffered whole, so
// one client sending fast grew the server's memory without bound. Refused once it fills the
// connection's read buffer.
TEST(PushServer, AnEndlessChunkLineOrTrailerIsRefused) {
  PushConfig config;
  config.max_body_bytes = 1000;
  config.read_timeout = std::chrono::seconds(60);  // a server still reading would not answer
  Fixture f(1 << 20, config);
  const std::string head =
      "POST /loki/api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (const std::string& start : {std::string("1;ext="), std::string("0\r\nX-Trailer: ")}) {
    RawConnection c(f.server->port());
    ASSERT_TRUE(c.connected());
    c.send(head + start + std::string(1 << 20, 'a'));
    const std::string answer = c.receive("\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0U) << start << ": " << answer;
  }
  EXPECT_EQ(f.lokiJson()->status, 204);  // still serving
}

TEST(PushServer, AnExceptionFailsItsRequestNotTheServer) {
  Fixture f(1 << 20, {}, []() -> bool { throw std::runtime_error("sinks unknown"); });
  auto ready = f.client->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 500);
  EXPECT_EQ(ready->body, "internal error: sinks unknown\n");
  EXPECT_NE(
      f.metrics.render().find(R"(faultline_push_requests_rejected_total{reason="internal"} 1)"),
      std::string::npos);
  EXPECT_EQ(f.lokiJson()->status, 204);
}

TEST(PushConfig, ThreadsAndTheirErrors) {
  EXPECT_EQ(PushConfig::fromYaml(YAML::Load("{}")).threads, 4u);
  EXPECT_EQ(PushConfig::fromYaml(YAML::Load("{threads: 16}")).threads, 16u);
  for (const char* bad : {"{threads: 0}", "{threads: many}", "{thread: 2}"}) {
    try {
      PushConfig::fromYaml(YAML::Load(bad));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::runtime_error& e) {
      // An unknown key's error is a YAML::ParserException, its what() led by the line.
      EXPECT_NE(std::string(e.what()).find("http.thread"), std::string::npos) << e.what();
    }
  }
}

// An address is named as `listen` takes it: an IPv6 host in brackets. 2001:db8::/32 is for
// documentation (RFC 3849): no host has it, with IPv6 or without.
TEST(PushServer, AnAddressItCannotListenOnIsNamedAsListenTakesIt) {
  BatchQueue queue(1 << 20);
  Metrics metrics;
  PushConfig config;
  config.host = "2001:db8::1";
  config.port = 0;
  PushServer server(config, &queue, &metrics, [] { return true; });
  try {
    server.start();
    ADD_FAILURE() << "listened on 2001:db8::1";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("http: cannot listen on [2001:db8::1]:0: "),
              std::string::npos)
        << e.what();
  }
}

TEST(PushConfig, ProbeListen) {
  EXPECT_EQ(PushConfig::fromYaml(YAML::Load("{}")).probe_port, -1);
  const PushConfig config = PushConfig::fromYaml(YAML::Load(R"({probe_listen: "[::]:8081"})"));
  EXPECT_EQ(config.probe_host, "::");
  EXPECT_EQ(config.probe_port, 8081);
  try {
    PushConfig::fromYaml(YAML::Load("{probe_listen: 8081}"));
    ADD_FAILURE() << "a port without a host was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("http.probe_listen"), std::string::npos) << e.what();
  }
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
    EXPECT_TRUE(queue.push(b));
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
