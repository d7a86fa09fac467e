// Kafka ingest: a balanced consumer group member (librdkafka C API) that decodes each message
// with the topic's KafkaDecoder and hands batches to the pipeline. Offsets are stored only after
// the handler returns, i.e. after the batch's decisions reached the sinks, so a crash re-reads
// (at-least-once) rather than loses lines.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "core/source.h"
#include "ingest/kafka/decoders.h"

namespace YAML {  // NOLINT(readability-identifier-naming): yaml-cpp's name
class Node;
}

namespace faultline {

struct KafkaConfig {
  std::string brokers;  // librdkafka bootstrap.servers, "host:port[,host:port]"
  std::string group_id = "faultline";
  std::vector<KafkaTopicConfig> topics;
  // Extra librdkafka properties (CONFIGURATION.md), e.g. security.protocol, session.timeout.ms.
  // fromYaml adds them to these defaults, overriding them. enable.auto.offset.store,
  // enable.auto.commit and group.id must not be set: offsets are stored after each batch is
  // handled and then auto-committed, and the group is group_id. The defaults differ from
  // librdkafka's (bench/README.md, "Kafka fetches under glibc's mmap threshold"):
  //   fetch.max.bytes 24 MiB, not 50: glibc maps each block of 32 MiB or more afresh
  //     (keepFreedMemory, core/commands.h), so each full fetch response faulted its pages in again;
  //   queued.max.messages.kbytes 88 MiB, not 64, and queued.min.messages 200,000, not 100,000:
  //     librdkafka 2.0.2 fetches again only about a second after its pre-fetch queue passes one
  //     of these, and a catch-up reads about the queue plus one fetch per second. The payload
  //     held stays as before: 88 + 24 MiB against 64 + 50;
  //   fetch.wait.max.ms 100, not 500: a partition held back (max_skew_ns) and released fetches
  //     again, and librdkafka sends a broker one fetch at a time, so its next fetch waited out the
  //     one in flight that the broker held for want of data: up to 500 ms per release in a
  //     catch-up (bench/kafka_skew.sh). An idle consumer asks each broker 10 times a second;
  //   statistics.interval.ms 5000, not 0: librdkafka's statistics give KafkaTopicStats::lag
  //     (0 turns it off).
  std::map<std::string, std::string> properties = {{"fetch.max.bytes", "25165824"},
                                                   {"fetch.wait.max.ms", "100"},
                                                   {"queued.max.messages.kbytes", "90112"},
                                                   {"queued.min.messages", "200000"},
                                                   {"statistics.interval.ms", "5000"}};
  size_t batch_max_messages = 10000;  // a batch closes at this many messages or records
  // ... or once it holds this many bytes (RecordBatch::memoryBytes(): copied lines and labels,
  // held messages, record arrays), so that long lines cannot grow one batch without bound.
  size_t batch_max_bytes = size_t{16} << 20;
  int batch_timeout_ms = 100;  // a batch is handed on at most this long after its first message
  // How far (ns of event time) one partition's records may run ahead of those of another, of any
  // topic, that has messages left to read (librdkafka's high watermark is past its last message
  // handed on); 0: no bound. Not a YAML key: serve sets half its max_lag. A catch-up fetches each
  // partition by bytes, so a partition of quiet nodes ran an hour ahead of one of chatty nodes,
  // and the correlator found the chatty one's nodes silent (Correlator::advance) and decided a
  // port DOWN lasting while its ACTIVE was still unread. A message whose newest record time (at
  // most a minute past the clock, as the pipeline takes it) is beyond the bound is held back:
  // its partition paused and set back to it (a seek), so that nothing polled of it is kept, and
  // fetched and decoded again once the others have caught up. A partition assigned and not read
  // yet, or with messages left and none handed on, holds the others for 10 s at most (until its
  // next message: a broker that does not answer must not stop the others).
  int64_t max_skew_ns = 0;

