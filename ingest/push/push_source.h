// Push ingest over HTTP: faultline as a Loki and OTLP/HTTP logs endpoint, so that Promtail,
// Grafana Alloy, winston-loki and OpenTelemetry collectors or SDKs can send to it directly.
//
//   POST /loki/api/v1/push  Content-Type application/json: JSON; anything else: protobuf
//                           PushRequest in snappy block format (ingest/push/loki.h). 204.
//                           X-Scope-OrgID becomes the label `tenant`. Entries of a stream
//                           whose labels name no node (StreamRules::node_labels) are dropped
//                           and counted (faultline_records_rejected_total), the others taken.
//   POST /v1/logs           Content-Type application/x-protobuf or application/json
//                           (ExportLogsServiceRequest, ingest/otlp/otlp.h). 200 with an
//                           ExportLogsServiceResponse in the request's encoding; records
//                           without a line or a node are counted in partial_success.
//   GET /healthz            200 while the process serves; 503 with the reason while the pipeline
//                           holds batches and has finished none for stall_after (1 min).
//   GET /readyz             200 once the rules are loaded and the sinks reachable, else 503.
//   GET /metrics            Prometheus text (core/metrics.h).
//
// With probe_listen, a second listener serves /healthz, /readyz and /metrics only (anything else:
// 404; what is not HTTP, or not read within 120 s, is closed unanswered), on one thread of its
// own that reads and writes asynchronously: no client holds it, so the kubelet's probes (3 s) and
// scrapes are answered whatever the clients of `listen` do. `ready` runs on one more thread, so
// that /healthz and /metrics never wait for it (it may wait for the API server). On `listen` they
// wait for a free push thread, and `threads` clients trickling headers (no token needed: the
// header is read before it is checked) or sending slow bodies hold every one.
// Served over HTTP/1.1 (Boost.Beast) by `threads` threads, one request per thread at a time; idle
// keep-alive connections hold no thread and are closed after 120 s. Bodies are read in pieces of
// up to 64 KiB. A request's header must arrive within read_timeout (10 s) of its first byte, and
// its body within read_timeout plus 1 s per 64 KiB received (512 kbit/s, a slow link), with no
// pause as long as read_timeout; else the connection is dropped unanswered. So a client trickling
// bytes holds a thread for at most about 20 s, and one holding it longer must keep sending 64
// KiB/s. Content-Encoding gzip, deflate and zlib (zlib, raw deflate as Loki reads it, or gzip
// format; inflated whole with libdeflate), zstd, x-snappy-framed and identity on both push paths
// (ingest/push/inflate.h); snappy is a no-op on Loki's and decompressed (block or framed) on
// OTLP's; chunked request bodies are read like any other (a chunk-size line or trailer over
// 64 KiB gets 400); `Expect: 100-continue` is answered.
// A push that fails the bearer token check is answered 401 from its header, its body unread (the
// connection is closed after). Errors carry a one-line reason: text/plain for Loki, a
// google.rpc.Status in the request's encoding for OTLP (opentelemetry-proto
// docs/specification.md "OTLP/HTTP Response"):
//   400 malformed request or body (HTTP, protobuf, snappy, gzip, zstd, JSON, selector); 401 missing
//   or wrong bearer token; 413 body over max_body_bytes as sent or after decompression (a zip bomb
//   is inflated only up to max_body_bytes; snappy: from its length header, before allocating); 415
//   unknown Content-Encoding or OTLP Content-Type; 429 with Retry-After when the pipeline queue
//   is full (retryable for Loki clients and OTLP alike); 503 with Retry-After, the connection
//   closed after it, while another replica leads (`leader_elsewhere`: a follower's lines would
//   never taint, and the leader would never see them; the client's retry goes through the
//   Service again, to the leader); 500 if answering threw (e.g. out of memory), in text/plain.
// A 2xx means the records are queued for the pipeline, which drains the queue before the
// service exits. A line over max_line_bytes is truncated to that size and counted. A rejected
// push but for 429 and 503 (load, failover: the client retries) is also logged, with its reason,
// at most once a minute per metric reason: a shipper sending what is refused loses its lines.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "core/batch_queue.h"
#include "core/metrics.h"
#include "ingest/formats/labels.h"
#include "ingest/push/byte_gate.h"

namespace YAML {  // NOLINT(readability-identifier-naming): yaml-cpp's name
class Node;
}

namespace faultline {

struct PushConfig {
  std::string host = "0.0.0.0";
  int port = 3100;
  // The health and metrics listener (probe_listen); probe_port -1: none.
  std::string probe_host = "0.0.0.0";
  int probe_port = -1;
  size_t max_body_bytes = 64 << 20;   // request body, before and after decompression
  size_t max_line_bytes = 256 << 10;  // longer lines are truncated (and counted)
  // Requests served at once, one per thread, each holding at most one body: idle connections
  // hold none. More threads than cores only help when clients are slow to send a request.
  size_t threads = 4;
  // Bearer tokens for the push paths, one per line (a push with any of them is taken, so a
  // rotation adds the new token, moves the shippers to it, then removes the old); empty: no
  // auth. Read again whenever the file changes; a file that holds no token, or cannot be read,
  // refuses every push (/dev/null: the listener serves health and metrics only, as on the Kafka
  // path).
  std::string token_file;
  StreamRules streams;  // labels naming the node and the stream kind
  // The bound on reading a request's header, on any pause, and the body's bound before its
  // allowance per byte (see above). Not in the YAML: tests shorten it.
  std::chrono::milliseconds read_timeout{10000};
  // /healthz answers 503 once the pipeline has held batches this long without finishing one
  // (BatchQueue::stalled): a wedged process (a deadlock, a sink stuck in a write) is restarted by
  // its liveness probe. A batch takes milliseconds (bench/README.md), so a minute is no load
  // spike. Not in the YAML: tests shorten it.
  std::chrono::milliseconds stall_after{60000};

