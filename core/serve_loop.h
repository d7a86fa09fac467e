// The live service's plumbing: every configured source (Kafka consumer, HTTP push server) feeds
// the pipeline's match workers (Pipeline::matchers(), `match_threads`) through a bounded
// BatchQueue (core/batch_queue.h). Each worker matches whole batches with its own Matcher; the
// batches' hits are then correlated one batch at a time in queue order.
//
//   Kafka   the source's thread pushes each batch (waiting for room) and waits until the
//           pipeline has processed it before the source stores the batch's offsets; while it
//           waits long, its partitions are paused and it keeps polling (ingest/kafka).
//   HTTP    each request's batch is offered to the queue; a full queue answers 429.
//
// Memory stays bounded under a client faster than the matcher: queued and in-process batches
// hold at most queue_bytes (RecordBatch::memoryBytes()), or one batch larger than that taken
// into an empty queue, and beyond that the HTTP server holds
// only the requests in flight: per server thread (http.threads) a body of at most
// max_body_bytes as received and, if compressed, its inflated copy of at most max_body_bytes; and
// the decoding of at most max_body_bytes of bodies at once (ingest/push/byte_gate.h), each needing
// up to about 15 times its body (simdjson's parser for Loki JSON, DOM; OTLP JSON, On Demand: about
// 7 times), its records and labels at most 16 times by size (DecodeBound, core/record.h), twice
// that by capacity as their arrays double, three times while one is copied; a refused request is
// dropped.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>

#include "core/batch_queue.h"
#include "core/decision.h"
#include "core/metrics.h"
#include "core/pipeline.h"
#include "ingest/kafka/kafka_source.h"
#include "ingest/push/push_source.h"

namespace faultline {

struct ServeSources {
  std::optional<KafkaConfig> kafka;
  std::optional<PushConfig> http;
  size_t queue_bytes = 256 << 20;
  // Set when the Kafka source has caught up with its backlog (KafkaSource's `caught_up`).
  std::atomic<bool>* kafka_caught_up = nullptr;
  // With leader election: the other replica that holds the Lease, else "" (PushServer's
  // `leader_elsewhere`: pushes are refused while it names one).
  std::function<std::string()> leader_elsewhere;
};

// Runs until `stop` is requested: then the Kafka source processes the batch it holds, commits and
// leaves its group, the HTTP server stops accepting (pushes answered meanwhile are queued), the
// pipeline drains the queue (so nothing answered with a 2xx is lost), and the sinks are flushed.
// `ready` tells whether the sinks are reachable (for /readyz). Throws std::runtime_error if a
// source cannot start (HTTP port taken, bad Kafka settings).
void runServe(const ServeSources& sources, Pipeline& pipeline, Metrics& metrics,
              const std::function<bool()>& ready, const std::stop_token& stop);

// One of serve's match workers (runServe starts Pipeline::matchers() of them, `worker` 0, 1, ...):
// pops batches until `queue` is closed and drained; matches each with the worker's own Matcher,
// without a lock; correlates it in its turn, one batch at a time in the order pop() numbered
// them (`in_order`, shared by the workers), so that each node's hits reach the correlator in
// arrival order whichever worker matched them; then calls `after` with the batch and what
// matching found (its hits moved from: Pipeline::correlate), and releases the batch
// (BatchQueue::done). The turn costs per hit and per job run, never per record
// (Pipeline::match). A worker whose batch is not yet in turn matches the next queued batch
// meanwhile instead of waiting; it waits for the turn only when nothing is queued. Its held
// batches stay counted in the queue's bytes until released.
void runMatchWorker(size_t worker, BatchQueue& queue, Pipeline& pipeline, InOrder& in_order,
                    const std::function<void(const BatchQueue::Item&, const BatchMatch&)>& after);

// A DecisionSink that counts decisions by action in faultline_decisions_total, with
// dry_run="true" for the decisions of rules in dry run (Decision::dry_run).
class DecisionCounter : public DecisionSink {
 public:
  explicit DecisionCounter(Metrics* metrics);
  void write(const Decision& decision) override;

 private:
  // The series' labels: action="taint", and dry_run="true" for a rule in dry run.
  static std::string labels(Decision::Action action, bool dry_run);
  Metrics* metrics_;
};

}  // namespace faultline
