// Applies taint decisions to Kubernetes nodes.
//
// Method (protocols.md 4.2 option A, as kubernetes/kubernetes pkg/controller/controller_utils.go
// PatchNodeTaints): GET /api/v1/nodes/{node}; if a taint with the same key and effect exists, do
// nothing; otherwise
//   PATCH /api/v1/nodes/{node}?fieldManager=faultline
//   Content-Type: application/strategic-merge-patch+json
//   {"metadata":{"resourceVersion":"<rv of the GET>"},
//    "spec":{"taints":[<existing taints unchanged>, <new taint with timeAdded>]}}
// spec.taints is an atomic list (core/v1 NodeSpec), so the whole list is sent and the
// resourceVersion precondition turns a concurrent write into 409 Conflict instead of a lost taint.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "core/decision.h"
#include "sinks/kubernetes/kube_client.h"

namespace faultline {

struct TaintSinkOptions {
  int max_attempts = 8;  // GET+PATCH rounds per decision before it counts as failed
  // Backoff before attempt n+1 is drawn uniformly from [b/2, b], b = min(initial * 2^(n-1), max).
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10'000};
};

// A DecisionSink that taints nodes through the API server from one worker thread.
//
// Per decision:
//   * node name not a DNS-1123 subdomain: logged, counted as failed, no request sent;
//   * taint with the same (key, effect) already on the node: counted as already_present;
//   * 409 Conflict on PATCH: re-GET and retry after backoff;
//   * 429, 5xx, 401 (token may just have rotated) or no response: retry after backoff;
//   * 404 (node gone) or any other status: logged and dropped (failed);
//   * attempts exhausted: logged, failed.
// All outcomes are logged with spdlog.
class TaintSink : public DecisionSink {
 public:
  struct Counters {
    uint64_t applied = 0;            // PATCH succeeded
    uint64_t already_present = 0;    // nothing to do
    uint64_t conflicts_retried = 0;  // 409 answers to our PATCH
    uint64_t failed = 0;             // decisions given up
  };

  explicit TaintSink(const KubeConfig& config, TaintSinkOptions options = {});
  // Drains the queue (including retries), then stops the worker.
  ~TaintSink() override;

  // Queues the decision and returns at once.
  void write(const Decision& decision) override;
  // Blocks until every decision written before the call has been handled.
  void flush() override;

  Counters counters() const;

 private:
  void run();
  void apply(const Decision& decision);
  void sleepBeforeRetry(int attempt);

  KubeClient client_;
  const TaintSinkOptions options_;

  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> already_present_{0};
  std::atomic<uint64_t> conflicts_retried_{0};
  std::atomic<uint64_t> failed_{0};

  std::mutex mu_;
  std::condition_variable work_cv_;  // queue_ gained an entry or stopping_ was set
  std::condition_variable idle_cv_;  // queue_ is empty and nothing is in flight
  std::deque<Decision> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after everything above is initialised
};

}  // namespace faultline
