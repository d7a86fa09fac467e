// Turns one Kafka message into LogRecords. Four encodings, one per topic:
//
//  raw   The value is the log line. The OTel collector's kafka exporter `raw` encoding
//        json.Marshal-s every non-bytes body, so a string body arrives as a quoted JSON string
//        (contrib exporter/kafkaexporter internal/marshaler/raw_marshaler.go, issue #32237); a
//        value that starts with '"' and is a valid JSON string is unquoted. Resource attributes
//        are dropped by that encoding, so the node comes from a header or the message key.
//  json  One JSON object per message, as written by Vector's kafka sink (`encoding.codec: json`),
//        Fluent Bit's kafka output (`format json`) and rsyslog omkafka with a JSON template.
//        Field names per shipper: vector.dev/docs/reference/configuration/sources/kubernetes_logs,
//        fluent/fluent-bit-docs pipeline/outputs/kafka.md.
//  otlp_proto  The OTel collector kafka exporter's default: one message per export batch, the
//        value is LogsData bytes (wire-identical to ExportLogsServiceRequest; contrib
//        exporter/kafkaexporter internal/marshaler/pdata_marshaler.go), decoded by
//        decodeOtlpProto() (ingest/otlp/otlp.h).
//  otlp_json   The same message in the OTLP JSON mapping (plog.JSONMarshaler), decoded by
//        decodeOtlpJson() (ingest/formats/formats.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/record.h"
#include "ingest/formats/labels.h"

namespace faultline {

enum class KafkaEncoding : uint8_t { kRaw, kJson, kOtlpProto, kOtlpJson };

// Dotted field paths for the json encoding, each list tried in order; the first present wins.
// A path "a.b" matches a flat key "a.b" as well as the nested {"a": {"b": ...}}. Of two such
// spellings of a line or time path in one message, the first in document order is taken; a node,
// pod or job path (or a kernel marker) found twice with different values (null or "" against a
// value counts) leaves the record's node, stream or job ambiguous, and the message is refused as
// malformed: with Fluent Bit's Merge_Log a pod's own JSON keys come first and could pass for the
// shipper's. So is a message whose node paths under "kubernetes." (the shippers' metadata maps)
// name two different non-empty values, or one pod label two (Vector's kubernetes.pod_labels.L
// against Fluent Bit's kubernetes.labels.L): a pod writing Vector's kubernetes.pod_node_name
// beside Fluent Bit's kubernetes.host would otherwise name any node.
struct KafkaJsonFields {
  std::vector<std::string> line = {"message", "log", "msg", "MESSAGE", "body"};
  std::vector<std::string> node = {"kubernetes.pod_node_name",
                                   "kubernetes.host",
                                   "host.name",
                                   "hostname",
                                   "host",
                                   "_HOSTNAME",
                                   "k8s.node.name"};
  // Strings: RFC 3339; numbers or digit strings: epoch seconds / ms / µs / ns by magnitude
  // (Fluent Bit's default `double` is float seconds, journald's __REALTIME_TIMESTAMP is µs).
  std::vector<std::string> time = {"timestamp", "@timestamp", "time", "__REALTIME_TIMESTAMP"};
  // Any of these present and non-empty makes the record a pod stream (Vector: pod_namespace,
  // Fluent Bit: namespace_name; journald's CONTAINER_NAME of a container's output, as
  // StreamRules has it, whatever SYSLOG_IDENTIFIER the container's tag gave it).
  std::vector<std::string> pod = {"kubernetes.pod_name",
                                  "kubernetes.pod_namespace",
                                  "kubernetes.namespace_name",
                                  "kubernetes.container_name",
                                  "k8s.pod.name",
                                  "CONTAINER_NAME"};
  // The pod's job, the first present and non-empty, kept as the record's label k8s.job.name
  // (core/record.h kJobLabels: the NCCL rules count distinct jobs): the Job controller's,
  // Kubeflow's and JobSet's pod labels in Vector's kubernetes.pod_labels and Fluent Bit's
  // kubernetes.labels maps. No top-level job key is read: such keys are the pod's own to write
  // (Fluent Bit's Merge_Log without Merge_Log_Key), and a pod naming its own jobs could count as
  // several. Merge_Log without a key still lets a pod's JSON claim a job its shipper's map does
  // not name, as it can a node (README, "The live service"): set Merge_Log_Key.
  // The broadest first, as kJobLabels: a JobSet's pods also carry their child Job's job-name.
  std::vector<std::string> job = {"kubernetes.pod_labels.jobset.sigs.k8s.io/jobset-name",
                                  "kubernetes.pod_labels.training.kubeflow.org/job-name",
                                  "kubernetes.pod_labels.job-name",
                                  "kubernetes.pod_labels.batch.kubernetes.io/job-name",
                                  "kubernetes.labels.jobset.sigs.k8s.io/jobset-name",
                                  "kubernetes.labels.training.kubeflow.org/job-name",
                                  "kubernetes.labels.job-name",
                                  "kubernetes.labels.batch.kubernetes.io/job-name"};
};

struct KafkaTopicConfig {
  std::string name;
  KafkaEncoding encoding = KafkaEncoding::kRaw;
  // The stream kind of records that carry no pod or kernel marker (for raw: of every record).
  StreamKind stream = StreamKind::kOther;
  // Header whose value names the node; empty disables the header lookup.
  std::string node_header = "node";
  KafkaJsonFields fields;
};

// The parts of a Kafka message the decoders read. Plain views so that tests need no broker.
struct KafkaMessage {
  std::string_view value;
  std::string_view key;
  // The value of the topic's node_header, empty if absent; null if the topic reads no header.
  // Called only for a record whose node the message itself does not name (raw: every record):
  // librdkafka parses a message's headers on first access, at 1,650–1,770 instructions for one
  // header (callgrind), six times the rest of a raw line's decoding. The view lives as long as
  // `value`.
  std::function<std::string_view()> node_header;
  int64_t timestamp_ms = -1;  // message timestamp in ms since the epoch, -1 if none
  // Keeps the views above alive. otlp_proto records point into them without a copy, and the
  // batch then holds `owner`; null if they outlive the batch anyway.
  std::shared_ptr<const void> owner;
};

// Decodes the messages of one topic. Not thread-safe; one per topic per consumer.
class KafkaDecoder {
 public:
  explicit KafkaDecoder(KafkaTopicConfig config);
  KafkaDecoder(const KafkaDecoder&) = delete;
  KafkaDecoder& operator=(const KafkaDecoder&) = delete;
  KafkaDecoder(KafkaDecoder&&) noexcept;
  KafkaDecoder& operator=(KafkaDecoder&&) noexcept;
  ~KafkaDecoder();

