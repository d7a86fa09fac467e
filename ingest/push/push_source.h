// Push ingest over HTTP: faultline as a Loki and OTLP/HTTP logs endpoint, so that Promtail,
// Grafana Alloy, winston-loki and OpenTelemetry collectors or SDKs can send to it directly.
//
//   POST /loki/api/v1/push  Content-Type application/json: JSON; anything else: protobuf
//                           PushRequest in snappy block format (ingest/push/loki.h). 204.
//                           X-Scope-OrgID becomes the label `tenant`.
//   POST /v1/logs           Content-Type application/x-protobuf or application/json
//                           (ExportLogsServiceRequest, ingest/otlp/otlp.h). 200 with an
//                           ExportLogsServiceResponse in the request's encoding; records
//                           without a line are counted in partial_success.
//   GET /healthz            200 while the process serves.
//   GET /readyz             200 once the rules are loaded and the sinks reachable, else 503.
//   GET /metrics            Prometheus text (core/metrics.h).
//
// Content-Encoding gzip and deflate (zlib or gzip format; cpp-httplib inflates them as the body
// streams in), identity, and snappy (a no-op) on both push paths; chunked request bodies are
// read like any other. Errors carry a one-line reason: text/plain for Loki, a google.rpc.Status
// in the request's encoding for OTLP (opentelemetry-proto docs/specification.md "OTLP/HTTP
// Response"):
//   400 malformed body (protobuf, snappy, gzip, JSON, selector); 401 missing or wrong bearer
//   token; 413 body over max_body_bytes after decompression (counted as it streams in, so a
//   zip bomb is never inflated whole; snappy: from its length header, before allocating); 415
//   unknown Content-Encoding or OTLP Content-Type; 429 with Retry-After when the pipeline queue
//   is full (retryable for Loki clients and OTLP alike).
// A 2xx means the records are queued for the pipeline, which drains the queue before the
// service exits. A line over max_line_bytes is truncated to that size and counted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/batch_queue.h"
#include "core/metrics.h"
#include "ingest/formats/labels.h"
#include "ingest/push/byte_gate.h"

namespace YAML {  // NOLINT(readability-identifier-naming): yaml-cpp's name
class Node;
}
namespace httplib {
class Server;
class Request;
class Response;
class ContentReader;
}  // namespace httplib

namespace faultline {

struct PushConfig {
  std::string host = "0.0.0.0";
  int port = 3100;
  size_t max_body_bytes = 64 << 20;   // request body, before and after decompression
  size_t max_line_bytes = 256 << 10;  // longer lines are truncated (and counted)
  // Bearer token for the push paths; empty: no auth. A file that holds no token refuses every
  // push (/dev/null: the listener serves health and metrics only, as on the Kafka path).
  std::string token_file;
  StreamRules streams;  // labels naming the node and the stream kind

  // Shape (unknown keys are errors):
  //   listen: "0.0.0.0:3100"          # host:port; port 0 picks a free one
  //   max_body_bytes: 67108864
  //   max_line_bytes: 262144
  //   token_file: /etc/faultline/push-token   # re-read when it changes
  //   labels:                         # each replaces the default list (ingest/formats/labels.h)
  //     node: [k8s.node.name, node, ...]
  //     pod: [k8s.pod.name, pod, ...]
  //     kernel: [{name: _TRANSPORT, value: kernel}, ...]
  // Throws std::runtime_error naming the offending key (e.g. "http.listen").
  static PushConfig fromYaml(const YAML::Node& node);
};

class PushServer {
 public:
  // `queue` and `metrics` must outlive the server. `ready` answers /readyz.
  PushServer(PushConfig config, BatchQueue* queue, Metrics* metrics, std::function<bool()> ready);
  PushServer(const PushServer&) = delete;
  PushServer& operator=(const PushServer&) = delete;
  PushServer(PushServer&&) = delete;
  PushServer& operator=(PushServer&&) = delete;
  ~PushServer();

  // Binds and serves on a thread pool. Throws std::runtime_error if it cannot listen.
  void start();
  // The bound port (useful with port 0).
  int port() const { return bound_port_; }
  // Stops accepting and waits for requests in flight; their 2xx batches are already queued.
  void stop();

 private:
  enum class Protocol { kLoki, kOtlp };
  void handlePush(Protocol protocol, const httplib::Request& req, httplib::Response& res,
                  const httplib::ContentReader& reader);
  bool authorized(const httplib::Request& req);
  void reject(Protocol protocol, bool json, int status, const std::string& reason,
              const std::string& metric_reason, httplib::Response& res);

  PushConfig config_;
  LabelFilter keep_{config_.streams};          // the OTLP attributes kept as labels
  ByteGate decoding_{config_.max_body_bytes};  // bodies decoded at once, in bytes
  BatchQueue* queue_;
  Metrics* metrics_;
  std::function<bool()> ready_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int bound_port_ = 0;

  std::mutex token_mu_;
  std::string token_;
  std::timespec token_mtime_{};
};

}  // namespace faultline
