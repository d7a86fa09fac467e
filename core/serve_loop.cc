#include "core/serve_loop.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

namespace faultline {

DecisionCounter::DecisionCounter(Metrics* metrics) : metrics_(metrics) {
  metrics_->declare("faultline_decisions_total", Metrics::Type::kCounter,
                    "Decisions made, by action; dry_run=\"true\" for those of rules in dry run");
  // Every series from the start: a series born at its first decision hides that decision from
  // increase() and rate(), which need a sample before it.
  for (const Decision::Action action :
       {Decision::Action::kTaint, Decision::Action::kUntaint, Decision::Action::kSuppressed,
        Decision::Action::kSuspect}) {
    for (const bool dry_run : {false, true}) {
      metrics_->set("faultline_decisions_total", labels(action, dry_run), 0);
    }
  }
}

std::string DecisionCounter::labels(Decision::Action action, bool dry_run) {
  return Metrics::label("action", std::string(actionName(action))) +
         (dry_run ? "," + Metrics::label("dry_run", "true") : "");
}

void DecisionCounter::write(const Decision& decision) {
  metrics_->add("faultline_decisions_total", labels(decision.action, decision.dry_run));
}

void runMatchWorker(size_t worker, BatchQueue& queue, Pipeline& pipeline, InOrder& in_order,
                    const std::function<void(const BatchQueue::Item&, const BatchMatch&)>& after) {
  struct Matched {
    BatchQueue::Item item;
    BatchMatch match;
  };
  std::deque<Matched> waiting;  // matched, in pop order, until their turn
  auto correlate = [&] { pipeline.correlate(waiting.front().match); };
  auto finish = [&] {
    after(waiting.front().item, waiting.front().match);
    queue.done(waiting.front().item);
    waiting.pop_front();
  };
  for (;;) {
    while (!waiting.empty() && in_order.tryRun(waiting.front().item.seq, correlate)) {
      finish();
    }
    // While a batch waits for its turn, another is matched rather than the core left idle; with
    // nothing queued, the worker waits for that turn, never in pop() holding a batch.
    std::optional<BatchQueue::Item> item = waiting.empty() ? queue.pop() : queue.tryPop();
    if (!item) {
      if (waiting.empty()) {
        return;  // closed and drained
      }
      in_order.run(waiting.front().item.seq, correlate);
      finish();
      continue;
    }
    Matched& m = waiting.emplace_back();
    m.item = std::move(*item);
    pipeline.match(worker, m.item.batch, &m.match);
  }
}

void runServe(const ServeSources& sources, Pipeline& pipeline, Metrics& metrics,
              const std::function<bool()>& ready, const std::stop_token& stop) {
  using T = Metrics::Type;
  BatchQueue queue(sources.queue_bytes);
  metrics.declare("faultline_queue_bytes", T::kGauge,
                  "Bytes of batches queued for or in the pipeline");
  metrics.declare("faultline_queue_batches", T::kGauge, "Batches waiting for the pipeline");
  metrics.declare("faultline_queue_capacity_bytes", T::kGauge, "Bound of the pipeline queue");
  metrics.declare("faultline_lines_total", T::kCounter, "Lines matched by the pipeline");
  metrics.declare("faultline_hits_total", T::kCounter, "Signature hits, by signature");
  metrics.declare("faultline_records_ahead_total", T::kCounter,
                  "Records stamped more than a minute past this service's clock, taken as stamped "
                  "a minute ahead (a node's clock runs ahead)");
  metrics.set("faultline_records_ahead_total", "", 0);
  metrics.declare("faultline_matcher_set_errors_total", T::kCounter,
                  "Lines the RE2::Set could not match (DFA out of memory), matched pattern by "
                  "pattern instead");
  metrics.set("faultline_matcher_set_errors_total", "", 0);
  metrics.declare("faultline_matcher_json_kernel_lines_total", T::kCounter,
                  "Kernel-stream lines a signature matched that are a JSON object's text (a "
                  "shipper's record of a line, e.g. Promtail's journal json: true): no hit");
  metrics.set("faultline_matcher_json_kernel_lines_total", "", 0);
  metrics.declare("faultline_correlator_nodes", T::kGauge,
                  "Nodes the correlator keeps state for: with hits within a week, or tainted");
  // What the correlator held back, so that an operator sees why lines decided nothing.
  metrics.declare("faultline_correlator_job_events_total", T::kCounter,
                  "Cluster windows taken for a job's event (its nodes' hits counted for none)");
  metrics.declare("faultline_correlator_attached_total", T::kCounter,
                  "Sympathetic hits attached to their cause (attach_to), not counted");
  metrics.declare("faultline_correlator_suppressed_total", T::kCounter,
                  "Hits dropped as effects of a cause that hit first (suppressed_by)");
  metrics.declare("faultline_correlator_repeats_total", T::kCounter,
                  "Hits repeating a node's line of the same second, taken as one event");
  metrics.declare("faultline_correlator_late_hits_total", T::kCounter,
                  "Hits more than max_lag behind the newest log time when they came");
  metrics.onRender([&queue, &pipeline](Metrics& m) {
    const auto [bytes, batches] = queue.depth();
    m.set("faultline_queue_bytes", "", static_cast<double>(bytes));
    m.set("faultline_queue_batches", "", static_cast<double>(batches));
    m.set("faultline_queue_capacity_bytes", "", static_cast<double>(queue.maxBytes()));
    m.set("faultline_correlator_nodes", "", static_cast<double>(pipeline.correlatorNodes()));
    const Correlator::Stats s = pipeline.correlatorStats();
    m.set("faultline_correlator_job_events_total", "", static_cast<double>(s.job_events));
    m.set("faultline_correlator_attached_total", "", static_cast<double>(s.attached));
    m.set("faultline_correlator_suppressed_total", "", static_cast<double>(s.suppressed));
    m.set("faultline_correlator_repeats_total", "", static_cast<double>(s.repeats));
    m.set("faultline_correlator_late_hits_total", "", static_cast<double>(s.late));
  });

  // Match workers (runMatchWorker). After a batch's turn, its worker adds the batch's lines and
  // hits by signature to the metrics, outside the turn.
  std::vector<std::string> signature_labels;  // the bank does not change while serving
  for (const Signature& sig : pipeline.bank().signatures) {
    signature_labels.push_back(Metrics::label("signature", sig.id));
    metrics.set("faultline_hits_total", signature_labels.back(), 0);  // as decisions, above
  }
  InOrder in_order;
  std::atomic<bool> pipeline_running{true};
  std::atomic<bool> warned_json_kernel{false};  // once, whichever worker sees such a line first
  auto work = [&](size_t worker) {
    std::vector<uint64_t> batch_hits(signature_labels.size());  // all 0 between batches
    uint64_t published_set_errors = 0;  // this worker's counts as last added to the metrics
    uint64_t published_json_kernel = 0;
    runMatchWorker(worker, queue, pipeline, in_order,
                   [&](const BatchQueue::Item& item, const BatchMatch& matched) {
                     // Counted once the batch's decisions are made: lines a scrape shows have
                     // been decided.
                     metrics.add("faultline_lines_total", "", item.batch.records.size());
                     if (matched.ahead != 0) {
                       metrics.add("faultline_records_ahead_total", "", matched.ahead);
                     }
                     for (const Hit& h : matched.hits) {
                       batch_hits[h.signature] += 1 + h.repeats;
                     }
                     for (const Hit& h : matched.hits) {  // one add per signature that hit
                       if (uint64_t& n = batch_hits[h.signature]; n != 0) {
                         metrics.add("faultline_hits_total", signature_labels[h.signature], n);
                         n = 0;
                       }
                     }
                     const MatcherStats& stats = pipeline.matcherStats(worker);
                     if (stats.set_errors != published_set_errors) {
                       metrics.add("faultline_matcher_set_errors_total", "",
                                   stats.set_errors - published_set_errors);
                       published_set_errors = stats.set_errors;
                     }
                     if (stats.json_kernel_lines != published_json_kernel) {
                       if (!warned_json_kernel.exchange(true)) {
                         spdlog::warn(
                             "matcher: kernel-stream lines that are a JSON object's text match "
                             "no kernel signature (faultline_matcher_json_kernel_lines_total): "
                             "ship the kernel's own line, or the record with encoding json");
                       }
                       metrics.add("faultline_matcher_json_kernel_lines_total", "",
                                   stats.json_kernel_lines - published_json_kernel);
                       published_json_kernel = stats.json_kernel_lines;
                     }
                   });
  };
  std::vector<std::thread> workers;
  for (size_t w = 0; w < pipeline.matchers(); ++w) {
    workers.emplace_back(work, w);
  }
  // Closes the queue, joins the workers and flushes the sinks on every way out, exceptions
  // included.
  auto drain = [&] {
    queue.close();
    for (std::thread& t : workers) {
      if (t.joinable()) {
        t.join();
      }
    }
    if (pipeline_running.exchange(false)) {
      pipeline.flush();
    }
  };

  std::unique_ptr<PushServer> http;
  std::unique_ptr<KafkaSource> kafka;
  try {
    if (sources.http) {
      http = std::make_unique<PushServer>(
          *sources.http, &queue, &metrics, [&] { return pipeline_running.load() && ready(); },
          sources.leader_elsewhere);
      http->start();
    }
    if (sources.kafka) {
      kafka = std::make_unique<KafkaSource>(*sources.kafka, sources.kafka_caught_up);
      metrics.declare("faultline_records_total", T::kCounter,
                      "Records accepted, by source and format");
      metrics.declare("faultline_bytes_total", T::kCounter,
                      "Bytes in, by source and format: push request bodies after "
                      "Content-Encoding, Kafka message values");
      metrics.declare("faultline_kafka_messages_total", T::kCounter, "Kafka messages, by topic");
      metrics.declare("faultline_kafka_malformed_total", T::kCounter,
                      "Kafka messages that did not decode or named no node for a record, by topic");
      metrics.declare("faultline_kafka_errors_total", T::kCounter,
                      "librdkafka errors, failed polls, offset store and commit failures");
      metrics.declare("faultline_kafka_consumer_lag", T::kGauge,
                      "Messages on this member's partitions not yet handled (high watermark minus "
                      "the stored, else committed, offset), by topic, as of librdkafka's last "
                      "statistics; -1 while no partition of the topic is read");
      metrics.onRender([source = kafka.get()](Metrics& m) {
        const KafkaStats stats = source->stats();
        uint64_t bytes = 0;
        for (const KafkaTopicStats& t : stats.topics) {
          const std::string topic = Metrics::label("topic", t.topic);
          m.set("faultline_kafka_messages_total", topic, static_cast<double>(t.messages));
          m.set("faultline_kafka_malformed_total", topic, static_cast<double>(t.malformed));
          // -1 too: a value left from before the brokers went away would read "caught up".
          m.set("faultline_kafka_consumer_lag", topic, static_cast<double>(t.lag));
          bytes += t.bytes;
        }
        // Beside push's bytes (README "/metrics": bytes in by source), with the format of Kafka's
        // faultline_records_total.
        m.set("faultline_bytes_total",
              Metrics::label("source", "kafka") + "," + Metrics::label("format", "all"),
              static_cast<double>(bytes));
        m.set("faultline_kafka_errors_total", "", static_cast<double>(stats.errors));
      });
      // Waits for room and then for the pipeline: the source stores offsets only after this
      // returns. No stop token: a batch the source read must be processed before it commits.
      kafka->run(
          [&](RecordBatch& batch) {
            std::promise<void> processed;
            BatchQueue::Item item;
            item.bytes = batch.memoryBytes();
            const size_t records = batch.records.size();
            item.batch = std::move(batch);
            item.done = [&processed] { processed.set_value(); };
            queue.push(item);
            processed.get_future().wait();
            metrics.add("faultline_records_total",
                        Metrics::label("source", "kafka") + "," + Metrics::label("format", "all"),
                        records);
          },
          stop);
    } else {
      // Polled: stop is requested from a signal handler, where no callback may run.
      while (!stop.stop_requested()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  } catch (...) {
    if (http) {
      http->stop();
    }
    drain();
    throw;
  }
  if (http) {
    http->stop();  // requests in flight finish; their batches are queued
  }
  drain();
}

}  // namespace faultline