  // Appends the message's records (none for a malformed one) to `batch`: one for raw and json,
  // one per LogRecord for the otlp encodings. Time: for json the first parseable time field,
  // for otlp the record's time; else (and always for raw) the message timestamp if it fits int64
  // ns (not a producer's µs), else `receive_ns` (ns since the epoch). Node: for json the first
  // node field, for otlp the first of StreamRules::node_labels among the attributes; else the
  // node header, else the key if it looks like a node name (OTel's resource-hash keys are
  // binary). Stream: pod if a pod field or attribute is present; kernel if journald's _TRANSPORT
  // or SYSLOG_IDENTIFIER (json also: rsyslog's programname) is "kernel" and no SYSLOG_FACILITY
  // names a facility other than 0 (StreamRules::facility_labels) nor _TRANSPORT another transport
  // (transport_labels); other if one does (a process's record); else the topic's `stream`. Returns
  // false if the message is malformed (empty value; json: not an object, no line field that is a
  // string or an array of byte values (journalctl -o json's rendering of a line that is not
  // printable UTF-8), or a node or label path twice with different values (KafkaJsonFields); otlp:
  // does not decode, or holds no LogRecord with a line, as another encoding's message would), or if
  // a record names no node, or (otlp) a LogRecord has no line: such a record is skipped, the
  // message's other records kept. The topic and the cause (with the parser's words) are logged
  // the first time of each cause, so that a count of malformed messages can be explained. The
  // caller counts the message.
  bool decode(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const;
  // Whether records point into the message (otlp_proto), so that decode() needs its `owner`;
  // the other encodings copy what they keep. A raw message is one short line: copying it lets
  // the source free the message at once, where holding ten thousand of them for a batch's life
  // (each with librdkafka's objects and a shared owner) cost more in malloc than the copy.
  bool pointsIntoMessages() const;

 private:
  bool decodeRaw(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const;
  bool decodeJson(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const;
  bool decodeOtlp(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const;
  // Returns false for a message with a record that names no node, logging the topic once.
  bool refuseNodeless() const;
  // Returns false for a malformed message, logging the topic, `cause` (what the message is, e.g.
  // "is not JSON") and `detail` (the parser's words, or empty) the first time of each cause.
  bool refuse(std::string_view cause, std::string_view detail) const;

  KafkaTopicConfig config_;
  StreamRules rules_;                      // pod labels = fields.pod; kernel labels + programname
  std::vector<std::string> label_fields_;  // json fields copied as labels for classify()
  StreamRules otlp_rules_;                 // otlp: the defaults of ingest/formats/labels.h
  LabelFilter otlp_keep_{otlp_rules_};     // otlp: the attributes kept as labels
  // json (and quoted raw values): simdjson's parser and the field paths, found in one walk.
  class JsonFields;
  std::unique_ptr<JsonFields> json_;
  mutable bool warned_nodeless_ = false;            // refuseNodeless() logs a topic once
  mutable std::vector<std::string> warned_causes_;  // refuse() logs each cause once
};

}  // namespace faultline