  // Shape (unknown keys are errors):
  //   brokers: "host:port"             # required
  //   group_id: faultline
  //   batch_max_messages: 10000
  //   batch_max_bytes: 16777216
  //   batch_timeout_ms: 100
  //   properties: {session.timeout.ms: "6000"}
  //   topics:                          # required, non-empty
  //     - name: otlp_logs              # required
  //       encoding: raw                # raw | json | otlp_proto | otlp_json
  //       stream: kernel               # kernel | pod | other (default other)
  //       node_header: node            # "" disables
  //       fields: {line: [..], node: [..], time: [..], pod: [..], job: [..]}  # json only;
  //                                    # each replaces its defaults (JsonRecordFields)
  // Throws std::runtime_error naming the offending key (e.g. "kafka.topics[1].encoding").
  // Properties are checked against librdkafka here, so an unknown one fails at load time.
  static KafkaConfig fromYaml(const YAML::Node& node);
};

struct KafkaTopicStats {
  std::string topic;
  uint64_t messages = 0;
  uint64_t bytes = 0;  // sum of message value sizes
  // Messages that did not decode or that name no node for a record (KafkaDecoder::decode).
  uint64_t malformed = 0;
  // Consumer lag in messages: on each partition of the topic this member fetches, the high
  // watermark minus the offset stored after the last batch handled (else the group's committed
  // offset), summed; a partition with neither (the group has handled none of it yet) is left
  // out. As of librdkafka's last statistics (STATISTICS.md: consumer_lag_stored, else
  // consumer_lag), every statistics.interval.ms; -1 before the first, and while this member
  // fetches no partition of the topic (brokers unreachable, none assigned). A paused partition
  // (a busy pipeline) is not fetched, so its high watermark is the one before the pause.
  int64_t lag = -1;
};

struct KafkaStats {
  std::vector<KafkaTopicStats> topics;  // in config order
  uint64_t errors = 0;  // librdkafka errors, failed polls, offset store and commit failures
};

class KafkaSource : public Source {
 public:
  // `caught_up`, if given, is set once every partition assigned has been read to its end (its
  // end event came, or its position reached the high watermark first seen: a partition written
  // to more often than fetch.wait.max.ms sends no end event) and every batch read was handled
  // (decisions handed to the sinks): from then on the decisions are about the present, where
  // before they were about the backlog of a new consumer group (the topic's retention). Never
  // cleared.
  explicit KafkaSource(KafkaConfig config, std::atomic<bool>* caught_up = nullptr);
  KafkaSource(const KafkaSource&) = delete;
  KafkaSource& operator=(const KafkaSource&) = delete;
  KafkaSource(KafkaSource&&) = delete;
  KafkaSource& operator=(KafkaSource&&) = delete;
  ~KafkaSource() override;

  // Subscribes, then polls until `stop`: each batch of up to batch_max_messages messages or
  // records, closed too by the message that brings it to batch_max_bytes (or what librdkafka had
  // fetched when it ran out, or what arrived within batch_timeout_ms of its first message), is
  // decoded, passed to `handle`, and its offsets stored; auto commit sends them. Messages are taken
  // from librdkafka's queue up to 256 per call, and the time of that call is each one's receive
  // time (KafkaDecoder::decode's `receive_ns`). On stop the partial batch is handled too, and the
  // consumer closes (commits the stored offsets, leaves the group), waited for 5 s at most: with
  // the brokers down it is left behind and the partitions' next owner reads from the last
  // committed offsets. otlp_proto records point into librdkafka messages that the batch holds, so
  // a handler that moves the batch out must release it before run() returns. With max_skew_ns,
  // partitions are read in step by event time: a partition that would run ahead of another with
  // messages left is paused until that one has caught up; `caught_up` waits for what that holds
  // back. Throws std::runtime_error if the consumer cannot be created or subscribed, or after a
  // fatal consumer error (rd_kafka_fatal_error: the partial batch handled, the consumer closed),
  // and rethrows what `handle` throws, without storing that batch's offsets.
  void run(const BatchHandler& handle, std::stop_token stop) override;

  // Safe to call from any thread while run() is active.
  KafkaStats stats() const;

 private:
  struct Counters {
    std::atomic<uint64_t> messages{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> malformed{0};
    std::atomic<int64_t> lag{-1};
  };

  // Sets each topic's lag from one librdkafka statistics document (STATISTICS.md).
  void noteStatistics(std::string_view json);

  KafkaConfig config_;
  std::vector<KafkaDecoder> decoders_;    // index = topic index in config_.topics
  std::unique_ptr<Counters[]> counters_;  // same index
  std::atomic<uint64_t> errors_{0};
  std::atomic<bool>* caught_up_;
};

}  // namespace faultline