  // Shape (unknown keys are errors):
  //   listen: "0.0.0.0:3100"          # host:port; port 0 picks a free one
  //   probe_listen: "0.0.0.0:8081"    # optional: /healthz, /readyz, /metrics only (see above)
  //   max_body_bytes: 67108864
  //   max_line_bytes: 262144
  //   threads: 4
  //   token_file: /etc/faultline/push-token   # one token per line; re-read when it changes
  //   labels:                         # each replaces the default list (ingest/formats/labels.h)
  //     node: [k8s.node.name, node, ...]
  //     pod: [k8s.pod.name, pod, ...]
  //     kernel: [{name: _TRANSPORT, value: kernel}, ...]
  // Throws std::runtime_error naming the offending key (e.g. "http.listen").
  static PushConfig fromYaml(const YAML::Node& node);
};

// Throws std::runtime_error as PushServer::start() would if `next`'s listen or probe_listen
// address cannot be bound; checks only those whose port is neither of `running`'s (bound by this
// process, freed by the restart; nullptr: none). The socket is closed again. Serve's check of a
// restart on new rules.
void checkListen(const PushConfig& next, const PushConfig* running);

class PushServer {
 public:
  // `queue` and `metrics` must outlive the server. `ready` answers /readyz. `leader_elsewhere`
  // (if given) names the replica that holds the Lease when another one does, else returns "";
  // while it names one, pushes are refused with 503 (counted as reason `not_leader`).
  PushServer(PushConfig config, BatchQueue* queue, Metrics* metrics, std::function<bool()> ready,
             std::function<std::string()> leader_elsewhere = {});
  PushServer(const PushServer&) = delete;
  PushServer& operator=(const PushServer&) = delete;
  PushServer(PushServer&&) = delete;
  PushServer& operator=(PushServer&&) = delete;
  ~PushServer();

  // Binds and serves on config.threads threads, and probe_listen on one more. Throws
  // std::runtime_error if it cannot listen on either.
  void start();
  // The bound port (useful with port 0).
  int port() const { return bound_port_; }
  // The bound probe_listen port; -1 without probe_listen.
  int probePort() const { return bound_probe_port_; }
  // Stops accepting; requests being served finish (their 2xx batches are queued); connections
  // waiting for a request, or whose request no thread has begun, are closed unanswered (their
  // clients retry).
  void stop();

 private:
  enum class Protocol { kLoki, kOtlp };
  // A request as the handlers see it: the header fields they read ("" when absent), and the body
  // as sent.
  struct Request {
    std::string method;  // "GET", "POST", ...
    std::string path;    // the target without its query
    std::string content_type;
    std::string content_encoding;
    std::string authorization;
    std::string tenant;  // X-Scope-OrgID
    std::string body;
    bool body_over_limit = false;  // over max_body_bytes, so not read whole
  };
  struct Response {
    int status = 200;
    std::string content_type;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type
    bool close = false;  // close the connection after the answer
  };
  struct Listener;  // the listening socket and the connection loop (Boost.Beast), in the .cc file
  struct ProbeListener;  // probe_listen's socket and its asynchronous loop, in the .cc file
  Response answer(Request& req);  // routes to the handlers
  Response handlePush(Protocol protocol, Request& req);
  bool authorized(const Request& req);
  Response reject(Protocol protocol, bool json, int status, const std::string& reason,
                  const std::string& metric_reason);
  // Whether a refusal of `metric_reason` is to be logged now: none was in the last minute.
  bool logNow(const std::string& metric_reason);
  // Counts an error answer in faultline_push_requests_rejected_total{reason}.
  void countRejected(const std::string& metric_reason);

  PushConfig config_;
  LabelFilter keep_{config_.streams};          // the OTLP attributes kept as labels
  ByteGate decoding_{config_.max_body_bytes};  // bodies decoded at once, in bytes
  BatchQueue* queue_;
  Metrics* metrics_;
  std::function<bool()> ready_;
  std::function<std::string()> leader_elsewhere_;
  std::unique_ptr<Listener> listener_;
  std::vector<std::thread> threads_;
  int bound_port_ = 0;
  std::unique_ptr<ProbeListener> probe_;
  int bound_probe_port_ = -1;

  std::atomic<bool> warned_nodeless_{false};  // a push named no node for a record: logged once
  std::mutex logged_mu_;
  // Metric reason -> when a rejection of it was last logged.
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> logged_;
  // The token file as last read: its tokens, and what identifies that version of it.
  // (inode, size in bytes, mtime and ctime in ns since the epoch)
  using TokenFileId = std::tuple<ino_t, off_t, int64_t, int64_t>;
  std::mutex token_mu_;
  std::vector<std::string> tokens_;
  std::optional<TokenFileId> token_file_id_;
};

}  // namespace faultline
